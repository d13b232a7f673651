"""Figure helpers: Agg-backed figures without pyplot's global state."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from cape_pipeline._utils import atomic_path


def new_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    """Return ``(figure, axes)``: ``ax``'s figure, or a fresh Agg figure with one axes."""
    if ax is not None:
        return ax.figure, ax  # type: ignore[return-value]
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def maybe_save(fig: Figure, save: str | os.PathLike[str] | None, dpi: int = 150) -> None:
    """Write ``fig`` as PNG to ``save`` atomically (no-op for ``None``)."""
    if save is None:
        return
    path = Path(save)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)


def as_embedding_arrays(obj: Any) -> tuple[Any, Any, Any, Any]:
    """``(poincare, pagerank, feature_names, graph)`` from CapeEncodings or HyperbolicEmbedding."""
    try:
        return obj.poincare, obj.pagerank, obj.feature_names, getattr(obj, "graph", None)
    except AttributeError as exc:
        raise TypeError(
            f"expected CapeEncodings or HyperbolicEmbedding, got {type(obj).__name__}"
        ) from exc


def place_labels(
    ax: Axes, points: Mapping[str, Sequence[float]], order: Sequence[str], *, fontsize: float = 8,
    bbox: dict[str, Any] | None = None, gap_px: float = 2.0, max_slots: int = 40,
) -> list[Text]:
    """Name points so that no two label boxes intersect.

    Each name of ``order`` (most important first) is centred on its point or, when its box would
    intersect a label placed before it, in the nearest free slot above or below (steps of one
    label height plus ``gap_px`` pixels, alternating up and down, at most ``max_slots``), with a
    thin grey leader line to its point. The figure is drawn once first, so its layout
    (constrained layout, colorbars, titles) is final, and its layout engine is then switched off so
    the positions stay where they were checked.

    Parameters
    ----------
    ax
        Axes whose data coordinates ``points`` are in.
    points
        Name → ``(x, y)`` in data coordinates.
    order
        The names to draw, in priority order (each must be a key of ``points``).
    fontsize, bbox
        Passed to :meth:`matplotlib.axes.Axes.text`.

    Returns
    -------
    list of matplotlib.text.Text
        The labels, in ``order``. Raises ``KeyError`` for a name without a point.
    """
    fig = ax.figure
    fig.canvas.draw()
    if fig.get_layout_engine() is not None:
        fig.set_layout_engine("none")
    ax.set_autoscale_on(False)  # the leader lines must not move the limits the labels were placed in
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    to_data = ax.transData.inverted()
    placed, texts = [], []
    for name in order:
        x, y = (float(v) for v in points[name])
        here = ax.transData.transform((x, y))
        t = ax.text(x, y, name, ha="center", va="center", fontsize=fontsize, bbox=bbox, zorder=5)
        box = t.get_window_extent(renderer)
        step = box.height + gap_px
        dy = 0.0
        for k in range(2 * max_slots + 1):
            dy = ((k + 1) // 2) * step * (1 if k % 2 else -1)
            if not any(box.translated(0, dy).overlaps(b) for b in placed):
                break
        if dy:
            t.set_position(to_data.transform(here + np.array([0.0, dy])))
            tx, ty = t.get_position()
            ax.plot([x, tx], [y, ty], color="0.5", lw=0.5, zorder=4)
        placed.append(box.translated(0, dy).padded(gap_px / 2))
        texts.append(t)
    return texts
