"""The report's answer to "does CAPE help?": paired differences, intervals, verdict."""

from __future__ import annotations

import numpy as np
import pytest

from cape_pipeline.report.build import aggregate_metrics, paired_differences, verdict_sentence
from cape_pipeline.tasks import TaskResult


def _runs(deltas: list[float], task: str = "annotation", metric: str = "macro_f1") -> list[TaskResult]:
    out = []
    for seed, d in enumerate(deltas):
        base = 0.5 + 0.1 * seed  # the split moves both arms together
        out.append(TaskResult(task, {metric: base + d, f"reference_{metric}": 0.6}, params={"arm": "cape", "seed": seed}))
        out.append(TaskResult(task, {metric: base, f"reference_{metric}": 0.6}, params={"arm": "none", "seed": seed}))
    return out


def test_paired_interval_matches_t_interval():
    from scipy import stats

    d = [0.03, 0.05, 0.04]
    (row,) = paired_differences(_runs(d))
    half = stats.t.ppf(0.975, 2) * np.std(d, ddof=1) / np.sqrt(3)
    assert row["n"] == 3 and row["mean"] == pytest.approx(0.04)
    assert row["ci_low"] == pytest.approx(0.04 - half) and row["ci_high"] == pytest.approx(0.04 + half)
    assert row["verdict"] == "better"
    assert verdict_sentence([row]).startswith("CAPE helped on this data")


def test_verdict_directions_and_unclear():
    (worse,) = paired_differences(_runs([-0.05, -0.04, -0.06]))
    assert worse["verdict"] == "worse" and verdict_sentence([worse]).startswith("CAPE hurt")
    (lower,) = paired_differences(_runs([-0.05, -0.04, -0.06], task="age", metric="medae"))
    assert lower["verdict"] == "better" and not lower["higher_is_better"]  # smaller error is better
    (unclear,) = paired_differences(_runs([0.05, -0.04, 0.01]))
    assert unclear["verdict"] == "unclear" and verdict_sentence([unclear]).startswith("No evidence")
    (one,) = paired_differences(_runs([0.05]))
    assert one["ci_low"] is None and one["sd"] is None and "Cannot tell" in verdict_sentence([one])


def test_sd_is_null_for_one_seed_and_references_once():
    rows = aggregate_metrics(_runs([0.05]))
    assert all(r["sd"] is None for r in rows)
    rows = aggregate_metrics(_runs([0.05, 0.02]))
    ref = [r for r in rows if r["arm"].startswith("reference")]
    assert len(ref) == 1 and ref[0]["n"] == 2 and ref[0]["sd"] == 0.0


def test_verdict_adjusts_for_several_main_metrics():
    from cape_pipeline.report.build import primary_differences

    runs = []
    for seed, (d_f1, d_acc) in enumerate([(0.030, 0.0), (0.050, 0.01), (0.045, -0.01)]):
        base = 0.5 + 0.1 * seed
        runs.append(TaskResult("annotation", {"macro_f1": base + d_f1, "accuracy": base + d_acc}, params={"arm": "cape", "seed": seed}))
        runs.append(TaskResult("annotation", {"macro_f1": base, "accuracy": base}, params={"arm": "none", "seed": seed}))
    alone = {r["metric"]: r for r in paired_differences(runs)}
    assert alone["macro_f1"]["verdict"] == "better"  # its own 95 % interval excludes 0
    adj = {r["metric"]: r for r in primary_differences(runs)}
    assert adj["macro_f1"]["ci_low"] < alone["macro_f1"]["ci_low"]  # 97.5 % interval for 2 metrics: wider
    assert "Bonferroni-adjusted for 2 metrics" in verdict_sentence(list(adj.values()))


def test_tiny_differences_read_negligible():
    (row,) = paired_differences(_runs([1e-5, 1.1e-5, 1.2e-5]))
    assert row["ci_low"] > 0 and row["verdict"] == "negligible"
    assert verdict_sentence([row]).startswith("No evidence")


def test_embedding_section_reports_training_and_quality():
    from cape_pipeline.report.build import angle_quantiles, render_markdown

    aq = angle_quantiles(np.array([[0.0, 0.0], [0.1, -0.4], [0.2, 0.3]]), np.array([False, True, True]))
    assert aq["max"] == 0.4 and aq["q50"] == 0.25
    doc = {"data": {"source": "x", "n_obs": 1, "n_vars": 3, "modality": "m", "input_state": "s", "preprocess_steps": [],
                    "fingerprint": "f"},
           "dag": {"method": "cape", "n_edges": 2, "n_cycle_edges_dropped": 0, "metrics_vs_truth": None},
           "embedding": {"d": 2, "geometry": "hyperbolic", "scale": 0.78, "max_norm_e": 0.5,
                         "spearman_norm_vs_neg_pagerank": 0.4, "max_abs_angle": 0.4, "angle_quantiles": aq,
                         "epochs_run": 120, "converged": False, "curvature": 0.05, "n_isolated": 1, "isolated": "origin",
                         "quality": {"map": 0.9, "mean_rank": 1.5, "distortion": 0.2, "n_connected": 2,
                                     "spearman_norm_vs_neg_pagerank": None, "spearman_norm_vs_depth": 0.5}},
           "training": {"tasks": [], "arms": [], "d_model": 4, "runs": 0}, "metrics": [], "throughput_cells_per_s": {},
           "timings_s": {}, "cape_pipeline": "0", "machine": {"python": "3", "platform": "p"}}
    md = render_markdown(doc)
    assert "120 epochs, **not converged**" in md and "learned curvature −0.05" in md
    assert "mAP 0.900, mean rank 1.50" in md and "Spearman(‖e‖, −PageRank) n/a" in md
    assert "1 feature(s) without any edge" in md and "max 0.400 rad" in md


