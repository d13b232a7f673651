"""What the paper reproductions share: the output directory, Agg figures written atomically, and the
strict-JSON record with the machine and the package versions that produced it."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from cape_pipeline._utils import atomic_path
from cape_pipeline.errors import CapeFileError

__all__ = ["finite_or_none", "jsonable", "machine_info", "new_figure", "output_dir", "save_png", "versions"]


def new_figure(figsize: tuple[float, float]) -> Figure:
    """An empty Agg-backed figure with the constrained layout (no pyplot global state)."""
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_png(fig: Figure, path: Path, dpi: int = 150) -> None:
    """Write ``fig`` as PNG to ``path`` under a temporary name, then rename it into place."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)


def output_dir(out: Any) -> Path:
    """``out`` as a Path; a CapeFileError when it exists and is not a directory."""
    if (out := Path(out)).exists() and not out.is_dir():
        raise CapeFileError(f"{out}: exists and is not a directory (expected an output directory)")
    return out


def finite_or_none(x: float) -> float | None:
    """``x`` as a float, or None when it is NaN or infinite (strict JSON has neither)."""
    return float(x) if math.isfinite(float(x)) else None


def jsonable(obj: Any) -> Any:
    """A strict-JSON copy: numpy scalars → Python numbers, NaN/inf → None, unknown types → str."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return finite_or_none(obj)
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return str(obj)


def machine_info() -> dict[str, Any]:
    """CPU count, torch threads, load average and whether CUDA is available."""
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "cuda": torch.cuda.is_available(),
    }


def versions() -> dict[str, str]:
    """Versions of cape_pipeline and of the libraries that decide the numbers."""
    from importlib.metadata import PackageNotFoundError, version

    from cape_pipeline import __version__

    out = {"cape_pipeline": __version__}
    for pkg in ("torch", "geoopt", "gcastle", "networkx", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:  # pragma: no cover - all are dependencies
            out[pkg] = "not installed"
    return out
