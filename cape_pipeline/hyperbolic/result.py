"""The result of Step II, :class:`HyperbolicEmbedding`, and its on-disk form.

Directory layout written by :meth:`HyperbolicEmbedding.save` (the pipeline's ``embed`` stage)::

    embedding.npz    hyperboloid (M, d+1), poincare (M, d), pagerank (M,), feature_names (M,) str
                     [, euclidean (M, d) for geometry="euclidean"], float64
    embedding.json   params, geometry, loss_history
    dag.parquet      the embedded CausalGraph, one row per edge (CausalGraph.write_parquet)
    edge_scores.parquet  every pair Step I scored, with in_dag (only when it scored pairs)
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cape_pipeline._utils import atomic_path
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.hyperbolic import lorentz
from cape_pipeline.hyperbolic.loss import _euclid_pairwise

__all__ = ["HyperbolicEmbedding", "EMBEDDING_ARRAYS_FILE", "EMBEDDING_META_FILE", "DAG_FILE"]

EMBEDDING_ARRAYS_FILE = "embedding.npz"
EMBEDDING_META_FILE = "embedding.json"
DAG_FILE = "dag.parquet"


@dataclass
class HyperbolicEmbedding:
    """Positions of M features on H^d, the output of :func:`~cape_pipeline.hyperbolic.embed`.

    Attributes
    ----------
    hyperboloid
        ``(M, d+1)`` float64; points p with ⟨p, p⟩_l = −1, p⁰ > 0 (Eq. 11). For
        ``geometry="euclidean"``: ``expmap0`` of the Euclidean points (each x ∈ R^d read as the
        tangent vector (0, x) at the origin, norm clipped to :data:`~cape_pipeline.hyperbolic.embed.EUCLIDEAN_MAX_NORM`), so that
        direction and norm order are kept and ``d_l(p, p_o) = ‖x‖``.
    poincare
        ``(M, d)`` float64, e = p̃ / (p⁰ + 1) (Eq. A.22), ‖e‖ < 1. For the Euclidean ablation this
        is ``tanh(‖x‖/2) · x/‖x‖``.
    pagerank
        ``(M,)`` float64, π of Eq. 18 (sums to 1; roots collect mass).
    feature_names
        ``(M,)`` object array of str, row order of every array.
    loss_history
        Mean training loss per epoch (Eq. 15), one float per epoch run.
    params
        Every argument of :func:`~cape_pipeline.hyperbolic.embed` plus derived values (``steps_per_epoch``, ``epochs_run``,
        ``converged``, ``n_isolated``, ``n_positive_pairs``, ``runtime_s``) and ``quality``
        (:func:`cape_pipeline.hyperbolic.quality.embedding_quality`).
    geometry
        ``"hyperbolic"`` or ``"euclidean"``.
    graph
        The :class:`~cape_pipeline.causal.graph.CausalGraph` that was embedded.
    euclidean
        ``(M, d)`` float64 raw Euclidean points for ``geometry="euclidean"``, else ``None``.
    """

    hyperboloid: np.ndarray
    poincare: np.ndarray
    pagerank: np.ndarray
    feature_names: np.ndarray
    loss_history: list[float] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    geometry: str = "hyperbolic"
    graph: CausalGraph | None = None
    euclidean: np.ndarray | None = None

    @property
    def dim(self) -> int:
        """Dimension d of the manifold (number of Poincaré coordinates)."""
        return int(self.poincare.shape[1])

    @property
    def n_features(self) -> int:
        """Number of embedded features M."""
        return int(self.poincare.shape[0])

    def distances(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Geodesic distances from ``rows`` (default: all) to every point, ``(len(rows), M)``.

        Hyperbolic: ``arcosh(−⟨p, q⟩_l) / √κ`` for curvature −κ (``params["curvature"]``, 1 when
        absent), the distance the loss was trained on.
        For the Euclidean ablation this returns Euclidean distances between the raw points.
        Dense in M columns: call with a subset of rows for large M.
        """
        idx = np.arange(self.n_features) if rows is None else np.asarray(rows)
        if self.geometry == "euclidean" and self.euclidean is not None:
            x = torch.from_numpy(self.euclidean)
            return _euclid_pairwise(x[idx], x).numpy()
        p = torch.from_numpy(self.hyperboloid)
        kappa = float(self.params.get("curvature") or 1.0)
        return (lorentz.pairwise_dist(p[idx], p) / math.sqrt(kappa)).numpy()

    def __repr__(self) -> str:
        return (
            f"HyperbolicEmbedding(n_features={self.n_features}, dim={self.dim}, "
            f"geometry={self.geometry!r}, epochs={len(self.loss_history)})"
        )

    # ------------------------------------------------------------------ files
    def save(self, dir: str | os.PathLike[str]) -> Path:
        """Write ``embedding.npz``, ``embedding.json`` and ``dag.parquet`` into ``dir``.

        Each file is written atomically (``dir`` is created if needed); ``dag.parquet`` (and
        ``edge_scores.parquet`` beside it, :meth:`CausalGraph.write_parquet`) only when
        :attr:`graph` is set.

        Parameters
        ----------
        dir
            Target directory.

        Returns
        -------
        pathlib.Path
            ``dir``.
        """
        d = Path(dir)
        d.mkdir(parents=True, exist_ok=True)
        arrays = {
            "hyperboloid": np.asarray(self.hyperboloid, dtype=np.float64),
            "poincare": np.asarray(self.poincare, dtype=np.float64),
            "pagerank": np.asarray(self.pagerank, dtype=np.float64),
            "feature_names": np.asarray(self.feature_names).astype(str),
        }
        if self.euclidean is not None:
            arrays["euclidean"] = np.asarray(self.euclidean, dtype=np.float64)
        with atomic_path(d / EMBEDDING_ARRAYS_FILE) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
        meta = {
            "params": self.params,
            "geometry": self.geometry,
            "loss_history": list(map(float, self.loss_history)),
        }
        with atomic_path(d / EMBEDDING_META_FILE) as tmp:
            tmp.write_text(json.dumps(meta, indent=1, default=str))
        if self.graph is not None:
            self.graph.write_parquet(d / DAG_FILE)
        return d

    @classmethod
    def load(cls, dir: str | os.PathLike[str]) -> HyperbolicEmbedding:
        """Read an embedding written by :meth:`save`.

        Parameters
        ----------
        dir
            Directory holding ``embedding.npz``, ``embedding.json`` and (optionally) ``dag.parquet``.

        Returns
        -------
        HyperbolicEmbedding
            With ``graph`` read from ``dag.parquet`` (``None`` when absent).
        """
        d = Path(dir)
        with np.load(d / EMBEDDING_ARRAYS_FILE, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads((d / EMBEDDING_META_FILE).read_text())
        dag = d / DAG_FILE
        return cls(
            hyperboloid=arrays["hyperboloid"],
            poincare=arrays["poincare"],
            pagerank=arrays["pagerank"],
            feature_names=arrays["feature_names"].astype(object),
            loss_history=meta["loss_history"],
            params=meta["params"],
            geometry=meta["geometry"],
            graph=CausalGraph.read_parquet(dag) if dag.exists() else None,
            euclidean=arrays.get("euclidean"),
        )
