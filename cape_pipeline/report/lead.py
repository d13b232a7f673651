"""The opening of ``report.md`` and its table of paired differences.

The opening answers at a glance: the verdict on CAPE against the baseline arm, the strongest
classical baseline beside the transformers, and where the encodings are with the three lines of
Python that load them (:func:`lead_lines`). The table gives each paired difference with its one
interval, saying which are adjusted (:func:`difference_lines`).
"""

from __future__ import annotations

import json
from typing import Any

from cape_pipeline.report.power import arm_of, fmt_difference, higher_is_better, is_primary

__all__ = ["HEADLINE_METRICS", "REFERENCE_NAMES", "baseline_sentence", "difference_lines", "figure_lines",
           "figure_link", "lead_lines", "load_lines", "verdict_word"]

REFERENCE_PE = "reference (no transformer)"

HEADLINE_METRICS = {"annotation": "accuracy", "clustering": "ari", "age": "medae", "perturbation": "mse_top20"}
"""The metric the opening compares the classical baseline on, per task."""

REFERENCE_NAMES = {
    "annotation": "logistic regression",
    "clustering": "k-means on the top 50 principal components",
    "age": "an elastic net",
    "perturbation:ctrl": "predicting the control mean",
    "perturbation:linear": "a linear model on control expression",
}
"""What each task's ``reference_*`` metrics are, by task (``task:prefix`` for a prefixed one)."""


def verdict_word(rows: list[dict[str, Any]]) -> str:
    """The verdict of :func:`~cape_pipeline.report.build.verdict_sentence` in a few words:
    ``helped``, ``hurt``, ``mixed`` or ``cannot tell``, from the main-metric ``rows``."""
    prim = [r for r in rows if is_primary(r)]
    if not prim or min(r["n"] for r in prim) < 2:
        return "cannot tell"
    better = any(r["verdict"] == "better" for r in prim)
    worse = any(r["verdict"] == "worse" for r in prim)
    return "mixed" if better and worse else "helped" if better else "hurt" if worse else "cannot tell"


def baseline_sentence(doc: dict[str, Any]) -> str | None:
    """One clause per task: the strongest classical baseline (``comparison["references"]``) on the
    task's :data:`HEADLINE_METRICS` against the best transformer arm (mean over seeds), e.g.
    "logistic regression beats every transformer on annotation accuracy: 0.818 vs 0.727
    (`none`, the best arm)"; None without references."""
    refs = (doc.get("comparison") or {}).get("references") or {}
    means: dict[tuple[str, str], dict[str, float]] = {}
    for r in doc.get("metrics", []):
        if arm_of(r) != REFERENCE_PE:
            means.setdefault((r["task"], r["metric"]), {})[arm_of(r)] = r["mean"]
    parts = []
    for task, values in refs.items():
        metric = HEADLINE_METRICS.get(task)
        if not any(k == metric or k.endswith(f"_{metric}") for k in values):
            metric = next((k for k in values if (task, k) in means), None)
        if metric is None or (task, metric) not in means:
            continue
        up = higher_is_better(metric)
        cands = {k: v for k, v in values.items() if k == metric or k.endswith(f"_{metric}")}
        ref_key = (max if up else min)(cands, key=lambda k: cands[k])
        ref = cands[ref_key]
        prefix = ref_key[: -len(metric) - 1] if ref_key != metric else ""
        name = REFERENCE_NAMES.get(f"{task}:{prefix}" if prefix else task, f"the {prefix or task} reference")
        arms = means[(task, metric)]
        arm = (max if up else min)(arms, key=lambda a: arms[a])
        best = arms[arm]
        where = f"{task} {metric}" + ("" if up else " (lower is better)")
        if (ref > best) == up and ref != best:
            which = "the best arm" if len(arms) > 1 else "the only arm"
            parts.append(f"{name} beats every transformer on {where}: {ref:.3f} vs {best:.3f} (`{arm}`, {which})")
        else:
            parts.append(f"`{arm}` beats {name} on {where}: {best:.3f} vs {ref:.3f}")
    return "; ".join(parts) if parts else None


def load_lines(where: str) -> list[str]:
    """The three lines of Python that load the encodings in directory ``where``."""
    return [
        "from cape_pipeline import load_encodings",
        f"enc = load_encodings({json.dumps(where)})",
        "table = enc.to_frame()  # one row per gene: pagerank, angle_*, poincare_*, hyperboloid_*",
    ]


def figure_link(doc: dict[str, Any], name: str, label: str | None = None) -> str:
    """A Markdown link to figure ``name`` (a path relative to the report) when the report lists it
    (``doc["figures"]``), else ``""``."""
    return f"[{label or name}]({name})" if name in (doc.get("figures") or ()) else ""


