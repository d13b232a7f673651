"""What the positional modules know of each feature: :class:`FeaturePositions`.

Most PEs need at most the CAPE angles φ ``(M, d)``. Two peer methods need more of Steps I–II:

* ``pe="ape-tree"`` (paper 002) needs the DAG, reduced to its spanning forest (each feature's
  strongest parent, :func:`cape_pipeline.models.pe.ape_tree.spanning_forest`);
* ``attention="riemann"`` (paper 001) needs each feature's point on the hyperboloid (its
  conformal scale and the locality focusing use hyperbolic distances).

The tasks and backbones take ``angles`` as either a plain ``(M, d)`` array or a
:class:`FeaturePositions` that carries these too, so the task signatures stay as they are. The
pipeline builds one from its encodings with :meth:`FeaturePositions.from_encodings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cape_pipeline.errors import CapeDataError

__all__ = ["FeaturePositions", "as_positions", "require"]


def _finite(name: str, a: np.ndarray) -> np.ndarray:
    if not np.isfinite(a).all():
        raise CapeDataError(f"positions.{name}: contains NaN or inf")
    return a


@dataclass(frozen=True, eq=False)
class FeaturePositions:
    """Per-feature positional inputs, rows aligned to the data's ``var_names``.

    Attributes
    ----------
    angles
        ``(M, d)`` float32 CAPE angles φ in radians (Sec. 3.5 of paper 000, below Eq. 25), or
        ``None``.
    hyperboloid
        ``(M, d+1)`` float64 points on the hyperboloid H^d (Lorentz model, curvature −1; paper
        000 Sec. 3.4), or ``None``. Used by ``attention="riemann"``.
    parent
        ``(M,)`` int64, the DAG's spanning forest: each feature's strongest parent (a row index),
        −1 for a root; or ``None``. Used by ``pe="ape-tree"``.
    parent_weight
        ``(M,)`` float64 |weight| of the kept edge (0 for roots); orders siblings into branches.

    Raises
    ------
    CapeDataError
        Rows that disagree between the arrays, wrong dimensions, NaN/inf, parents out of range.
    """

    angles: np.ndarray | None = None
    hyperboloid: np.ndarray | None = None
    parent: np.ndarray | None = None
    parent_weight: np.ndarray | None = None

    def __post_init__(self) -> None:
        rows = set()
        if self.angles is not None:
            a = _finite("angles", np.asarray(self.angles, dtype=np.float32))
            if a.ndim != 2:
                raise CapeDataError(f"positions.angles: expected (M, d), got shape {a.shape}")
            object.__setattr__(self, "angles", a)
            rows.add(a.shape[0])
        if self.hyperboloid is not None:
            h = _finite("hyperboloid", np.asarray(self.hyperboloid, dtype=np.float64))
            if h.ndim != 2 or h.shape[1] < 2:
                raise CapeDataError(f"positions.hyperboloid: expected (M, d+1) with d ≥ 1, got shape {h.shape}")
            if (h[:, 0] < 1.0 - 1e-6).any():
                raise CapeDataError("positions.hyperboloid: x⁰ < 1, so these are not points on the hyperboloid")
            object.__setattr__(self, "hyperboloid", h)
            rows.add(h.shape[0])
        if (self.parent is None) != (self.parent_weight is None):
            raise CapeDataError("positions: parent and parent_weight come together (both or neither)")
        if self.parent is not None:
            p = np.asarray(self.parent, dtype=np.int64)
            w = _finite("parent_weight", np.asarray(self.parent_weight, dtype=np.float64))
            if p.ndim != 1 or w.shape != p.shape:
                raise CapeDataError(f"positions.parent: expected two (M,) arrays, got {p.shape} and {w.shape}")
            if p.size and (p.min() < -1 or p.max() >= p.size):
                raise CapeDataError(f"positions.parent: values must lie in [-1, {p.size - 1}]")
            object.__setattr__(self, "parent", p)
            object.__setattr__(self, "parent_weight", w)
            rows.add(p.shape[0])
        if len(rows) > 1:
            raise CapeDataError(f"positions: the arrays describe different numbers of features {sorted(rows)}")

    @property
    def n_features(self) -> int | None:
        """M, or ``None`` when every field is empty."""
        for a in (self.angles, self.hyperboloid, self.parent):
            if a is not None:
                return int(a.shape[0])
        return None

    def fingerprint(self) -> str:
        """Content hash of every field (what a shared pretraining is keyed by)."""
        from cape_pipeline._utils import hash_bytes

        parts = []
        for name in ("angles", "hyperboloid", "parent", "parent_weight"):
            a = getattr(self, name)
            parts.append(name.encode() + (b"-" if a is None else np.ascontiguousarray(a).tobytes()))
        return hash_bytes(*parts)

    @classmethod
    def from_encodings(cls, enc: Any, var_names: Any, *, missing: str = "error") -> FeaturePositions:
        """The positions of ``var_names`` from a :class:`~cape_pipeline.encodings.CapeEncodings`.

        ``angles`` come from ``enc.align`` (same ``missing`` rule); a feature without an encoding
        sits at the origin (hyperboloid ``(1, 0, …)``) and is a root of the forest; the forest is
        :func:`~cape_pipeline.models.pe.ape_tree.spanning_forest` of ``enc.graph`` restricted to the
        features present (``None`` when the encodings carry no graph).

        Raises
        ------
        CapeDataError, CapeConfigError
            As ``enc.align``.
        """
        import pandas as pd

        from cape_pipeline.models.pe.ape_tree import spanning_forest

        angles = enc.align(var_names, missing=missing)
        names = pd.Index([str(v) for v in var_names])
        pos = pd.Index([str(v) for v in enc.feature_names]).get_indexer(names)
        present = pos >= 0
        hyp = np.zeros((len(names), enc.hyperboloid.shape[1]))
        hyp[:, 0] = 1.0
        hyp[present] = np.asarray(enc.hyperboloid, dtype=np.float64)[pos[present]]
        parent = weight = None
        graph = getattr(enc, "graph", None)
        if graph is not None:
            sub = graph.adjacency.tocsr()[pos[present]][:, pos[present]]  # data order, present rows only
            p_sub, w_sub = spanning_forest(sub)
            rows = np.flatnonzero(present)
            parent = np.full(len(names), -1, dtype=np.int64)
            weight = np.zeros(len(names))
            parent[rows] = np.where(p_sub >= 0, rows[np.maximum(p_sub, 0)], -1)
            weight[rows] = w_sub
        return cls(angles=angles, hyperboloid=hyp, parent=parent, parent_weight=weight)


def as_positions(angles: Any) -> FeaturePositions | None:
    """``angles`` as :class:`FeaturePositions`: an ``(M, d)`` array or tensor becomes ``angles``
    only, a :class:`FeaturePositions` is returned as is, ``None`` stays ``None``.

    Raises
    ------
    CapeDataError
        As :class:`FeaturePositions` (an array that is not 2-D, or NaN/inf).
    """
    if angles is None or isinstance(angles, FeaturePositions):
        return angles
    import torch

    if isinstance(angles, torch.Tensor):
        angles = angles.detach().cpu().numpy()
    return FeaturePositions(angles=np.asarray(angles))


_NEEDS = {"parent": "the DAG's spanning forest", "hyperboloid": "each feature's hyperboloid point"}


def require(pos: FeaturePositions | None, field: str, user: str, n_features: int) -> FeaturePositions:
    """``pos``, checked to carry ``field`` (``"parent"``: the spanning forest, ``"hyperboloid"``:
    the points) for ``n_features`` features.

    Parameters
    ----------
    user
        What needs it, for the message (``"pe='ape-tree'"``, ``"attention='riemann'"``).

    Raises
    ------
    CapeDataError
        ``pos`` is ``None`` or lacks ``field`` (the message says how to pass it), or describes
        another number of features.
    """
    if pos is None or getattr(pos, field) is None:
        raise CapeDataError(
            f"{user} needs {_NEEDS[field]}: pass FeaturePositions.from_encodings(encodings, var_names) "
            "(encodings with their graph) as angles, not a bare angle array"
        )
    if pos.n_features != n_features:
        raise CapeDataError(f"{user}: positions of {pos.n_features} features, but the data has {n_features}")
    return pos
