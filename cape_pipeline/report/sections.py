"""Sections of the main job's ``report.md`` (:func:`~cape_pipeline.report.build.render_markdown`):
Step I and Steps II–III, each from its part of the report document."""

from __future__ import annotations

from typing import Any

import numpy as np

from cape_pipeline.report.power import arm_of

__all__ = ["angle_use_lines", "dag_lines", "embedding_lines", "fmt", "run_lines", "ZERO_ANGLE_WARN", "hub_rows", "hub_lines"]

ZERO_ANGLE_WARN = 0.9
"""Share of features at angle 0 above which the report says the comparison cannot be informative."""

CEILING = 0.995
"""A metric bounded by 1 at or above this for both arms: the comparison cannot separate them."""
CEILING_METRICS = ("accuracy", "macro_f1", "ari", "nmi")


def dag_lines(g: dict[str, Any], n_vars: int) -> list[str]:
    """Report lines on Step I: method and algorithm, edges, isolated features, warnings, truth."""
    lines = [
        "## Causal DAG (Step I)",
        f"- method {g['method']}"
        + (f" (algorithm {g.get('algorithm') or g['support']})" if g.get("algorithm") or g.get("support") else "")
        + f": {g['n_edges']} edges; {g['n_cycle_edges_dropped']} edge(s) dropped to break cycles",
    ]
    if g.get("n_isolated") is not None:
        lines.append(f"- {g['n_isolated']} of {n_vars} features ({100 * (g.get('isolated_share') or 0):.0f} %) have no edge")
    if g.get("edge_rule"):
        lines.append(f"- edges accepted by: {g['edge_rule']}")
    if g.get("covariates_used") and g["covariates_used"] != "none":
        used = g["covariates_used"]
        cov = used.replace("library", "log library size").replace("+", " and ").replace("states", f"{g.get('n_states')} cell states")
        within = " (the graph explains covariation within states)" if "states" in used else ""
        lines.append(f"- covariates regressed out before Step I: {cov}{within}")
    iv = g.get("interventions")
    if iv:
        lines.append(
            f"- interventions from obs[{iv['intervention_column']!r}]: {iv['n_perturbed_cells']} perturbed cells "
            f"({iv['n_perturbed_features']} perturbed features), {iv['n_control_cells']} controls; a perturbed "
            "feature's own conditional leaves out the cells where it was perturbed"
        )
        kinds = iv.get("label_kinds") or {}
        if kinds.get("unassigned"):
            labels = ", ".join(f"{c} {lab!r}" for lab, c in list((iv.get("unassigned_labels") or {}).items())[:5])
            lines.append(f"- left out of Step I: {kinds['unassigned']} cells with no assigned perturbation ({labels}), "
                         "not read as controls")
        if kinds.get("unmeasured_target") or kinds.get("mixed"):
            genes = ", ".join(list(iv.get("unknown_targets") or {})[:5])
            lines.append(f"- left out of Step I: {kinds.get('unmeasured_target', 0) + kinds.get('mixed', 0)} cells "
                         f"whose label names a gene that is not a feature (e.g. {genes}): neither controls nor "
                         "interventions on a feature")
        if iv.get("n_testable"):
            where = ("on the held-out conditions' cells, which Step I did not see" if iv.get("on_held_out") else
                     "on the cells Step I was fitted to, so an upper figure (hold cells out and call "
                     "`cape_pipeline.causal.metrics.interventional_score` for an unbiased one)")
            lines.append(
                f"- interventional check (CausalBench): {100 * iv['share_shifted']:.0f} % of the "
                f"{iv['n_testable']} edges whose parent is a single target shift their child in the parent's "
                f"perturbed cells (Mann–Whitney p < 0.05), against {100 * iv['random_share_shifted']:.0f} % of "
                f"random pairs — {where}"
            )
    if g.get("n_held_out_conditions"):
        share = g.get("held_out_share")
        lines.append(
            f"- Step I left out the {g.get('held_out_cells')} cells of the {g['n_held_out_conditions']} "
            + (f"({100 * share:.0f} % of the perturbation conditions) " if share is not None else "")
            + "conditions the perturbation task holds out for any of its seeds"
        )
    lines += [f"- **Warning**: {w}" for w in g.get("warnings", []) if g["n_edges"] > 0]
    if g["n_edges"] == 0:
        algo = {"low-rank": "low_rank"}.get(g.get("algorithm") or "", g.get("algorithm"))
        knob = ("`discover.regression.min_effect` (or give more cells)" if g.get("edge_rule")
                else f"`discover.{algo}.threshold`" if algo else "`discover.threshold`")
        lines.append(
            "- **The DAG is empty**: no edge passed the edge rule, so the CAPE angles carry no causal "
            f"structure and `cape` cannot differ from `none` for a reason the paper intends. Lower {knob} "
            "(see the warning of the discover stage)."
        )
    if g.get("metrics_vs_truth"):
        m = g["metrics_vs_truth"]
        lines.append("- against the known graph: " + ", ".join(f"{k} {v:.3g}" for k, v in m.items()))
    return lines