def lead_lines(doc: dict[str, Any]) -> list[str]:
    """The opening of ``report.md``: the verdict, the strongest classical baseline, and where the
    encodings are with the three lines that load them."""
    comp = doc.get("comparison") or {}
    lines: list[str] = []
    if comp.get("verdict"):
        rows = comp.get("differences") or []
        name = "CAPE" if comp.get("arm") == "cape" else f"`{comp.get('arm')}`"
        lines += [f"**{name} vs `{comp.get('baseline')}`: {verdict_word(rows) if rows else 'no comparison'}.** "
                  f"{comp['verdict']}", ""]
    base = baseline_sentence(doc)
    if base:
        lines += [f"**Classical baseline:** {base}.", ""]
    enc = doc.get("encodings")
    if enc:
        files = ", ".join(f"`{f}`" for f in enc.get("files", []))
        here = "beside this report" if enc["dir"] == "." else f"in `{enc['dir']}`"
        lines += [
            f"**Encodings** (one row per gene: causal PageRank, rotary angles, Poincaré and hyperboloid "
            f"coordinates; the DAG one row per edge): {files} {here}. To load them in Python"
            + (" (from this report's directory):" if enc["dir"] == "." else ":"),
            "",
            "```python",
            *load_lines(enc["dir"]),
            "```",
            "",
            "`enc.angles` holds the angles in `enc.feature_names` order; `enc.align(adata.var_names)` returns them in "
            "another dataset's gene order.",
            "",
        ]
    return lines


def difference_lines(doc: dict[str, Any]) -> list[str]:
    """The table of paired differences ``arm − baseline`` of every trained arm (``comparison["arms"]``;
    the lead arm's ``differences`` when no other arm ran), one interval per row: on the main
    metrics (:data:`~cape_pipeline.report.power.PRIMARY_METRICS`) the Bonferroni-adjusted one
    the verdict reads, on the others the unadjusted 95 % one; with the minimum detectable effect
    at the row's level where known. Empty without rows."""
    comp = doc.get("comparison") or {}
    rows = comp.get("arms") or [{"arm": comp.get("arm"), **r} for r in comp.get("differences") or []]
    if not rows:
        return []
    ks = sorted({r["adjusted_for"] for r in rows if r.get("adjusted_for")})
    adj = (f"on the main metrics (in bold) the interval is Bonferroni-adjusted for the {ks[0]} main metrics of the arm "
           f"(each at {100 * (1 - 0.05 / ks[0]):.4g} %, so that together they hold at 95 %), as in the verdict at the top; "
           "on the other metrics it is an unadjusted 95 % interval" if len(ks) == 1 else
           "on the main metrics (in bold) the interval is Bonferroni-adjusted for their number per arm (its level "
           "in the table), as in the verdict at the top; on the other metrics it is an unadjusted 95 % interval"
           if ks else "each a 95 % interval")
    figs = []
    # cape_vs_default.png: the figure's name in reports of earlier versions
    links = (figure_link(doc, f"figures/{f}", f) for f in ("cape_vs_none.png", "cape_vs_default.png"))
    if link := next((k for k in links if k), ""):
        figs.append(f"{link} (the main metrics of `{comp['arm']}`, per seed)")
    if link := figure_link(doc, "figures/forest.png", "forest.png"):
        figs.append(f"{link} (every row)")
    out = [
        f"Paired differences against `{comp['baseline']}` (arm − {comp['baseline']} per seed, on the same split and "
        f"initial seed). One interval per difference, a paired t-interval: {adj}. MDE: the smallest true "
        "difference these seeds detect with power 0.8 at the row's level; an interval inside ± MDE cannot tell. "
        "For mse/medae/mae lower is better." + (f" Figures: {'; '.join(figs)}." if figs else ""),
        "",
        "| arm | task | metric | mean difference [interval] | level | MDE | seeds | reading |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        main = is_primary(r)
        metric = f"**{r['metric']}**" if main else r["metric"]
        level = f"{100 * r.get('level', 0.95):.4g} %" + (f" (Bonferroni, {r['adjusted_for']})" if r.get("adjusted_for") else "")
        mde = "–" if r.get("mde") is None else f"{r['mde']:.4f}"
        out.append(f"| {r['arm']} | {r['task']} | {metric} | {fmt_difference(r['mean'], r['ci_low'], r['ci_high'])} | "
                   f"{level if r['ci_low'] is not None else '–'} | {mde} | {r['n']} | {r['verdict']} |")
    return out


def figure_lines(doc: dict[str, Any]) -> list[str]:
    """Links to the training figures (``curves_<task>.png``, ``confusion_<task>_<arm>.png``,
    ``umap_<arm>.png``) the report lists, one line per kind."""
    figs = list(doc.get("figures") or ())

    def named(prefix: str) -> str:
        return ", ".join(f"[{f.removeprefix('figures/' + prefix).removesuffix('.png')}]({f})"
                         for f in figs if f.startswith(f"figures/{prefix}"))

    lines = []
    if link := figure_link(doc, "figures/loss.png", "loss.png"):
        lines.append(f"- training losses: {link} (right panel: masked-value pretraining of each arm, first seed)"
                     + (f"; per task, pretraining, fine-tuning and validation loss: {named('curves_')}"
                        if named("curves_") else ""))
    if named("confusion_"):
        lines.append(f"- confusion matrices on the test cells (task_arm): {named('confusion_')}")
    if named("umap_"):
        lines.append(f"- UMAP of the cell embeddings, colored by label (arm): {named('umap_')}")
    return lines
