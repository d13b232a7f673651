"""Training curves: the Step II loss per epoch and the Step I history (matplotlib, Agg).

Every function draws on an Agg-backed :class:`matplotlib.figure.Figure` (no pyplot global
state), returns it, and writes a PNG when ``save`` is given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.pl._utils import maybe_save, new_axes

__all__ = ["plot_loss", "plot_training_curves"]


def plot_loss(
    history: Sequence[float] | Mapping[str, Sequence[float]] | Any,
    *,
    logy: bool = False,
    label: str | None = None,
    ax: Axes | None = None,
    save: str | os.PathLike[str] | None = None,
) -> Figure:
    """Training curves: loss per epoch (Eq. 15 for the embedding, Eq. 10 terms for Step I).

    Parameters
    ----------
    history
        A sequence of floats, an object with ``loss_history`` (HyperbolicEmbedding), an
        AnnData after :func:`cape_pipeline.tl.embed` (its stored loss curve), or a
        mapping ``{label: sequence}`` of several curves. A mapping is drawn one panel per curve
        (their scales differ, e.g. −ELBO and h(A)), or overlaid when ``ax`` is given; empty
        curves are skipped.
    logy
        Logarithmic y axis.
    label
        Legend label (single curve).
    ax
        Axes to draw on (to overlay several curves); default: a new figure.
    save
        Write a PNG here.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If there is no loss value to draw.
    """
    if hasattr(history, "uns") and hasattr(history, "var_names"):  # an AnnData after tl.embed
        from cape_pipeline import _keys

        stored = (history.uns.get(_keys.UNS) or {}).get("embed", {}).get("loss_history")
        if stored is None:
            raise ValueError("plot_loss: adata.uns['cape']['embed']['loss_history'] not found; run "
                             "cape_pipeline.tl.embed(adata) first")
        history, label = np.asarray(stored, dtype=np.float64), label or "embed (Eq. 15)"
    if isinstance(history, Mapping):
        curves = {
            str(k): np.asarray(v, dtype=np.float64).ravel() for k, v in history.items() if len(v)
        }
    else:
        curves = {
            label or "": np.asarray(getattr(history, "loss_history", history), dtype=np.float64)
        }
    if not curves or any(v.ndim != 1 or v.size == 0 for v in curves.values()):
        raise ValueError("history: expected a non-empty sequence of loss values")
    if ax is not None or len(curves) == 1:
        fig, ax = new_axes(ax, (6, 4))
        axes = [ax] * len(curves)
    else:
        fig = Figure(figsize=(4.2 * len(curves), 3.6), layout="constrained")
        FigureCanvasAgg(fig)
        axes = list(fig.subplots(1, len(curves), squeeze=False)[0])
    for (name, values), a in zip(curves.items(), axes, strict=True):
        a.plot(np.arange(1, values.size + 1), values, label=name or None)
        a.set_xlabel("epoch" if len(curves) == 1 or "embed" in name else "step")
        a.set_ylabel("loss")
        if logy:
            a.set_yscale("log")
        if len(curves) > 1 and len(set(map(id, axes))) > 1:
            a.set_title(name, fontsize=9)
        elif name:
            a.legend()
        a.grid(alpha=0.3)
    maybe_save(fig, save)
    return fig


def plot_training_curves(
    embed_loss: Sequence[float], discover_history: Sequence[Mapping[str, Any]], *, graph: CausalGraph | None = None,
    training: Mapping[str, Sequence[float]] | None = None, training_title: str = "Transformers: training loss",
) -> Figure:
    """The pipeline's losses, one panel per step in pipeline order: Step I, Step II and, when
    ``training`` is given, the transformers.

    Step I shows what its method records: −ELBO and h(A) at the end of each augmented-Lagrangian
    outer step (Eqs. 8 and 10, log scale); the validation NLL per epoch and ρ(A) (algorithm
    ``"learned"``); or, for the regression algorithm, which fits closed-form regressions and has no
    loss, the pairs and edges left after each of its stages, one line per random split of the
    cells (log scale). A Step I that records nothing says why (a given graph, or a method without
    a history). Step II is the embedding loss per epoch (Eq. 15) on a log y axis.

    Parameters
    ----------
    embed_loss
        Loss per epoch of :func:`cape_pipeline.hyperbolic.embed` (``loss_history``).
    discover_history
        ``CausalGraph.history`` of Step I: one mapping per outer step with ``h`` (and
        ``neg_elbo`` for method ``cape``), per epoch with ``stage``, ``val_nll`` and ``h``
        (algorithm ``"learned"``), or per stage with ``stage`` and counts such as ``n_accepted``
        and ``n_edges`` (algorithm ``"regression"``; ``split`` numbers the random split).
    graph
        The returned DAG: when the acyclicity measure ends above 0 but this thresholded graph
        is acyclic, the Step I panel says so (h measures the continuous weights, not the
        returned graph); its ``params`` (``method``, ``algorithm``, or ``support`` in files
        written before) name what made it.
    training
        ``{label: loss per epoch}`` of the transformers (e.g. one arm's masked-value
        pretraining each); drawn as a third panel titled ``training_title``.

    Returns
    -------
    matplotlib.figure.Figure
        Axes in pipeline order: ``axes[0]`` Step I, ``axes[1]`` Step II, ``axes[2]`` the
        transformers (when drawn); twin axes follow.
    """
    n = 3 if training else 2
    fig = Figure(figsize=(5.5 * n, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, n)
    ax_disc, ax_embed = axes[0], axes[1]
    _step1_panel(ax_disc, discover_history, graph)
    values = np.asarray(list(embed_loss), dtype=np.float64)
    if values.size:
        plot_loss(values, ax=ax_embed, label="contrastive + PageRank loss (Eq. 15)")
        if np.all(values[np.isfinite(values)] > 0):
            ax_embed.set_yscale("log")
        else:  # a loss that reaches 0 or below: logarithmic away from 0, linear near it
            ax_embed.set_yscale("symlog", linthresh=max(1e-3, float(np.nanmin(np.abs(values[values != 0]), initial=1.0))))
        ax_embed.set_ylabel("loss (log scale)")
    else:
        _no_curve(ax_embed, "no Step II loss recorded")
    ax_embed.set_title("Step II: hyperboloid embedding", fontsize=10)
    if training:
        ax_train = axes[2]
        styles = ["-", "--", ":", "-."]
        drawn = 0
        for i, (name, vals) in enumerate(training.items()):
            v = np.asarray(list(vals), dtype=np.float64)
            if v.size:
                ax_train.plot(np.arange(1, v.size + 1), v, ls=styles[i % len(styles)], lw=1.4, label=name)
                drawn += 1
        if drawn:
            ax_train.set_xlabel("epoch")
            ax_train.set_ylabel("loss")
            ax_train.legend(fontsize=8, title="arm", title_fontsize=8)
            ax_train.grid(alpha=0.3)
        else:
            _no_curve(ax_train, "no training loss recorded")
        ax_train.set_title(training_title, fontsize=10)
    return fig


#: Step I's per-stage records (algorithm "regression") as (stage, count field, label on the axis)
STEP1_COUNTS = (
    ("screen", "n_candidate_pairs", "screened pairs"),
    ("edge test", "n_accepted", "accepted by the\nedge test"),
    ("orientation", "n_oriented", "oriented\n(greedy likelihood)"),
    ("pruning", "n_edges", "re-tested given\nthe DAG parents"),
    ("perturbation shifts", None, None),
    ("split vote", "n_edges", "kept by the\nsplit vote"),
    ("jackknife re-test", "n_edges", "jackknife\nre-test"),
)


def _count_label(rec: Mapping[str, Any]) -> tuple[str, int] | None:
    """``(axis label, count)`` of one Step I stage record, or None for a record without a count."""
    stage = str(rec.get("stage", ""))
    if stage.startswith("ordered re-test") and "n_edges" in rec:
        return stage.replace("ordered re-test", "ordered\nre-test"), int(rec["n_edges"])
    for name, key, label in STEP1_COUNTS:
        if stage == name and key is not None and key in rec:
            return str(label), int(rec[key])
    return None


def _step1_panel(ax: Axes, history: Sequence[Mapping[str, Any]], graph: CausalGraph | None) -> None:
    """Step I's panel of :func:`plot_training_curves` (see there)."""
    gp = dict(graph.params) if graph is not None else {}
    algorithm = gp.get("algorithm") or gp.get("support")  # "support": its name in earlier files
    what = f"{algorithm} algorithm" if algorithm else str(gp.get("method") or "")
    steps = [h for h in history if "h" in h]
    counts = [h for h in history if "h" not in h and _count_label(h) is not None]
    title = f"Step I: causal discovery ({what})" if what else "Step I: causal discovery"
    if steps and all("stage" in h and "val_nll" in h for h in steps):
        # algorithm="learned": validation NLL per epoch, stages side by side, and ρ(A) in stage 2
        x = np.arange(1, len(steps) + 1)
        stage = np.array([int(h["stage"]) for h in steps])
        val = np.array([float(h["val_nll"]) for h in steps])
        names = {1: "stage 1: learned screen", 2: "stage 2: acyclic fit", 3: "stage 3: refit on the DAG"}
        for k in np.unique(stage):
            ax.plot(x[stage == k], val[stage == k], label=f"validation NLL, {names.get(int(k), k)}")
        ax.set_xlabel("epoch (all stages)")
        ax.set_ylabel("held-out Gaussian NLL (nats per row)")
        two = stage == 2
        if two.any():
            ax_h = ax.twinx()
            ax_h.plot(x[two], [max(float(h["h"]), 1e-16) for h, t in zip(steps, two, strict=True) if t],
                      color="0.3", ls="--", label="ρ(A), stage 2")
            ax_h.set_yscale("log")
            ax_h.set_ylabel("spectral radius ρ(A) (log scale)")
            ax_h.legend(loc="upper center")
        ax.legend(loc="upper right", fontsize=8)
    elif steps:
        x = np.arange(1, len(steps) + 1)
        if all("neg_elbo" in h for h in steps):
            ax.plot(x, [float(h["neg_elbo"]) for h in steps], marker="o", label="−ELBO")
        ax.plot(x, [max(float(h["h"]), 1e-16) for h in steps], marker="s", label="h(A)")
        ax.set_yscale("log")
        ax.set_xlabel("outer step (augmented Lagrangian)")
        ax.set_ylabel("value at the end of the outer step (log scale)")
        ax.legend()
    elif counts:
        _step1_counts(ax, counts, graph)
        title = (f"Step I ({what}): closed-form regressions, no loss curve;\n"
                 "pairs and edges left after each stage") if what else "Step I: pairs and edges after each stage"
    elif gp.get("method") == "true-dag":
        _no_curve(ax, "Step I did not run:\nthe graph was given (discover.method=true-dag)")
    else:
        _no_curve(ax, f"Step I ({what}) recorded no loss history" if what else "no Step I history recorded")
    last_h = float(steps[-1]["h"]) if steps else 0.0
    if graph is not None and last_h > 0 and graph.is_dag():
        ax.text(0.02, 0.02, f"the last h = {last_h:.2g} > 0 measures the continuous weights;\n"
                f"the returned graph ({graph.n_edges} edges above the threshold) is acyclic (checked)",
                transform=ax.transAxes, fontsize=7, va="bottom",
                bbox={"boxstyle": "round", "fc": "white", "ec": "0.7", "alpha": 0.9})
    ax.set_title(title, fontsize=10)