def _arm_runs() -> list[TaskResult]:
    """Three arms × 4 seeds on annotation (accuracy, macro_f1) and clustering (ari; asw, not a
    main metric), with the classical references each task computes."""
    rng = np.random.default_rng(0)
    out = []
    for seed in range(4):
        split = 0.05 * rng.normal()
        for pe, shift in (("cape", 0.01), ("default", 0.0), ("none", -0.2)):
            noise = 0.01 * rng.normal(size=4)
            out.append(TaskResult("annotation", {"accuracy": 0.88 + split + shift + noise[0],
                                                 "macro_f1": 0.7 + split + shift + noise[1],
                                                 "reference_accuracy": 0.93, "reference_macro_f1": 0.8},
                                  params={"arm": pe, "seed": seed}))
            out.append(TaskResult("clustering", {"ari": 0.5 + split + shift + noise[2], "asw": 0.3 + noise[3],
                                                 "reference_ari": 0.45, "reference_asw": 0.2},
                                  params={"arm": pe, "seed": seed}))
    return out


def _doc(results, **extra):
    """A report document as ``build_report`` makes it, around the comparison of ``results``."""
    from types import SimpleNamespace

    from cape_pipeline.report.build import _comparison

    comp = _comparison(SimpleNamespace(results=results, arms=["cape", "default", "none"]))
    return {"data": {"source": "toy", "n_obs": 100, "n_vars": 20, "modality": "scrna", "input_state": "log",
                     "preprocess_steps": [], "fingerprint": "f"},
            "dag": {"method": "cape", "n_edges": 5, "n_cycle_edges_dropped": 0, "metrics_vs_truth": None},
            "embedding": {"d": 2, "geometry": "hyperbolic", "scale": 0.78, "max_norm_e": 0.5, "max_abs_angle": 0.4,
                          "spearman_norm_vs_neg_pagerank": 0.4},
            "training": {"tasks": ["annotation", "clustering"], "arms": ["cape", "default", "none"], "d_model": 8,
                         "runs": len(results)},
            "comparison": comp, "metrics": aggregate_metrics(results), "throughput_cells_per_s": {},
            "timings_s": {"train": 1.0}, "cape_pipeline": "0", "machine": {"python": "3", "platform": "p"}, **extra}


def test_report_opens_with_the_verdict_and_the_strongest_baseline():
    """report.md's first lines: the verdict on CAPE (with its intervals), then the classical
    baseline against the best transformer, before any section."""
    from cape_pipeline.report.build import render_markdown

    lines = [ln for ln in render_markdown(_doc(_arm_runs())).splitlines() if ln.strip()]
    assert lines[0] == "# CAPE report: toy"
    assert lines[1].startswith("**CAPE vs `default`: cannot tell.**") and "annotation accuracy" in lines[1]
    acc = {pe: np.mean([r.metrics["accuracy"] for r in _arm_runs() if r.task == "annotation" and r.params["arm"] == pe])
           for pe in ("cape", "default", "none")}
    arm = max(acc, key=acc.get)
    assert lines[2].startswith("**Classical baseline:** logistic regression beats every transformer on annotation "
                               f"accuracy: 0.930 vs {acc[arm]:.3f} (`{arm}`, the best arm)")
    assert "beats k-means on the top 50 principal components on clustering ari" in lines[2]


def test_report_loading_lines_run(tmp_path, monkeypatch):
    """The three lines of Python at the top of report.md load the encodings, beside the report
    (this run's export) or in a ready directory named by its absolute path."""
    import re
    from types import SimpleNamespace

    import pandas as pd

    from cape_pipeline.causal.graph import CausalGraph
    from cape_pipeline.encodings import encode, load_encodings
    from cape_pipeline.hyperbolic import embed
    from cape_pipeline.report.build import _encodings_place, render_markdown

    graph = CausalGraph.from_edges([("a", "b"), ("b", "c"), ("a", "d")], feature_names=["a", "b", "c", "d", "e"])
    out = tmp_path / "out"
    encode(embed(graph, dim=2, max_epochs=3)).save(out)
    enc = load_encodings(out)

    def block(doc):
        md = render_markdown(doc)
        (code,) = re.findall(r"```python\n(.*?)```", md, flags=re.S)
        assert len(code.strip().splitlines()) == 3
        return md, code

    own = SimpleNamespace(encodings=enc, provenance={})
    md, code = block(_doc(_arm_runs(), encodings=_encodings_place(own, enc.graph)))
    assert "`encodings.parquet`, `dag.parquet`, `manifest.json` beside this report" in md
    monkeypatch.chdir(out)
    scope: dict = {}
    exec(code, scope)
    assert isinstance(scope["table"], pd.DataFrame) and scope["table"]["feature"].tolist() == ["a", "b", "c", "d", "e"]
    ready = SimpleNamespace(encodings=enc, provenance={"encodings_dir": str(out)})
    _, code = block(_doc(_arm_runs(), encodings=_encodings_place(ready, enc.graph)))
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(code, scope)
    assert scope["enc"].n_features == 5 and str(out.resolve()) in code