def fmt(v: Any, spec: str = ".3f") -> str:
    """``v`` formatted with ``spec``, or ``"n/a"`` for None and non-finite floats."""
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


def _hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600} h {s % 3600 // 60:02d} min" if s >= 3600 else f"{s // 60} min {s % 60:02d} s"


#: the report's and the train stage's line when Step I saw cells of the perturbation task's test
#: conditions (a ready ``train.encodings`` made elsewhere, or ``discover.hold_out_test_conditions``
#: set to false to let Step I see every cell; ``pipeline/stages/discover.py``)
HELD_OUT_LABELS_WARNING = (
    "Step I saw the cells of the perturbation task's held-out conditions (and their labels, where it read them), "
    "so the DAG behind `cape` is not blind to the perturbations it is scored on. By default the pipeline leaves "
    "them out (`discover.hold_out_test_conditions`); this run's encodings came from a ready "
    "directory (`train.encodings`) or from a Step I told to see every cell."
)


def run_lines(doc: dict[str, Any]) -> list[str]:
    """Report lines "What this run did": cells and features before and after preprocessing,
    edges, features without an edge, features at angle 0, tokens per cell, width, what the step
    budgets subsampled, the plan's estimate against the time taken, and the warning when the
    comparison cannot be informative (more than :data:`ZERO_ANGLE_WARN` of features at angle 0) or
    is not blind (:data:`HELD_OUT_LABELS_WARNING`, where the plan's ``step1_blind`` is not true)."""
    d, g, e, t = doc["data"], doc["dag"], doc["embedding"], doc["training"]
    shape_in = d.get("shape_in")
    lines = ["## What this run did"]
    before = f" (of {shape_in[1]:,} before preprocessing)" if shape_in and shape_in[1] != d["n_vars"] else ""
    lines.append(f"- data: {d['n_obs']:,} cells × {d['n_vars']:,} features{before}")
    iso = g.get("isolated_share")
    lines.append(
        f"- Step I: {g['n_edges']:,} edges" + (f"; {100 * iso:.0f} % of features have no edge" if iso is not None else "")
        + (f"; accepted by {g['edge_rule']}" if g.get("edge_rule") else "")
    )
    zero = e.get("zero_angle_share")
    if zero is not None:
        lines.append(f"- Steps II–III: {100 * zero:.0f} % of features sit at the origin (angle 0: CAPE leaves them unrotated)")
    plan = t.get("plan")
    if plan:
        capped = plan.get("share_capped") or 0.0
        lines.append(
            f"- transformers: width D = {plan['d_model']}, {plan['n_layers']} layers, {plan['n_heads']} heads; "
            f"tokens per cell median {plan['tokens_median']:.0f} (95th percentile {plan['tokens_p95']:.0f}; "
            f"cap {plan['max_tokens'] or 'none'}, reached by {100 * capped:.0f} % of cells, which keep their "
            "top expressed features)"
        )
        if plan.get("pretrain_subsampled"):
            lines.append(
                f"- subsampled: each pretraining ran its budget of {plan['pretrain_steps']} steps "
                f"({plan['pretrain_cells']:,} cells seen, a seeded subsample) instead of full epochs over "
                f"{d['n_obs']:,} cells"
            )
        else:
            lines.append("- subsampled: nothing (every pretraining ran its full epochs over all cells)")
        lines.append(
            f"- runs: {plan['runs']} ({len(plan['arms'])} arms × {len(plan['seeds'])} seeds), tasks "
            f"{', '.join(plan['tasks']) or 'none'}"
        )
        secs = doc.get("timings_s", {}).get("train")
        if plan.get("seconds_max") and secs is not None:
            lines.append(
                f"- train stage: {_hms(secs)}, against an estimate of about {_hms(plan['seconds_max'])} "
                f"from {1000 * plan['step_seconds']:.0f} ms per step measured on {plan.get('step_device') or 'cpu'}"
            )
    total = sum(doc.get("timings_s", {}).values())
    if total:
        lines.append(f"- time: {_hms(total)} over all stages (per stage at the end of this report)")
    comp = doc.get("comparison") or {}
    arm, base = comp.get("arm", "cape"), comp.get("baseline", "none")
    means = {(r["task"], arm_of(r), r["metric"]): r["mean"] for r in doc.get("metrics", [])}
    at_ceiling = sorted({f"{task} {metric}" for (task, a, metric), v in means.items()
                         if a == arm and metric in CEILING_METRICS and v >= CEILING
                         and means.get((task, base, metric), 0.0) >= CEILING})
    if at_ceiling:
        lines.append(
            f"- **Warning**: `{arm}` and `{base}` both score ≥ {CEILING} on {', '.join(at_ceiling)}: the task is too "
            "easy on this data to tell them apart there, so the comparison below cannot be informative for those metrics."
        )
    if zero is not None and zero > ZERO_ANGLE_WARN and t.get("runs"):
        lines.append(
            f"- **Warning**: {100 * zero:.0f} % of features are at angle 0, so `cape` rotates almost nothing and "
            "cannot differ much from `none`: the comparison below cannot be informative. Step I found too few "
            "edges on this data (see its warnings; a lower `discover.regression.min_effect` for the regression "
            "algorithm, or `discover.<algorithm>.threshold` for the others, keeps more)."
        )
    if "perturbation" in ((plan or {}).get("tasks") or ()) and not (plan or {}).get("step1_blind"):
        lines.append(f"- **Warning**: {HELD_OUT_LABELS_WARNING}")
    return lines


def hub_rows(enc: Any, k: int = 10, n_children: int = 5) -> list[dict[str, Any]]:
    """The ``k`` hub features of the encodings: largest causal PageRank among features with an
    edge, each with its PageRank, ‖e‖ (Poincaré norm: distance from the origin), ‖φ‖ (norm of
    its rotary angles, radians), out-degree and strongest children (by |weight|).

    Parameters
    ----------
    enc
        :class:`~cape_pipeline.encodings.CapeEncodings` (``graph`` may be None: no children).
    k, n_children
        Hubs listed and children named per hub.

    Returns
    -------
    list of dict
        ``feature``, ``pagerank``, ``norm_e``, ``norm_angles``, ``out_degree``, ``children``.
    """
    import scipy.sparse as sp

    names = np.asarray(enc.feature_names).astype(str)
    pr = np.asarray(enc.pagerank, dtype=float)
    norm_e = np.linalg.norm(np.asarray(enc.poincare, dtype=float), axis=1)
    norm_phi = np.linalg.norm(np.asarray(enc.angles, dtype=float), axis=1)
    adj = sp.csr_array(enc.graph.adjacency) if enc.graph is not None else None
    deg = enc.graph.degree() if adj is not None else np.ones(len(names))
    order = [i for i in np.argsort(-pr, kind="stable") if deg[i] > 0][:k]
    rows = []
    for i in order:
        children: list[str] = []
        out_degree = 0
        if adj is not None:
            lo, hi = adj.indptr[i], adj.indptr[i + 1]
            cols, w = adj.indices[lo:hi], np.abs(adj.data[lo:hi])
            out_degree = int(cols.size)
            children = [str(names[c]) for c in cols[np.argsort(-w, kind="stable")][:n_children]]
        rows.append({"feature": str(names[i]), "pagerank": float(pr[i]), "norm_e": float(norm_e[i]),
                     "norm_angles": float(norm_phi[i]), "out_degree": out_degree, "children": children})
    return rows


def hub_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown of :func:`hub_rows`: the hub features, their place in the ball and their children."""
    if not rows:
        return []
    lines = [
        "",
        f"Hub features (the {len(rows)} with the largest causal PageRank among those with an edge; ‖e‖: "
        "distance from the origin in the Poincaré ball, small for causally general features; ‖φ‖: norm of the "
        "rotary angles):",
        "",
        "| feature | PageRank | ‖e‖ | ‖φ‖ (rad) | children | strongest children |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        kids = ", ".join(r["children"]) + (" …" if r["out_degree"] > len(r["children"]) else "")
        lines.append(f"| {r['feature']} | {r['pagerank']:.4g} | {r['norm_e']:.3f} | {r['norm_angles']:.3f} | "
                     f"{r['out_degree']} | {kids or '–'} |")
    return lines


def angle_use_lines(comp: dict[str, Any]) -> list[str]:
    """Report lines: how much each arm's first annotation model changes when its CAPE angles
    are zeroed (``comp["angle_use"]``, from :func:`cape_pipeline.tasks.ablation.angle_use`).
    A model that barely changes barely uses its angles, whatever the paired difference says."""
    use = comp.get("angle_use") or {}
    if not use:
        return []
    parts = [f"`{arm}`: embeddings {100 * u['embedding_change']:.1f} %, labels {100 * u['prediction_change']:.2f} % "
             f"(median |φ| {u['angle_abs_median']:.3f} rad)" for arm, u in use.items()]
    low = [arm for arm, u in use.items() if u["prediction_change"] < 0.01]
    note = (f" Below 1 % of labels ({', '.join(low)}): the model barely uses its angles, so its comparison with "
            "`none` says little about CAPE." if low else "")
    return ["", "How much the first seed's annotation model uses its angles (every angle set to 0, up to 2,000 "
            "cells; share of cells whose predicted label changes): " + "; ".join(parts) + "." + note]