def _step1_counts(ax: Axes, records: Sequence[Mapping[str, Any]], graph: CausalGraph | None) -> None:
    """Pairs and edges after each Step I stage: one line per random split of the cells (records
    with ``split``), then the records made once over all splits (the vote, the jackknife re-test)
    in black, and the returned DAG's edge count where it differs from the last of them."""
    per_split: dict[int, list[tuple[str, int]]] = {}
    overall: list[tuple[str, int, Mapping[str, Any]]] = []
    several = any("split" in r for r in records)
    for r in records:
        label, count = _count_label(r)  # type: ignore[misc]
        if several and "split" not in r:
            overall.append((label, count, r))
        else:
            per_split.setdefault(int(r.get("split", 0)), []).append((label, count))
    labels = list(dict.fromkeys([lab for seq in per_split.values() for lab, _ in seq] + [lab for lab, _, _ in overall]))
    where = {lab: i for i, lab in enumerate(labels)}
    for k, seq in per_split.items():
        ax.plot([where[lab] for lab, _ in seq], [max(c, 0.8) for _, c in seq], marker="o", ms=3, lw=1,
                color="0.55" if len(per_split) > 1 else "C0", alpha=0.8,
                label=f"each of the {len(per_split)} random splits of the cells" if len(per_split) > 1 and k == min(per_split)
                else (None if len(per_split) > 1 else "all cells"))
    last = None
    for lab, count, rec in overall:
        ax.plot([where[lab]], [max(count, 0.8)], marker="D", color="k", ls="none")
        note = f"{count:,}" + (f"\n({rec['n_edges_any_split']:,} in any split)" if "n_edges_any_split" in rec else "")
        ax.annotate(note, (where[lab], max(count, 0.8)), xytext=(6, 0), textcoords="offset points", fontsize=7, va="center")
        last = count
    if last is None and per_split:
        last = next(iter(per_split.values()))[-1][1]
    if graph is not None and graph.n_edges != last:
        x = len(labels)
        labels.append("returned DAG")
        ax.plot([x], [max(graph.n_edges, 0.8)], marker="D", color="k", ls="none")
        ax.annotate(f"{graph.n_edges:,}", (x, max(graph.n_edges, 0.8)), xytext=(6, 0), textcoords="offset points",
                    fontsize=7, va="center")
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)), labels, fontsize=7, rotation=30, ha="right")
    ax.set_xlim(-0.4, len(labels) - 0.2)
    ax.set_ylabel("pairs or edges (log scale)")
    ax.grid(alpha=0.3, axis="y")
    if any(ln.get_label() and not ln.get_label().startswith("_") for ln in ax.get_lines()):
        ax.legend(fontsize=7, loc="upper right")


def _no_curve(ax: Axes, text: str) -> None:
    """An empty panel that says why it is empty (no axes with meaningless ticks)."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10, color="0.35")
    ax.set_axis_off()
