"""Sections of the main job's ``report.md`` (:func:`~cape_pipeline.pipeline.report.render_markdown`):
Step I and Steps II–III, each from its part of the report document."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["dag_lines", "embedding_lines", "fmt"]


def dag_lines(g: dict[str, Any], n_vars: int) -> list[str]:
    """Report lines on Step I: method and support, edges, isolated features, warnings, truth."""
    lines = [
        "## Causal DAG (Step I)",
        f"- method {g['method']}"
        + (f" (support {g['support']})" if g.get("support") else "")
        + f": {g['n_edges']} edges; {g['n_cycle_edges_dropped']} edge(s) dropped to break cycles",
    ]
    if g.get("n_isolated") is not None:
        lines.append(f"- {g['n_isolated']} of {n_vars} features ({100 * (g.get('isolated_share') or 0):.0f} %) have no edge")
    lines += [f"- **Warning**: {w}" for w in g.get("warnings", []) if g["n_edges"] > 0]
    if g["n_edges"] == 0:
        lines.append(
            "- **The DAG is empty**: no edge passed the threshold, so the CAPE angles carry no causal "
            "structure and `cape` cannot differ from `none` for a reason the paper intends. Lower "
            "`discover.threshold` (see the warning of the discover stage)."
        )
    if g.get("metrics_vs_truth"):
        m = g["metrics_vs_truth"]
        lines.append("- against the known graph: " + ", ".join(f"{k} {v:.3g}" for k, v in m.items()))
    return lines


def fmt(v: Any, spec: str = ".3f") -> str:
    return "n/a" if v is None or (isinstance(v, float) and not np.isfinite(v)) else format(v, spec)


def embedding_lines(e: dict[str, Any]) -> list[str]:
    """Report lines on Step II training and the properties of :mod:`cape_pipeline.hyperbolic.quality`."""
    lines = []
    if e.get("epochs_run") is not None:
        state = "converged (loss plateau)" if e.get("converged") else "**not converged** (hit max_epochs)"
        curv = "" if e.get("curvature") is None else f"; learned curvature −{fmt(e['curvature'], '.3g')}"
        lines.append(f"- training: {e['epochs_run']} epochs, {state}{curv}")
    if e.get("n_isolated"):
        lines.append(
            f"- {e['n_isolated']} feature(s) without any edge: isolated rule `{e.get('isolated')}`"
            + (" (placed at the origin: angle 0, no rotation)" if e.get("isolated") == "origin" else "")
        )
    q = e.get("quality") or {}
    if q:
        lines.append(
            f"- edge reconstruction from distances (Nickel & Kiela): mAP {fmt(q.get('map'))}, mean rank "
            f"{fmt(q.get('mean_rank'), '.2f')}"
            + (f" (among connected features only: mAP {fmt(q.get('map_connected'))}, mean rank "
               f"{fmt(q.get('mean_rank_connected'), '.2f')})" if e.get("n_isolated") else "")
            + f"; distortion {fmt(q.get('distortion'))}; over the "
            f"{q.get('n_connected')} connected features Spearman(‖e‖, −PageRank) "
            f"{fmt(q.get('spearman_norm_vs_neg_pagerank'))}, Spearman(‖e‖, depth) {fmt(q.get('spearman_norm_vs_depth'))}"
        )
    aq = e.get("angle_quantiles") or {}
    if aq.get("max") is not None:
        lines.append(
            f"- |φ| over features off the origin: median {fmt(aq['q50'])}, 90 % {fmt(aq['q90'])}, "
            f"99 % {fmt(aq['q99'])}, max {fmt(aq['max'])} rad"
        )
    return lines
