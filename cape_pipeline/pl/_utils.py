"""Figure helpers: Agg-backed figures without pyplot's global state."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

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
