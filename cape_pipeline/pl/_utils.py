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
    """``(poincare, pagerank, feature_names, graph)`` from CapeEncodings, HyperbolicEmbedding or
    an AnnData after :func:`cape_pipeline.tl.embed` (``varm["cape_poincare"]``,
    ``var["cape_pagerank"]``, and ``varp["cape_dag"]`` when present).

    Raises
    ------
    TypeError
        Another object, or an AnnData without ``varm["cape_poincare"]``/``var["cape_pagerank"]``.
    """
    import anndata as ad

    if isinstance(obj, ad.AnnData):
        if "cape_poincare" not in obj.varm or "cape_pagerank" not in obj.var:
            raise TypeError(
                "the AnnData has no varm['cape_poincare'] / var['cape_pagerank']: run cape_pipeline.tl.embed(adata) first"
            )
        from cape_pipeline.causal.graph import CausalGraph

        graph = CausalGraph.from_anndata(obj) if "cape_dag" in obj.varp else None
        return (np.asarray(obj.varm["cape_poincare"]), obj.var["cape_pagerank"].to_numpy(),
                obj.var_names.to_numpy(), graph)
    try:
        return obj.poincare, obj.pagerank, obj.feature_names, getattr(obj, "graph", None)
    except AttributeError as exc:
        raise TypeError(
            f"expected CapeEncodings or HyperbolicEmbedding, got {type(obj).__name__}"
        ) from exc


def _freeze_layout(ax: Axes) -> tuple[Any, Any]:
    """Draw the figure once so its layout (constrained layout, colorbars, titles) is final, then
    switch its layout engine and ``ax``'s autoscaling off, so that labels placed now (and their
    leader lines) stay where they were checked. Returns the renderer and display → data."""
    fig = ax.figure
    fig.canvas.draw()
    if fig.get_layout_engine() is not None:
        fig.set_layout_engine("none")
    ax.set_autoscale_on(False)
    return fig.canvas.get_renderer(), ax.transData.inverted()  # type: ignore[attr-defined]


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
    renderer, to_data = _freeze_layout(ax)
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


def _marker_boxes(ax: Axes, collection: Any, pad_px: float = 1.0) -> list[Any]:
    """Display-space bounding boxes of the markers of a scatter ``collection`` (one per point:
    its centre ± the marker radius, ``sqrt(size) / 2`` points, plus ``pad_px`` pixels)."""
    from matplotlib.transforms import Bbox

    offsets = np.asarray(collection.get_offsets(), dtype=np.float64)
    if not offsets.size:
        return []
    centres = ax.transData.transform(offsets)
    sizes = np.broadcast_to(np.asarray(collection.get_sizes(), dtype=np.float64), (len(offsets),))
    radii = np.sqrt(sizes) / 2 * ax.figure.dpi / 72 + pad_px
    return [Bbox.from_extents(x - r, y - r, x + r, y + r) for (x, y), r in zip(centres, radii, strict=True)]


def place_hub_labels(
    ax: Axes, points: Mapping[str, Sequence[float]], order: Sequence[str], nodes: Any, *, fontsize: float = 8,
    bbox: dict[str, Any] | None = None, gap_px: float = 2.0, iter_lim: int = 300,
) -> list[Text]:
    """Name some points beside them, never over a marker of ``nodes`` nor over another label.

    adjustText (:func:`adjustText.adjust_text`, deterministic with ``iter_lim``) first moves the
    labels, started just above their points, away from each other and from the markers. A label
    whose box still touches a marker, another label or the edge of the axes then takes the first
    free spot on rings of growing radius around its point (16 directions, from straight up). A
    grey leader line joins each label to its point. The figure is drawn once first so its layout
    is final, and its layout engine is then switched off so the positions stay where they were
    checked.

    Parameters
    ----------
    ax
        Axes whose data coordinates ``points`` are in.
    points
        Name → ``(x, y)`` in data coordinates.
    order
        The names to draw, in priority order (an earlier label keeps its spot).
    nodes
        The markers to keep clear of (a scatter ``PathCollection``, e.g. from
        ``networkx.draw_networkx_nodes``).
    fontsize, bbox
        Passed to :meth:`matplotlib.axes.Axes.text`.
    gap_px
        Margin in pixels kept around each label box.
    iter_lim
        Iterations of adjustText.

    Returns
    -------
    list of matplotlib.text.Text
        The labels, in ``order``.
    """
    from adjustText import adjust_text
    from matplotlib.transforms import Bbox

    fig = ax.figure
    renderer, to_data = _freeze_layout(ax)
    node_boxes = _marker_boxes(ax, nodes)
    radius = max((b.width / 2 for b in node_boxes), default=3.0)
    anchors = {name: ax.transData.transform([float(v) for v in points[name]]) for name in order}
    texts = []
    for name in order:
        h = fontsize * fig.dpi / 72
        start = to_data.transform(anchors[name] + np.array([0.0, radius + h]))
        texts.append(ax.text(start[0], start[1], name, ha="center", va="center", fontsize=fontsize, bbox=bbox,
                             zorder=5))
    if texts:
        adjust_text(texts, objects=nodes, ax=ax, target_x=[points[n][0] for n in order],
                    target_y=[points[n][1] for n in order], expand=(1.15, 1.4), ensure_inside_axes=True,
                    iter_lim=iter_lim)
    frame = ax.get_window_extent(renderer)
    placed: list[Any] = []

    def free(box: Any) -> bool:
        inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
        return inside and not any(box.overlaps(b) for b in node_boxes) and not any(box.overlaps(b) for b in placed)

    angles = np.pi / 2 - 2 * np.pi * np.arange(16) / 16
    for name, t in zip(order, texts, strict=True):
        box = t.get_window_extent(renderer).padded(gap_px)
        if not free(box):
            here = anchors[name]
            step = box.height / 2
            for k in range(1, 121):
                r = radius + k * step
                hit = None
                for a in angles:
                    centre = here + r * np.array([np.cos(a), np.sin(a)])
                    cand = Bbox.from_bounds(centre[0] - box.width / 2, centre[1] - box.height / 2, box.width, box.height)
                    if free(cand):
                        hit = centre
                        break
                if hit is not None:
                    t.set_position(to_data.transform(hit))
                    t.set_ha("center")
                    t.set_va("center")
                    box = t.get_window_extent(renderer).padded(gap_px)
                    break
        placed.append(box)
        # the leader line runs from the marker's rim to the label box's edge
        here, there = anchors[name], np.array([(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2])
        gap = there - here
        dist = float(np.hypot(*gap))
        if dist > 0:
            unit = gap / dist
            cut = min(box.width / 2 / max(abs(unit[0]), 1e-9), box.height / 2 / max(abs(unit[1]), 1e-9))
            if dist > radius + cut:
                ends = to_data.transform(np.stack([here + radius * unit, there - cut * unit]))
                ax.plot(ends[:, 0], ends[:, 1], color="0.45", lw=0.6, zorder=4.5)
    return texts
