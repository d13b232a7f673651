"""The main job on user-sized data: the plan and its calibrated estimate, --dry-run, and what the
report says the run did."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cape_pipeline.pipeline.plan import TrainPlan, estimate, plan_lines, plan_train
from cape_pipeline.tasks import TASK_CONFIGS
from cape_pipeline.tasks._base import model_config, resolve_config


def _plan(n: int, m: int = 50, **task) -> TrainPlan:
    rng = np.random.default_rng(0)
    x = np.where(rng.random((n, m)) < 0.3, rng.gamma(2.0, 1.0, (n, m)), 0.0).astype(np.float32)
    cfgs = {t: resolve_config(TASK_CONFIGS[t], {"model": {"d_model": 32, "max_tokens": 8}, **task})
            for t in ("annotation", "clustering")}
    return plan_train(x, tasks=["annotation", "clustering"], arms=["cape", "none"], seeds=[0, 1, 2],
                      task_cfgs=cfgs, model_cfg=model_config("scgpt", cfgs["annotation"]))


def test_plan_counts_the_work_and_says_when_the_budget_subsamples() -> None:
    small = _plan(200)
    assert small.runs == 6 and small.d_model == 32 and small.max_tokens == 8
    assert small.pretrain_steps == 5 * 7 and not small.pretrain_subsampled  # shared by both tasks: once
    assert small.tokens_median == 8 and small.share_capped > 0.9  # ~15 of 50 expressed, capped at 8
    big = _plan(5000)
    assert big.pretrain_steps == 600 and big.pretrain_cells == 600 * 32 and big.pretrain_subsampled
    assert big.finetune_max_steps == 1000
    no_cap = _plan(5000, pretrain_max_steps=0, finetune_max_steps=0)
    assert no_cap.pretrain_steps == 5 * 157 and not no_cap.pretrain_subsampled
    est = estimate(big, 0.1)
    assert est.seconds_max == pytest.approx(6 * ((600 + 1000) * 0.1 + est.forward_cells * 0.1 / 32 / 3))
    text = "\n".join(plan_lines(est))
    assert "2 arms (cape, none) × 3 seeds = 6 runs" in text and "subsampled" in text and "about" in text


def test_report_says_what_the_run_did_and_warns_when_angles_are_zero() -> None:
    from cape_pipeline.report.sections import run_lines

    plan = estimate(_plan(5000), 0.05).to_dict()
    doc = {
        "data": {"n_obs": 5000, "n_vars": 50, "shape_in": [5000, 15000]},
        "dag": {"n_edges": 3, "isolated_share": 0.94},
        "embedding": {"zero_angle_share": 0.94},
        "training": {"plan": plan, "runs": 6},
        "timings_s": {"discover": 100.0, "train": 500.0},
    }
    text = "\n".join(run_lines(doc))
    assert "5,000 cells × 50 features (of 15,000 before preprocessing)" in text
    assert "3 edges; 94 % of features have no edge" in text and "94 % of features sit at the origin" in text
    assert "each pretraining ran its budget of 600 steps (19,200 cells seen" in text
    assert "**Warning**" in text and "cannot be informative" in text
    doc["embedding"]["zero_angle_share"] = 0.5
    assert "**Warning**" not in "\n".join(run_lines(doc))


def test_report_warns_when_step_i_saw_the_cells_the_perturbation_task_holds_out() -> None:
    from cape_pipeline.report.sections import dag_lines, run_lines

    plan = estimate(_plan(5000), 0.05).to_dict()
    doc = {
        "data": {"n_obs": 5000, "n_vars": 50}, "dag": {"n_edges": 30, "interventions": {"intervention_column": "condition"}},
        "embedding": {"zero_angle_share": 0.3}, "training": {"plan": {**plan, "tasks": ["perturbation"]}, "runs": 6},
        "timings_s": {},
    }
    warning = "Step I saw the cells of the perturbation task's held-out conditions"
    assert warning in "\n".join(run_lines(doc))  # a plan from before the verdict was recorded: not blind
    for blind, tasks, warns in ((False, ["perturbation"], True), (True, ["perturbation"], False), (False, ["annotation"], False)):
        doc["training"]["plan"].update(step1_blind=blind, tasks=tasks)
        assert (warning in "\n".join(run_lines(doc))) is warns
    blind = {"n_edges": 30, "n_held_out_conditions": 25, "held_out_cells": 1000, "held_out_share": 0.625,
             "method": "cape", "n_cycle_edges_dropped": 0,
             "interventions": {"intervention_column": "condition", "on_held_out": True, "n_perturbed_cells": 1600,
                               "n_perturbed_features": 20, "n_control_cells": 600, "n_testable": 40,
                               "share_shifted": 0.6, "random_share_shifted": 0.1}}
    text = "\n".join(dag_lines(blind, 50))
    assert ("Step I left out the 1000 cells of the 25 (62 % of the perturbation conditions) conditions the "
            "perturbation task holds out for any of its seeds") in text
    assert "on the held-out conditions' cells, which Step I did not see" in text


def test_dry_run_prints_the_plan_and_runs_no_training(tmp_path, capsys) -> None:
    from cape_pipeline.cli import main

    code = main(["run", "krumsiek11", "--dry-run", "--workdir", str(tmp_path / "w"), "--set", "train.n_heads=2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Step I (discover" in out and "train plan: 3 arms (cape, none, none/no-id) × 3 seeds = 9 runs" in out
    assert "estimate:" in out and "ms per step measured here" in out
    assert sorted(p.name for p in (tmp_path / "w").iterdir() if not p.name.startswith(".")) == ["ingest", "preprocess"]
    assert main(["run", "krumsiek11", "--dry-run", "--until", "train", "--workdir", str(tmp_path / "w")]) == 2


def test_train_stage_passes_step_budgets_and_rejects_negative_ones() -> None:
    from cape_pipeline.errors import CapeConfigError
    from cape_pipeline.tasks.compare import TrainConfig, task_settings

    s = task_settings(TrainConfig(pretrain_max_steps=50, finetune_max_steps=0), 64, True)
    cfg = resolve_config(TASK_CONFIGS["annotation"], s)
    assert cfg.pretrain_max_steps == 50 and cfg.finetune_max_steps == 0
    default = resolve_config(TASK_CONFIGS["annotation"], task_settings(TrainConfig(), 64, True))
    assert (default.pretrain_max_steps, default.finetune_max_steps) == (600, 1000)
    with pytest.raises(CapeConfigError, match="max_steps"):
        resolve_config(TASK_CONFIGS["annotation"], {"pretrain_max_steps": -1})


def test_hub_rows_name_the_hubs_their_children_and_angle_norms() -> None:
    import scipy.sparse as sp

    from cape_pipeline.causal.graph import CausalGraph
    from cape_pipeline.encodings import CapeEncodings
    from cape_pipeline.report.sections import hub_lines, hub_rows

    names = np.array(["root", "a", "b", "c", "lonely"])
    adj = sp.csr_array(np.array([[0, 0.9, 0.5, 0.1, 0], [0, 0, 0, 0.7, 0], [0] * 5, [0] * 5, [0] * 5], dtype=float))
    e = np.array([[0.1, 0], [0.5, 0], [0.6, 0], [0.8, 0], [0, 0]])
    enc = CapeEncodings(feature_names=names, angles=np.pi / 4 * e, poincare=e, hyperboloid=np.zeros((5, 3)),
                        pagerank=np.array([0.4, 0.2, 0.1, 0.05, 0.9]),
                        graph=CausalGraph(feature_names=names, adjacency=adj))
    rows = hub_rows(enc, k=2, n_children=2)
    assert [r["feature"] for r in rows] == ["root", "a"]  # "lonely" has no edge: no hub
    assert rows[0]["children"] == ["a", "b"] and rows[0]["out_degree"] == 3
    assert rows[0]["norm_angles"] == pytest.approx(np.pi / 4 * 0.1)
    assert "| root | 0.4 | 0.100 | 0.079 | 3 | a, b … |" in "\n".join(hub_lines(rows))


def test_report_warns_when_both_arms_are_at_the_ceiling() -> None:
    from cape_pipeline.report.sections import run_lines

    doc = {
        "data": {"n_obs": 100, "n_vars": 50}, "dag": {"n_edges": 30}, "embedding": {"zero_angle_share": 0.3},
        "training": {"runs": 6}, "timings_s": {},
        "comparison": {"arm": "cape", "baseline": "none"},
        "metrics": [{"task": "annotation", "arm": pe, "metric": "accuracy", "mean": 1.0} for pe in ("cape", "none")]
        + [{"task": "clustering", "arm": pe, "metric": "ari", "mean": v} for pe, v in (("cape", 0.6), ("none", 0.7))],
    }
    text = "\n".join(run_lines(doc))
    assert "both score ≥ 0.995 on annotation accuracy" in text and "clustering ari" not in text


def test_discover_estimate_fixed_part_then_linear_in_cells():
    from cape_pipeline.pipeline.plan import discover_estimate

    assert discover_estimate(3000, 2000) == pytest.approx(225.0)  # measured 224 s
    assert discover_estimate(50_000, 2000) == pytest.approx(1000.0)  # measured 1,050-1,095 s beside other jobs
    assert discover_estimate(100_000, 2000) == pytest.approx(2 * discover_estimate(50_000, 2000))


def test_regression_discover_estimate_follows_the_step1_measurements():
    """The regression algorithm's estimate (the default for single-cell data) stays within a
    factor of 2 of the newest Step I-alone run of each simulated set in
    benchmarks/scale/step1.jsonl from 1,000 cells on (2,000 HVGs; the runs shared the 2 cores
    with other jobs, so they are upper figures), at the run's number of random splits of the
    cells (rows without one: 1), and the other algorithms have none."""
    import json
    from pathlib import Path

    from cape_pipeline.pipeline.plan import discover_estimate

    rows = [json.loads(ln) for ln in (Path(__file__).parents[2] / "benchmarks/scale/step1.jsonl").read_text().splitlines()
            if ln.strip()]
    newest = {r["data"]: r for r in rows if r["data"].startswith("sim")}  # the current code's time per set
    measured = [(r["cells"], r["stages"]["discover"]["seconds"], r["dag"].get("n_splits_used") or 1)
                for r in newest.values()]
    assert len(measured) >= 4
    for n, sec, splits in measured:
        est = discover_estimate(n, 2000, "regression", n_splits=splits)
        assert sec / 2 <= est <= 2 * sec, (n, sec, est)
    assert discover_estimate(3000, 2000, "regression", n_splits=8) == pytest.approx(
        8 * discover_estimate(3000, 2000, "regression"))
    assert np.isnan(discover_estimate(3000, 2000, "low-rank"))


def test_regression_discover_estimate_follows_the_atlas_runs():
    """The plan's Step I estimate stays within a factor of 2 of the newest CPU run of each size
    in benchmarks/scale/atlas.jsonl (Step I's default on simulated counts at atlas size, with
    the run's number of random splits)."""
    import json
    from pathlib import Path

    from cape_pipeline.pipeline.plan import discover_estimate

    path = Path(__file__).parents[2] / "benchmarks/scale/atlas.jsonl"
    rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    newest = {(r["cells"], r["genes"]): r for r in rows if r["device"] == "cpu"}
    assert newest
    for (cells, genes), r in newest.items():
        est = discover_estimate(cells, genes, r["support"], n_splits=r["n_splits_used"])
        assert r["discover_s"] / 2 <= est <= 2 * r["discover_s"], (cells, r["discover_s"], est)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
def test_calibration_times_the_step_on_the_training_device(device) -> None:
    """The estimate is measured on the device the train stage trains on (on a lent H200 the
    host CPU's estimate was 3× the GPU's train stage), and the plan says which."""
    from cape_pipeline.models import build_backbone
    from cape_pipeline.pipeline.plan import calibrate

    rng = np.random.default_rng(0)
    x = rng.gamma(1.0, 1.0, size=(64, 40)).astype(np.float32) * (rng.random((64, 40)) < 0.5)
    model = build_backbone("scgpt", {"d_model": 16, "n_heads": 2, "n_layers": 1, "max_tokens": 32}, n_features=40,
                           pe="cape", angles=np.zeros((40, 8), dtype=np.float32))
    sec = calibrate(model, x, batch_size=16, steps=2, device=device)
    assert sec > 0 and next(model.parameters()).device.type == device
    plan = plan_train(x, tasks=["annotation"], arms=["cape"], seeds=[0],
                      task_cfgs={"annotation": resolve_config(TASK_CONFIGS["annotation"], {})},
                      model_cfg=model_config("scgpt", resolve_config(TASK_CONFIGS["annotation"], {})))
    plan = estimate(plan, sec)
    plan.step_device = device
    assert f"measured here ({device})" in "\n".join(plan_lines(plan))


def test_calibration_times_steps_of_the_tasks_training_loop(monkeypatch) -> None:
    """calibrate runs no loop of its own: one warm-up and ``steps`` timed steps of train_epochs on
    one seeded batch of ``batch_size`` cells."""
    from cape_pipeline.models import build_backbone, loops
    from cape_pipeline.pipeline.plan import calibrate

    calls = []
    real = loops.train_epochs

    def spy(params, step, n, **kw):
        calls.append((n, kw["epochs"], kw["batch_size"]))
        return real(params, step, n, **kw)

    monkeypatch.setattr(loops, "train_epochs", spy)
    x = np.random.default_rng(0).gamma(1.0, 1.0, size=(64, 40)).astype(np.float32)
    model = build_backbone("scgpt", {"d_model": 16, "n_heads": 2, "n_layers": 1, "max_tokens": 16}, n_features=40,
                           pe="none")
    assert calibrate(model, x, batch_size=16, steps=2) > 0
    assert calls == [(16, 3, 16)]
