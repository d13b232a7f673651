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
        out.append(TaskResult(task, {metric: base + d, f"reference_{metric}": 0.6}, params={"pe": "cape", "seed": seed}))
        out.append(TaskResult(task, {metric: base, f"reference_{metric}": 0.6}, params={"pe": "default", "seed": seed}))
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
    ref = [r for r in rows if r["pe"].startswith("reference")]
    assert len(ref) == 1 and ref[0]["n"] == 2 and ref[0]["sd"] == 0.0


def test_verdict_adjusts_for_several_main_metrics():
    from cape_pipeline.report.build import primary_differences

    runs = []
    for seed, (d_f1, d_acc) in enumerate([(0.030, 0.0), (0.050, 0.01), (0.045, -0.01)]):
        base = 0.5 + 0.1 * seed
        runs.append(TaskResult("annotation", {"macro_f1": base + d_f1, "accuracy": base + d_acc}, params={"pe": "cape", "seed": seed}))
        runs.append(TaskResult("annotation", {"macro_f1": base, "accuracy": base}, params={"pe": "default", "seed": seed}))
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
           "training": {"tasks": [], "pes": [], "d_model": 4, "runs": 0}, "metrics": [], "throughput_cells_per_s": {},
           "timings_s": {}, "cape_pipeline": "0", "machine": {"python": "3", "platform": "p"}}
    md = render_markdown(doc)
    assert "120 epochs, **not converged**" in md and "learned curvature −0.05" in md
    assert "mAP 0.900, mean rank 1.50" in md and "Spearman(‖e‖, −PageRank) n/a" in md
    assert "1 feature(s) without any edge" in md and "max 0.400 rad" in md
