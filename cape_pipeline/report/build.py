"""The train stage's stored results and the evaluate stage's report (``report.md``/``.json``).

The report holds: a data summary, the DAG summary (with metrics against a known graph), the
embedding's quality, per PE × task metrics as mean ± sd over seeds, training throughput, the
time each stage took, and figures (training curves, confusion matrix, UMAP of cell embeddings).
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cape_pipeline import __version__
from cape_pipeline._utils import atomic_path, write_json_atomic
from cape_pipeline.report.lead import (
    REFERENCE_PE,
    difference_lines,
    figure_lines,
    figure_link,
    lead_lines,
)
from cape_pipeline.report.power import (  # noqa: F401  (re-exported: the report's API)
    LOWER_IS_BETTER,
    NEGLIGIBLE,
    PRIMARY_METRICS,
    _at_level,
    _mean_sd,
    adjust_family,
    arm_differences,
    arm_of,
    fmt_difference,
    higher_is_better,
    is_primary,
    paired_differences,
)
from cape_pipeline.report.sections import (
    ZERO_ANGLE_WARN,
    angle_use_lines,
    dag_lines,
    embedding_lines,
    hub_lines,
    hub_rows,
    run_lines,
)


# ------------------------------------------------------------------------------------ report
@dataclass
class Report:
    """The evaluate stage's output: a JSON-able document plus rendered figures.

    Attributes
    ----------
    doc
        Everything in ``report.json``.
    figures
        ``{file name: matplotlib Figure}``; written as PNG under ``figures/``.
    """

    doc: dict[str, Any]
    figures: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """A few numbers for the CLI line: the first metric of each task for the first PE."""
        out: dict[str, Any] = {}
        for row in self.doc.get("metrics", [])[:4]:
            out[f"{row['task']}.{arm_of(row)}.{row['metric']}"] = round(row["mean"], 4)
        verdict = self.doc.get("comparison", {}).get("verdict")
        if verdict:
            out["verdict"] = verdict
        return out

    def write(self, d: Path) -> None:
        """Write ``report.json``, ``report.md`` and ``figures/*.png`` into ``d`` (atomically)."""
        import matplotlib.pyplot as plt

        write_json_atomic(d / "report.json", self.doc)
        with atomic_path(d / "report.md") as tmp:
            tmp.write_text(render_markdown(self.doc))
        for name, fig in self.figures.items():
            (d / "figures").mkdir(parents=True, exist_ok=True)
            with atomic_path(d / "figures" / name) as tmp:
                fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
            plt.close(fig)

    @classmethod
    def read(cls, d: Path) -> Report:
        """Read ``report.json`` back (figures stay on disk)."""
        return cls(doc=json.loads((d / "report.json").read_text()))


_is_primary = is_primary


def verdict_sentence(diffs: list[dict[str, Any]], arm: str = "cape", baseline: str = "none") -> str:
    """One sentence: did ``arm`` help over ``baseline`` on the primary metrics of each task?

    ``diffs`` are :func:`paired_differences` rows; only the primary metrics
    (:data:`PRIMARY_METRICS`) count. Pass rows computed at a family-wise level (see
    :func:`primary_differences`) so that several metrics do not inflate false "helped"/"hurt".
    """
    prim = [r for r in diffs if _is_primary(r)]
    if not prim:
        return f"No paired comparison of {arm} with {baseline} was run (train both arms on the same seeds)."
    n = min(r["n"] for r in prim)
    if n < 2:
        return (f"Cannot tell whether {arm.upper() if arm == 'cape' else arm} helped: with {n} seed there is no "
                f"interval for {arm} − {baseline}; train with n_seeds ≥ 3.")

    def fmt(r: dict[str, Any]) -> str:
        return f"{r['task']} {r['metric']} {fmt_difference(r['mean'], r['ci_low'], r['ci_high'])}"
    better = [r for r in prim if r["verdict"] == "better"]
    worse = [r for r in prim if r["verdict"] == "worse"]
    name = "CAPE" if arm == "cape" else arm
    k = len(prim)
    what = f"{arm} − {baseline}, {n} seeds, " + (
        f"95 % intervals Bonferroni-adjusted for {k} metrics, each at {100 * (1 - 0.05 / k):.4g} %" if k > 1
        else "95 % interval")
    if better and not worse:
        return f"{name} helped on this data ({what}): " + "; ".join(map(fmt, better)) + "."
    if worse and not better:
        return f"{name} hurt on this data ({what}): " + "; ".join(map(fmt, worse)) + "."
    if better and worse:
        return f"Mixed: {name} helped on " + "; ".join(map(fmt, better)) + " and hurt on " + "; ".join(map(fmt, worse)) + f" ({what})."
    return (f"No evidence that {name} helped on this data: on the main metrics every interval contains 0 or the "
            f"difference is negligible ({what}): " + "; ".join(map(fmt, prim)) + ".")


def primary_differences(results: list[Any], arm: str = "cape", baseline: str = "none", level: float = 0.95) -> list[dict[str, Any]]:
    """:func:`paired_differences` of the primary metrics at the family-wise ``level``
    (Bonferroni: each interval at ``1 − (1 − level) / k`` for k primary metrics)."""
    return _bonferroni(paired_differences(results, arm, baseline), level)


def _bonferroni(diffs: list[dict[str, Any]], level: float = 0.95) -> list[dict[str, Any]]:
    """The primary rows of ``diffs`` with their intervals at ``1 − (1 − level) / k``."""
    rows = [r for r in diffs if _is_primary(r)]
    k = max(len(rows), 1)
    return [_at_level(r, 1.0 - (1.0 - level) / k) for r in rows]


SMALL_ANGLE = 0.05
"""Radians; below this largest |φ| the report flags the encodings as nearly no rotation."""


def spearman_norm_pagerank(poincare: Any, pagerank: Any) -> float:
    """Spearman ρ between ‖e_j‖ and −π_j (the Step II quality check: general features near the origin; paper 000 Sec. 3.2).

    Positive when causally general (high-PageRank) features sit nearer the origin. NaN when
    either has no variation (e.g. a graph without edges) or there are fewer than 3 features.
    """
    from cape_pipeline.hyperbolic.quality import norm_spearman

    norms = np.linalg.norm(np.asarray(poincare, dtype=np.float64), axis=1)
    return norm_spearman(norms, -np.asarray(pagerank, dtype=np.float64))


def angle_quantiles(angles: Any, rows: Any = None) -> dict[str, float | None]:
    """Spread of the rotary angles: quantiles (50/90/99 %) and max of |φ| (radians) over the
    entries of ``angles[rows]`` (``rows``: boolean mask, e.g. features off the origin)."""
    a = np.abs(np.asarray(angles, dtype=np.float64))
    if rows is not None:
        a = a[np.asarray(rows, dtype=bool)]
    if a.size == 0:
        return {"q50": None, "q90": None, "q99": None, "max": None}
    q = np.quantile(a, [0.5, 0.9, 0.99])
    return {"q50": float(q[0]), "q90": float(q[1]), "q99": float(q[2]), "max": float(a.max())}


def aggregate_metrics(results: list[Any]) -> list[dict[str, Any]]:
    """Rows ``{task, arm, metric, mean, sd, n}`` over seeds, in first-seen order.

    Metrics named ``reference_*`` (the non-transformer baseline each task computes on the same
    split: logistic regression, k-means on PCA, ...) are the same for every arm, so they are
    taken from the first arm's runs and reported once under arm = ``reference (no transformer)``.
    A result's arm is :func:`~cape_pipeline.report.power.arm_of` its ``params`` (``pe`` in
    ``results.json`` files written before the key was called ``arm``).
    """
    groups: dict[tuple[str, str, str], list[float]] = {}
    first_arm: dict[str, str] = {}
    for r in results:
        arm = arm_of(r.params)
        first_arm.setdefault(r.task, arm)
        for metric, value in r.metrics.items():
            if metric.startswith("reference_"):
                if arm != first_arm[r.task]:
                    continue
                key = (r.task, REFERENCE_PE, metric.removeprefix("reference_"))
            else:
                key = (r.task, arm, metric)
            groups.setdefault(key, []).append(float(value))
    rows = []
    for (task, arm, metric), vals in groups.items():
        mean, sd = _mean_sd(vals)
        rows.append({"task": task, "arm": arm, "metric": metric, "mean": mean, "sd": sd, "n": len(vals)})
    return rows


def build_report(
    *, train: Any, adata: Any, encode: Any, source: str, timings: dict[str, float], umap: bool = True,
    progress: bool = False,
) -> Report:
    """Assemble the report of a run (see the module docstring).

    Parameters
    ----------
    train
        The train stage's ``TrainOutput``.
    adata
        The preprocessed AnnData (labels in ``obs``).
    encode
        The encode stage's ``EncodeOutput``.
    source
        Dataset name or file.
    timings
        Seconds per stage.
    umap
        Draw UMAPs of the cell embeddings (scanpy).
    progress
        Show progress over the UMAPs.
    """
    enc = encode.encodings
    norms = np.linalg.norm(np.asarray(enc.poincare), axis=1)
    placed = norms > 0  # features at the origin (no edge, embed(isolated="origin")) have no rank
    rows = placed if placed.sum() >= 3 else np.ones_like(placed)
    rho = spearman_norm_pagerank(np.asarray(enc.poincare)[rows], np.asarray(enc.pagerank)[rows])
    graph = enc.graph
    gp = graph.params if graph is not None else {}  # the DAG's params; {} without a graph
    prep = adata.uns.get("cape_preprocess", {})
    throughput: dict[str, list[float]] = {}
    for r in train.results:
        if np.isfinite(r.cells_per_second):
            throughput.setdefault(arm_of(r.params), []).append(float(r.cells_per_second))
    doc: dict[str, Any] = {
        "cape_pipeline": __version__,
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "processor": platform.processor()},
        "data": {
            "source": source,
            "n_obs": int(adata.n_obs),
            "n_vars": int(adata.n_vars),
            "modality": prep.get("modality"),
            "input_state": prep.get("input_state"),
            "preprocess_steps": prep.get("steps", []),
            "shape_in": prep.get("shape_in"),
            "fingerprint": encode.provenance.get("data_fingerprint"),
        },
        "dag": {
            "method": gp.get("method"),
            "n_edges": graph.n_edges if graph is not None else 0,
            "n_cycle_edges_dropped": graph.n_cycle_edges_dropped if graph is not None else 0,
            "algorithm": gp.get("algorithm", gp.get("support")),  # "support": its name in earlier files
            **{k: gp.get(k) for k in ("support", "n_isolated", "isolated_share", "edge_rule", "covariates_used",
                                      "n_states")},
            "warnings": list(gp.get("warnings", [])),
            "metrics_vs_truth": encode.provenance.get("metrics_vs_truth"),
            "interventions": _interventions(graph, adata),
            "held_out_cells": gp.get("held_out_cells"),
            "n_held_out_conditions": len(gp.get("held_out_conditions") or []),
            "held_out_share": gp.get("held_out_share"),
        },
        "embedding": {
            "d": int(enc.d),
            "geometry": enc.geometry,
            "scale": float(enc.scale),
            "frequencies": None if enc.frequencies is None else [float(enc.frequencies[0]), float(enc.frequencies[-1])],
            "max_norm_e": float(norms.max()),
            "max_abs_angle": float(np.abs(np.asarray(enc.angles)).max()),
            "zero_angle_share": float((np.abs(np.asarray(enc.angles)).max(axis=1) < 1e-8).mean()),
            "angle_quantiles": angle_quantiles(enc.angles, norms > 0),
            "spearman_norm_vs_neg_pagerank": rho,
            "final_loss": encode.embed_loss[-1] if encode.embed_loss else None,
            "epochs_run": enc.params.get("epochs_run"),
            "converged": enc.params.get("converged"),
            "curvature": enc.params.get("curvature"),
            "n_isolated": enc.params.get("n_isolated"),
            "isolated": enc.params.get("isolated"),
            "quality": enc.params.get("quality"),
        },
        "training": {
            "tasks": train.tasks, "arms": train.arms, "d_model": train.d_model, "runs": len(train.results),
            "checkpoint_genes": getattr(train, "checkpoint_genes", None), "plan": getattr(train, "plan", None),
        },
        "hubs": hub_rows(enc),
        "comparison": _comparison(train),
        "metrics": aggregate_metrics(train.results),
        "throughput_cells_per_s": {pe: _mean_sd(v)[0] for pe, v in throughput.items()},
        "timings_s": {k: round(float(v), 3) for k, v in timings.items()},
    }
    from cape_pipeline.pl.report import report_figures

    comparison = doc["comparison"]
    primary = [row for row in comparison["differences"] if _is_primary(row)]
    figures = report_figures(train, adata, comparison, primary, umap=umap, progress=progress, encode=encode)
    doc["encodings"] = _encodings_place(encode, graph)
    doc["figures"] = sorted(f"figures/{name}" for name in figures) + (
        # the encode stage's figures, exported beside the report when this run made the encodings
        [] if doc["encodings"]["dir"] != "." else ["poincare.png"] + (["dag.png"] if graph is not None else []))
    return Report(doc=doc, figures=figures)


def _encodings_place(encode: Any, graph: Any) -> dict[str, Any]:
    """Where the run's encodings are: ``dir`` (``"."``: exported beside the report by this run's
    encode stage; else the ready directory ``train.encodings`` named) and ``files`` (their file
    names)."""
    from cape_pipeline.encodings.export import DAG_FILE, ENCODINGS_FILE, MANIFEST_FILE

    ready = (encode.provenance or {}).get("encodings_dir")
    listed = list((getattr(encode.encodings, "manifest", None) or {}).get("files") or {})
    first = {ENCODINGS_FILE: 0, DAG_FILE: 1}
    files = sorted(listed, key=lambda f: (first.get(f, 2), f)) or [ENCODINGS_FILE] + ([DAG_FILE] if graph is not None else [])
    return {"dir": str(Path(ready).resolve()) if ready else ".", "files": [*files, MANIFEST_FILE]}


def _interventions(graph: Any, adata: Any) -> dict[str, Any] | None:
    """What Step I read of the perturbation labels, and CausalBench's check of its edges
    (:func:`~cape_pipeline.causal.metrics.interventional_score`): on the cells of the conditions
    Step I left out (and the controls) where it left some out, else on the cells it was fitted
    to; None without labels."""
    if graph is None or not graph.params.get("intervention_column"):
        return None
    from cape_pipeline.causal.metrics import interventional_score

    col = graph.params["intervention_column"]
    out = {k: graph.params.get(k) for k in ("intervention_column", "n_control_cells", "n_perturbed_cells",
                                            "n_perturbed_features", "label_kinds", "unassigned_labels",
                                            "unknown_targets")}
    held_out = list(graph.params.get("held_out_conditions") or [])
    out["on_held_out"] = bool(held_out)
    if col in adata.obs.columns and list(adata.var_names) == list(graph.feature_names):
        if held_out:  # scored on the cells Step I did not see (and the controls)
            from cape_pipeline._keys import condition_labels, parse_condition

            labels = condition_labels(adata.obs, col, "report: ")
            unseen = np.isin(condition_labels(adata.obs, graph.params["held_out_split"]["label_key"], "report: "), held_out)
            adata = adata[unseen | np.isin(labels, [c for c in np.unique(labels).tolist() if not parse_condition(c)])]
        score = interventional_score(adata, graph.adjacency, column=col)
        out.update({k: score[k] for k in ("n_testable", "share_shifted", "random_share_shifted")})
    return out


def _comparison(train: Any) -> dict[str, Any]:
    """The report's lead: paired cape − none differences, a verdict, and the references.

    ``differences`` (the lead arm) and ``arms`` (every arm) carry one interval per quantity
    (:func:`~cape_pipeline.report.power.adjust_family`): on each arm's main metrics the
    Bonferroni-adjusted one the verdict reads, on the others the unadjusted 95 % one."""
    arm = "cape" if "cape" in train.arms else (train.arms[0] if train.arms else "cape")
    # the baseline is the identity alone: ``none``; results of earlier versions call it ``default``
    base = next((b for b in ("default", "none") if b in train.arms and b != arm),
                next((p for p in train.arms if p != arm), "none"))
    diffs = adjust_family(paired_differences(train.results, arm, base)) if arm != base else []
    prim = [r for r in diffs if _is_primary(r)]
    refs: dict[str, dict[str, list[float]]] = {}
    for r in train.results:
        if arm_of(r.params, "") != train.arms[0]:
            continue
        for k, v in r.metrics.items():
            if k.startswith("reference_"):
                refs.setdefault(r.task, {}).setdefault(k.removeprefix("reference_"), []).append(float(v))
    return {
        "arm": arm,
        "baseline": base,
        "differences": diffs,
        "arms": adjust_family(arm_differences(train.results, base)),
        "angle_use": {arm_of(r.params): r.params["angle_ablation"] for r in train.results
                      if r.task == "annotation" and r.params.get("angle_ablation")},
        "verdict": verdict_sentence(prim, arm, base),
        "references": {t: {m: _mean_sd(v)[0] for m, v in ms.items()} for t, ms in refs.items()},
    }


def _md_table(columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    """Markdown table lines: header, rule, one line per row (cells as given, str()-ed)."""
    return [
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(str(c) for c in row) + " |" for row in rows),
    ]


def render_markdown(doc: dict[str, Any]) -> str:
    """The report as Markdown: the opening (the verdict, the strongest classical baseline, where
    the encodings are and how to load them; :func:`~cape_pipeline.report.lead.lead_lines`), then
    the data, the run, Steps I–III and the tasks, each with links to its figures, and the time
    per stage."""
    d, g, e, t = doc["data"], doc["dag"], doc["embedding"], doc["training"]
    lines = [f"# CAPE report: {d['source']}", "", *lead_lines(doc)]
    lines += [
        "## Data",
        f"- {d['n_obs']} observations × {d['n_vars']} features, modality {d['modality']}, input {d['input_state']}",
        f"- preprocessing: {'; '.join(d['preprocess_steps']) or 'none'}",
        f"- data fingerprint: `{d['fingerprint']}`",
        "",
    ]
    lines += run_lines(doc)
    lines += [""]
    lines += dag_lines(g, d["n_vars"])
    dag_fig, loss_fig = figure_link(doc, "dag.png"), figure_link(doc, "figures/loss.png", "loss.png")
    if dag_fig or loss_fig:
        lines.append("- figures: " + "; ".join(
            ([f"{dag_fig} (the strongest edges, hubs named; rows are topological generations)"] if dag_fig else [])
            + ([f"{loss_fig} (left panel: what Step I recorded)"] if loss_fig else [])))
    lines += [
        "",
        "## Embedding (Steps II–III)",
        f"- d = {e['d']}, geometry {e['geometry']}, angle scale c = {e['scale']:.4f} rad"
        + ("" if not e.get("frequencies") else
           f", per-pair frequencies ω geometric from {e['frequencies'][0]:.3g} to {e['frequencies'][1]:.3g} (φ_i = c·ω_i·e_i)"),
        f"- max ‖e‖ = {e['max_norm_e']:.4f}; Spearman(‖e‖, −PageRank) = {e['spearman_norm_vs_neg_pagerank']:.3f}"
        " over features off the origin (positive: causally general features sit nearer the origin; nan: no "
        "variation, e.g. a graph without edges)",
    ]
    lines += embedding_lines(e)
    ball = figure_link(doc, "poincare.png")
    if ball or loss_fig:
        lines.append("- figures: " + "; ".join(
            ([f"{ball} (the Poincaré ball colored by PageRank: causally general features near the centre)"] if ball else [])
            + ([f"{loss_fig} (middle panel: the embedding loss per epoch, log scale)"] if loss_fig else [])))
    lines += hub_lines(doc.get("hubs", []))
    if e.get("max_abs_angle", 1.0) < SMALL_ANGLE:
        lines.append(
            f"- **The angles are nearly zero** (max |φ| = {e['max_abs_angle']:.3g} rad < {SMALL_ANGLE} rad): the "
            "rotation barely changes attention, so `cape` behaves like `none`. The embedding stayed near its "
            "start; a larger `embed.max_epochs` or `embed.lr` moves it further (benchmarks/embed)."
        )
    comp = doc.get("comparison")
    lines += ["", "## Tasks"]
    if comp and comp.get("differences"):
        lines += [""]
        if (e.get("zero_angle_share") or 0.0) > ZERO_ANGLE_WARN:
            lines += [
                f"Warning: {100 * e['zero_angle_share']:.0f} % of features are at angle 0 (no edge in Step I), so "
                "this comparison cannot be informative about CAPE (see What this run did).",
                "",
            ]
        if e.get("max_abs_angle", 1.0) < SMALL_ANGLE:
            lines += [
                f"Note: the CAPE angles are nearly zero (max |φ| = {e['max_abs_angle']:.3g} rad), so `cape` and "
                "`none` are nearly the same model here; the comparison says little about CAPE with a "
                "well-spread embedding (see Embedding).",
                "",
            ]
        lines += difference_lines(doc) + angle_use_lines(comp)
        if comp.get("references"):
            lines += ["", "Classical references on the same splits (mean over seeds): " + "; ".join(
                f"{t}: " + ", ".join(f"{m} {v:.4f}" for m, v in ms.items()) for t, ms in comp["references"].items()) + "."]
        lines += [""]
    elif comp:
        lines += ["", f"**{comp['verdict']}**", ""]
    if not doc["metrics"]:
        lines.append("No downstream task for this dataset (its catalog entry lists none, or no labels were given).")
    else:
        if t.get("checkpoint_genes") or t.get("init"):  # ``init``: a report of an earlier version
            i = t.get("checkpoint_genes") or t["init"]
            lines += [
                f"Every arm starts from the scGPT checkpoint `{i['checkpoint']}`: {i['n_genes_used']} genes in its "
                f"vocabulary are used, {i['n_genes_dropped']} are not and were dropped"
                + (f" (e.g. {', '.join(i['dropped_examples'][:5])})." if i["n_genes_dropped"] else "."),
                "",
            ]
        lines += [
            f"Backbone width D = {t['d_model']}; arms {', '.join(t.get('arms', t.get('pes', [])))}; {t['runs']} results (task × arm × seed). Mean ± sd over seeds "
            "(sd – for one seed). `none` is the backbone's own feature identity alone (no PE; `default` in earlier versions); "
            "`/no-id` arms drop the identity.",
            "",
        ]
        lines += _md_table(
            ("task", "arm", "metric", "mean", "sd", "seeds"),
            [
                (r["task"], arm_of(r), r["metric"], f"{r['mean']:.4f}", "–" if r["sd"] is None else f"{r['sd']:.4f}", r["n"])
                for r in doc["metrics"]
            ],
        )
        if doc["throughput_cells_per_s"]:
            lines += ["", "Training throughput (cells/s): " + ", ".join(
                f"{pe} {v:.1f}" for pe, v in doc["throughput_cells_per_s"].items())]
        lines += ["", f"`{REFERENCE_PE}` rows are each task's classical baseline on the same split "
                  "(logistic regression on the log-normalized input for annotation; see the task docs)."]
        figs = figure_lines(doc)
        lines += ["", "Figures:", *figs] if figs else []
    lines += ["", "## Time per stage (s)", "", "| stage | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in doc["timings_s"].items()]
    every = list(doc.get("figures") or ())
    lines += ["", "All figures: " + ", ".join(f"[{f}]({f})" for f in every) + "." if every else "",
              "", f"cape_pipeline {doc['cape_pipeline']}; Python {doc['machine']['python']} on {doc['machine']['platform']}.", ""]
    return "\n".join(lines)
