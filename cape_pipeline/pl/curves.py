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
    embed_loss: Sequence[float], discover_history: Sequence[Mapping[str, Any]], *, graph: CausalGraph | None = None
) -> Figure:
    """Two panels: Step II loss per epoch (Eq. 15), and Step I −ELBO and h(A) at the end of each
    augmented-Lagrangian outer step (Eqs. 8 and 10, log scale). A panel without data says why
    (a given graph has no Step I history).

    Parameters
    ----------
    embed_loss
        Loss per epoch of :func:`cape_pipeline.hyperbolic.embed` (``loss_history``).
    discover_history
        ``CausalGraph.history`` of Step I: one mapping per outer step with ``h`` (and
        ``neg_elbo`` for method ``cape``), or per epoch with ``stage``, ``val_nll`` and ``h``
        (support ``"learned"``: validation NLL per stage and ρ(A) on a second axis).
    graph
        The returned DAG: when the acyclicity measure ends above 0 but this thresholded graph
        is acyclic, the Step I panel says so (h measures the continuous weights, not the
        returned graph).
    """
    fig = Figure(figsize=(11, 4), layout="constrained")
    FigureCanvasAgg(fig)
    ax_embed, ax_disc = fig.subplots(1, 2)
    if len(embed_loss):
        plot_loss(list(embed_loss), ax=ax_embed, label="contrastive + PageRank loss (Eq. 15)")
    else:
        _no_curve(ax_embed, "no Step II loss recorded")
    ax_embed.set_title("Step II: hyperboloid embedding")
    steps = [h for h in discover_history if "h" in h]
    if steps and all("stage" in h and "val_nll" in h for h in steps):
        # support="learned": validation NLL per epoch, stages side by side, and ρ(A) in stage 2
        x = np.arange(1, len(steps) + 1)
        stage = np.array([int(h["stage"]) for h in steps])
        val = np.array([float(h["val_nll"]) for h in steps])
        names = {1: "stage 1: learned screen", 2: "stage 2: acyclic fit", 3: "stage 3: refit on the DAG"}
        for k in np.unique(stage):
            ax_disc.plot(x[stage == k], val[stage == k], label=f"validation NLL, {names.get(int(k), k)}")
        ax_disc.set_xlabel("epoch (all stages)")
        ax_disc.set_ylabel("held-out Gaussian NLL (nats per row)")
        two = stage == 2
        if two.any():
            ax_h = ax_disc.twinx()
            ax_h.plot(x[two], [max(float(h["h"]), 1e-16) for h, t in zip(steps, two, strict=True) if t],
                      color="0.3", ls="--", label="ρ(A), stage 2")
            ax_h.set_yscale("log")
            ax_h.set_ylabel("spectral radius ρ(A) (log scale)")
            ax_h.legend(loc="upper center")
        ax_disc.legend(loc="upper right", fontsize=8)
    elif steps:
        x = np.arange(1, len(steps) + 1)
        if all("neg_elbo" in h for h in steps):
            ax_disc.plot(x, [float(h["neg_elbo"]) for h in steps], marker="o", label="−ELBO")
        ax_disc.plot(x, [max(float(h["h"]), 1e-16) for h in steps], marker="s", label="h(A)")
        ax_disc.set_yscale("log")
        ax_disc.set_xlabel("outer step (augmented Lagrangian)")
        ax_disc.set_ylabel("value at the end of the outer step (log scale)")
        ax_disc.legend()
    else:
        _no_curve(ax_disc, "no Step I history:\nthe graph was given (discover.method=true-dag)\nor came from a baseline")
    last_h = float(steps[-1]["h"]) if steps else 0.0
    if graph is not None and last_h > 0 and graph.is_dag():
        ax_disc.text(0.02, 0.02, f"the last h = {last_h:.2g} > 0 measures the continuous weights;\n"
                     f"the returned graph ({graph.n_edges} edges above the threshold) is acyclic (checked)",
                     transform=ax_disc.transAxes, fontsize=7, va="bottom",
                     bbox={"boxstyle": "round", "fc": "white", "ec": "0.7", "alpha": 0.9})
    ax_disc.set_title("Step I: causal discovery")
    return fig


def _no_curve(ax: Axes, text: str) -> None:
    """An empty panel that says why it is empty (no axes with meaningless ticks)."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10, color="0.35")
    ax.set_axis_off()
