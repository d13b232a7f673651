"""The discover / embed / encode stages through the cached runner (small, fast settings)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cape_pipeline import CausalGraph
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.pipeline import run_pipeline

FAST = {
    "ingest": {"n_nodes": 8, "n_obs": 300, "seed": 1},
    "discover": {"low_rank.epochs": 3, "low_rank.max_outer": 2},
    "embed": {"max_epochs": 5, "dim": 4},
}


def test_discover_writes_dag_and_scores_against_truth(tmp_path):
    r = run_pipeline("synthetic-mlp", until="discover", workdir=tmp_path, overrides=FAST, out=tmp_path / "out")
    g = r.output("discover")
    assert isinstance(g, CausalGraph) and g.is_dag() and g.n_features == 8
    assert "metrics_vs_truth" in g.params and "shd" in g.params["metrics_vs_truth"]
    df = pd.read_parquet(tmp_path / "out" / "dag.parquet")
    assert list(df.columns) == ["source", "target", "weight"]
    assert (tmp_path / "out" / "discover_manifest.json").is_file()
    r2 = run_pipeline("synthetic-mlp", until="discover", workdir=tmp_path, overrides=FAST)
    assert all(rec.cached for rec in r2.records)
    assert r2.output("discover").n_edges == g.n_edges  # loaded back from the cache


def test_true_dag_method(tmp_path):
    over = {**FAST, "discover": {"method": "true-dag"}}
    r = run_pipeline("synthetic-mlp", until="discover", workdir=tmp_path, overrides=over)
    g = r.output("discover")
    assert g.params["metrics_vs_truth"]["shd"] == 0
    with pytest.raises(CapeConfigError, match="has no known graph"):
        run_pipeline("krumsiek11", until="discover", workdir=tmp_path, overrides={"discover": {"method": "true-dag"}})


def test_embed_stage_roundtrip(tmp_path):
    over = {**FAST, "discover": {"method": "true-dag"}}
    r = run_pipeline("synthetic-mlp", until="embed", workdir=tmp_path, overrides=over)
    emb = r.output("embed")
    assert emb.hyperboloid.shape == (8, 5) and emb.poincare.shape == (8, 4)
    r2 = run_pipeline("synthetic-mlp", until="embed", workdir=tmp_path, overrides=over)
    assert all(rec.cached for rec in r2.records)
    back = r2.output("embed")
    np.testing.assert_array_equal(back.hyperboloid, emb.hyperboloid)
    np.testing.assert_array_equal(back.pagerank, emb.pagerank)
    assert back.graph.n_edges == emb.graph.n_edges
    # changing an embed parameter re-runs embed only
    over2 = {**over, "embed": {**over["embed"], "lambda_g": 0.5}}
    r3 = run_pipeline("synthetic-mlp", until="embed", workdir=tmp_path, overrides=over2)
    assert [rec.cached for rec in r3.records] == [True, True, True, False]


def test_encode_stage_exports_encodings_and_figures(tmp_path):
    from cape_pipeline.encodings import load_encodings

    over = {**FAST, "discover": {"method": "true-dag"}}
    out = tmp_path / "out"
    r = run_pipeline("synthetic-mlp", until="encode", workdir=tmp_path / "w", overrides=over, out=out)
    enc = load_encodings(out)  # the export directory is itself a valid encodings directory
    assert enc.angles.shape == (8, 4)
    np.testing.assert_allclose(enc.angles, (np.pi / 4) * enc.poincare)
    for f in ("encodings.parquet", "dag.parquet", "manifest.json", "dag.png", "poincare.png", "loss.png"):
        assert (out / f).is_file(), f
    import json

    man = json.loads((out / "manifest.json").read_text())
    assert man["provenance"]["data_fingerprint"] == r.records[1].summary["data_fingerprint"]
    spread = man["provenance"]["angle_spread"]  # |φ| quantiles over features off the origin
    assert spread["max"] == pytest.approx(np.abs(enc.angles).max()) and spread["q50"] <= spread["q90"] <= spread["max"]
    assert man["embed_params"]["quality"]["map"] is not None  # Step II properties travel with the export
    # cached encode loads back to the same angles
    r2 = run_pipeline("synthetic-mlp", until="encode", workdir=tmp_path / "w", overrides=over)
    assert all(rec.cached for rec in r2.records)
    np.testing.assert_array_equal(r2.output("encode").encodings.angles, enc.angles)


TINY_TRAIN = {
    "discover": {"low_rank.epochs": 3, "low_rank.max_outer": 2},
    "embed": {"max_epochs": 5, "dim": 4},
    "train": {"pretrain_epochs": 1, "finetune_epochs": 1, "n_heads": 2, "compare": ["none", "none/no-id"], "n_seeds": 2},
}


def test_train_and_evaluate_report(tmp_path):
    import json

    out = tmp_path / "out"
    r = run_pipeline("krumsiek11", workdir=tmp_path / "w", overrides=TINY_TRAIN, out=out)
    assert [rec.stage for rec in r.records][-2:] == ["train", "evaluate"]
    train = r.output("train")
    assert train.tasks == ["annotation", "clustering"] and train.arms == ["cape", "none", "none/no-id"]
    assert train.d_model == 8  # 2 * d of the encodings
    assert len(train.results) == 2 * 3 * 2  # tasks × arms × seeds
    nid = [res for res in train.results if res.params["arm"] == "none/no-id"]
    assert nid and all(res.params["identity"] is False for res in nid)
    rep = json.loads((out / "report.json").read_text())
    arms = {row["arm"] for row in rep["metrics"]}
    assert {"cape", "none", "none/no-id", "reference (no transformer)"} <= arms
    comp = rep["comparison"]
    assert comp["arm"] == "cape" and comp["baseline"] == "none" and comp["verdict"]
    assert {d["task"] for d in comp["differences"]} == {"annotation", "clustering"}
    assert all(d["n"] == 2 and d["ci_low"] is not None for d in comp["differences"])
    assert (out / "figures" / "cape_vs_none.png").is_file()
    # every arm against default with its MDE, as a table and a forest plot; how much the cape
    # model uses its angles
    assert {a["arm"] for a in comp["arms"]} == {"cape", "none/no-id"} and all("mde" in a for a in comp["arms"])
    assert (out / "figures" / "forest.png").is_file()
    use = comp["angle_use"]["cape"]
    assert 0 <= use["prediction_change"] <= 1 and use["embedding_change"] >= 0 and "none" not in comp["angle_use"]
    # the fitted annotation models are exported and load back
    from cape_pipeline.tasks import load

    m = load(out / "models" / "annotation_cape_seed0")
    assert m.predict(r.output("preprocess")).shape == (r.output("preprocess").n_obs,)
    assert (out / "models" / "annotation_none-no-id_seed1" / "weights.pt").is_file()
    acc = [row for row in rep["metrics"] if row["metric"] == "accuracy" and row["arm"] == "cape"][0]
    assert 0.0 <= acc["mean"] <= 1.0
    assert set(rep["timings_s"]) >= {"ingest", "preprocess", "discover", "embed", "encode", "train"}
    md = (out / "report.md").read_text()
    assert "| annotation | cape | accuracy |" in md and comp["verdict"] in md
    assert "| none/no-id | annotation | **accuracy** |" in md and "annotation model uses its angles" in md
    # what the run did: sizes, edges, tokens per cell, width, subsampling, time
    plan = rep["training"]["plan"]
    assert plan["runs"] == 6 and plan["d_model"] == 8 and plan["n_obs"] == r.output("preprocess").n_obs
    assert plan["step_seconds"] > 0 and plan["seconds_max"] > 0  # calibrated on this machine
    assert "## What this run did" in md and "tokens per cell median" in md and "width D = 8" in md
    assert "subsampled: nothing" in md and "against an estimate of about" in md
    hubs = rep["hubs"]  # hub genes with their children and angle norms
    assert len(hubs) <= 10 and (len(hubs) > 0) == (rep["dag"]["n_edges"] > 0)
    assert all(h["norm_angles"] >= 0 and h["out_degree"] >= len(h["children"]) for h in hubs)
    assert ("| feature | PageRank | ‖e‖ | ‖φ‖ (rad) | children | strongest children |" in md) == bool(hubs)
    assert (out / "encodings.parquet").is_file()  # the export keeps the encodings
    assert any(p.name.startswith("umap_") for p in (out / "figures").iterdir())
    assert any(p.name.startswith("confusion_") for p in (out / "figures").iterdir())
    assert all(p.is_file() for p in (out / "figures").iterdir())  # arm names with "/" make no folders
    # everything is cached; a changed train parameter re-runs train and evaluate only
    r2 = run_pipeline("krumsiek11", workdir=tmp_path / "w", overrides=TINY_TRAIN)
    assert all(rec.cached for rec in r2.records)
    over = {**TINY_TRAIN, "train": {**TINY_TRAIN["train"], "compare": [], "n_seeds": 1, "save_models": False},
            "evaluate": {"umap": False}}
    r3 = run_pipeline("krumsiek11", workdir=tmp_path / "w", overrides=over)
    assert [rec.cached for rec in r3.records] == [True] * 5 + [False, False]
    assert r3.output("train").arms == ["cape"]
    train_rec = next(rec for rec in r3.records if rec.stage == "train")
    assert (train_rec.path / "results.json").is_file() and not (train_rec.path / "models").exists()  # save_models=False
    first_train = next(rec for rec in r.records if rec.stage == "train")
    assert (first_train.path / "models" / "annotation_cape_seed0" / "config.json").is_file()
    rep3 = r3.output("evaluate").doc
    assert all(row["sd"] is None for row in rep3["metrics"])  # one seed: no spread
    assert "Cannot tell" in rep3["comparison"]["verdict"] or "No paired comparison" in rep3["comparison"]["verdict"]
    with pytest.raises(CapeConfigError, match="no-id"):
        run_pipeline("krumsiek11", workdir=tmp_path / "w", overrides={"train": {"compare": ["rope"]}})


def test_train_rejects_unknown_task(tmp_path):
    with pytest.raises(CapeConfigError, match="train.tasks: unknown task"):
        run_pipeline("krumsiek11", workdir=tmp_path, overrides={"train": {"tasks": ["annotate"]}})


def test_train_with_ready_encodings_skips_steps_1_to_3(tmp_path, capsys):
    from cape_pipeline.cli import main
    from cape_pipeline.errors import CapeDataError

    enc_dir = tmp_path / "enc"
    run_pipeline("krumsiek11", until="encode", workdir=tmp_path / "w1", overrides=TINY_TRAIN, out=enc_dir)
    over = {"train": {**TINY_TRAIN["train"], "compare": [], "encodings": str(enc_dir)}, "evaluate": {"umap": False}}
    r = run_pipeline("krumsiek11", workdir=tmp_path / "w2", overrides=over, out=tmp_path / "out")
    assert [rec.stage for rec in r.records] == ["ingest", "preprocess", "train", "evaluate"]
    assert (tmp_path / "out" / "report.md").is_file()
    # encodings of another dataset: the features do not match -> clear error, named features
    other = tmp_path / "other"
    run_pipeline("synthetic-mlp", until="encode", workdir=tmp_path / "w3",
                 overrides={**FAST, "discover": {"method": "true-dag"}}, out=other)
    bad = {"train": {**over["train"], "encodings": str(other)}, "evaluate": {"umap": False}}
    with pytest.raises(CapeDataError, match="Gata2"):
        run_pipeline("krumsiek11", workdir=tmp_path / "w2", overrides=bad)
    code = main(["run", "krumsiek11", "--workdir", str(tmp_path / "w2"), "--set", f"train.encodings={other}"])
    err = capsys.readouterr().err
    assert code == 2 and "Gata2" in err and "Traceback" not in err


def test_empty_graph_is_flagged(tmp_path, caplog):
    import logging

    over = {**FAST, "discover": {**FAST["discover"], "low_rank.threshold": 50.0}}
    with caplog.at_level(logging.WARNING, logger="cape_pipeline.pipeline.stages"):
        r = run_pipeline("synthetic-mlp", until="discover", workdir=tmp_path, overrides=over)
    assert r.output("discover").n_edges == 0
    assert "no edge at all passed threshold 50" in caplog.text and "--set discover.low_rank.threshold=" in caplog.text
    from cape_pipeline.report.build import render_markdown

    doc = {"data": {"source": "x", "n_obs": 1, "n_vars": 1, "modality": "m", "input_state": "s", "preprocess_steps": [],
                    "fingerprint": "f"},
           "dag": {"method": "cape", "n_edges": 0, "n_cycle_edges_dropped": 0, "metrics_vs_truth": None},
           "embedding": {"d": 2, "geometry": "hyperbolic", "scale": 0.78, "max_norm_e": 0.0, "spearman_norm_vs_neg_pagerank": float("nan")},
           "training": {"tasks": [], "arms": [], "d_model": 4, "runs": 0}, "metrics": [], "throughput_cells_per_s": {},
           "timings_s": {}, "cape_pipeline": "0", "machine": {"python": "3", "platform": "p"}}
    md = render_markdown(doc)
    assert "The DAG is empty" in md and "The angles are nearly zero" not in md  # no max_abs_angle given
    doc["embedding"]["max_abs_angle"] = 0.001
    assert "The angles are nearly zero" in render_markdown(doc)


def test_discover_stage_passes_posterior_and_min_steps(tmp_path):
    over = {**FAST, "discover": {"low_rank": {"max_outer": 2, "posterior": "mean", "min_steps": 0}}}
    g = run_pipeline("synthetic-mlp", until="discover", workdir=tmp_path, overrides=over).output("discover")
    # epochs unset (None) with min_steps 0: exactly the paper's 100 epochs
    assert g.params["posterior"] == "mean" and g.params["effective_epochs"] == 100
    with pytest.raises(CapeConfigError, match="only for method 'cape'"):
        run_pipeline("synthetic-mlp", until="discover", workdir=tmp_path,
                     overrides={"discover": {"method": "correlation", "low_rank.posterior": "mean"}})


def test_peer_arms_get_the_graph_and_the_points(tmp_path):
    """``pe=ape-tree`` gets Step I's DAG as a spanning forest and ``@riemann`` the Step II points."""
    from cape_pipeline.models.pe.ape_tree import spanning_forest
    from cape_pipeline.models.positions import FeaturePositions

    over = {**TINY_TRAIN, "discover": {"method": "correlation"},  # edges at once (Step I's tiny budget finds none)
            "train": {**TINY_TRAIN["train"], "compare": ["ape-tree", "cape@riemann"], "n_seeds": 1,
                                    "tasks": ["annotation"]}, "evaluate": {"umap": False}}
    r = run_pipeline("krumsiek11", workdir=tmp_path / "w", overrides=over)
    train = r.output("train")
    assert train.arms == ["cape", "ape-tree", "cape@riemann"]
    models = {res.params["arm"]: res.model for res in train.results}
    enc = r.output("encode").encodings
    parent, _ = spanning_forest(enc.graph.adjacency)
    assert enc.graph.n_edges > 0 and (parent >= 0).any()
    ape = models["ape-tree"].backbone.pe
    np.testing.assert_array_equal(ape.parent.cpu().numpy(), parent)  # krumsiek11's order is the encodings' order
    riem = models["cape@riemann"].backbone
    np.testing.assert_allclose(riem.hyperboloid.cpu().numpy(), enc.hyperboloid, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(riem.pe.angles.cpu().numpy(), enc.angles, rtol=1e-6, atol=1e-7)
    # a subset of the features, in another order: rows follow the names, the forest is re-indexed
    names = list(enc.feature_names)[::-1][:7]
    pos = FeaturePositions.from_encodings(enc, names)
    sub = [list(enc.feature_names).index(n) for n in names]
    np.testing.assert_array_equal(pos.hyperboloid, enc.hyperboloid[sub])
    expect, _ = spanning_forest(enc.graph.adjacency.tocsr()[sub][:, sub])
    np.testing.assert_array_equal(pos.parent, expect)


def test_a_stage_that_changes_torch_threads_leaves_them_as_they_were(tmp_path, monkeypatch):
    """The thread count is in every cache key; UMAP's OpenMP start-up in evaluate once raised it
    from 1 to 2, so a second run in the same process missed the cache."""
    import dataclasses

    import torch

    from cape_pipeline.pipeline.stages import STAGES

    st = STAGES["ingest"]

    def run(*args):
        torch.set_num_threads(torch.get_num_threads() + 1)
        return st.run(*args)

    monkeypatch.setitem(STAGES, "ingest", dataclasses.replace(st, run=run))
    before = torch.get_num_threads()
    r = run_pipeline("krumsiek11", until="ingest", workdir=tmp_path / "w")
    assert not r.records[0].cached and torch.get_num_threads() == before
    monkeypatch.setitem(STAGES, "ingest", st)
    assert run_pipeline("krumsiek11", until="ingest", workdir=tmp_path / "w").records[0].cached