_INTERVAL = r"[+-]\d+\.\d+ \[[+-]\d+\.\d+, [+-]\d+\.\d+\]"


def test_report_gives_one_interval_per_quantity():
    """The verdict's interval for a metric is the table's: report.md shows each paired difference
    with one interval, and says which are Bonferroni-adjusted."""
    import re

    from cape_pipeline.report.build import render_markdown

    md = render_markdown(_doc(_arm_runs()))
    table: dict[tuple[str, str, str], str] = {}
    for ln in md.splitlines():
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if len(cells) == 8 and re.fullmatch(_INTERVAL, cells[3]):
            key = (cells[0], cells[1], cells[2].strip("*"))
            assert key not in table, f"{key} twice"
            table[key] = cells[3]
            assert ("Bonferroni, 3" in cells[4]) == cells[2].startswith("**")  # accuracy, macro_f1, ari per arm
    assert len(table) == 8  # 2 arms × (accuracy, macro_f1, ari, asw)
    # every interval in report.md is its quantity's one interval from the table
    assert set(re.findall(_INTERVAL, md)) == set(table.values())
    verdict = md.splitlines()[2]
    for metric in ("accuracy", "macro_f1"):
        assert f"annotation {metric} {table[('cape', 'annotation', metric)]}" in verdict
    assert "Bonferroni-adjusted for 3 metrics, each at 98.33 %" in verdict


def test_report_links_each_figure_where_it_is_discussed():
    from cape_pipeline.report.build import render_markdown

    figures = ["dag.png", "poincare.png", "figures/loss.png", "figures/cape_vs_none.png", "figures/forest.png",
               "figures/curves_annotation.png", "figures/confusion_annotation_cape.png"]
    md = render_markdown(_doc(_arm_runs(), figures=figures))
    sections = {s.split("\n", 1)[0]: s for s in md.split("\n## ")}
    dag, emb, tasks = sections["Causal DAG (Step I)"], sections["Embedding (Steps II–III)"], sections["Tasks"]
    assert "[dag.png](dag.png)" in dag and "(figures/loss.png)" in dag
    assert "[poincare.png](poincare.png)" in emb and "(figures/loss.png)" in emb
    for f in ("figures/cape_vs_none.png", "figures/forest.png", "figures/curves_annotation.png",
              "figures/confusion_annotation_cape.png", "figures/loss.png"):
        assert f"]({f})" in tasks
    assert "[dag.png]" not in tasks and "[poincare.png]" not in dag
    # a report of an earlier version lists the paired-difference figure as cape_vs_default.png
    older = render_markdown(_doc(_arm_runs(), figures=[f.replace("cape_vs_none", "cape_vs_default") for f in figures]))
    assert "[cape_vs_default.png](figures/cape_vs_default.png)" in older


def test_files_that_name_the_arm_pe_still_report(tmp_path):
    """``results.json`` and ``report.json`` written before the arm's key was called ``arm`` name it
    ``pe``: read back, they give the same metric rows, differences, summary and report.md."""
    import json

    from cape_pipeline.report.build import Report, arm_differences, render_markdown
    from cape_pipeline.tasks.results import TrainOutput

    runs = _arm_runs()
    TrainOutput(results=runs, tasks=["annotation", "clustering"], arms=["cape", "default", "none"],
                d_model=8).save(tmp_path)
    doc = json.loads((tmp_path / "results.json").read_text())
    for run in doc["runs"]:
        run["params"]["pe"] = run["params"].pop("arm")  # the layout of an earlier version
    (tmp_path / "results.json").write_text(json.dumps(doc))
    old = TrainOutput.load(tmp_path)
    assert all("arm" not in r.params for r in old.results)
    assert aggregate_metrics(old.results) == aggregate_metrics(runs)
    assert arm_differences(old.results, "none") == arm_differences(runs, "none")

    new = _doc(runs)
    report = json.loads(json.dumps(new))
    for row in report["metrics"]:
        row["pe"] = row.pop("arm")
    (tmp_path / "report.json").write_text(json.dumps(report))
    read = Report.read(tmp_path)
    assert read.summary() == Report(doc=new).summary() and "cape" in " ".join(read.summary())
    assert render_markdown(read.doc) == render_markdown(new)
