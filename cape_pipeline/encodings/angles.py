"""Step III: hyperboloid points → Poincaré ball → rotary angles, and their export format.

Paper 000, Sec. 3.5 and App. A.2.3: e = p̃ / (p⁰ + 1) (Eq. A.22) and φ = c · e with c = π/4
(Sec. 3.5, the map stated below Eq. 25), one angle (radians) per pair of the D model dimensions, so d = D/2.

The result, :class:`~cape_pipeline.encodings.CapeEncodings`, and its export directory live in
:mod:`cape_pipeline.encodings.export` (re-exported here).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.encodings._checks import _validate_arrays, poincare_from_hyperboloid
from cape_pipeline.encodings.config import DEFAULT_SCALE, EncodeConfig, angles_from_poincare
from cape_pipeline.encodings.export import (
    DAG_FILE,
    ENCODINGS_FILE,
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST_FILE,
    CapeEncodings,
    load_encodings,
)
from cape_pipeline.errors import CapeDataError

__all__ = [
    "CapeEncodings",
    "EncodeConfig",
    "encode",
    "load_encodings",
    "DEFAULT_SCALE",
    "ENCODINGS_FILE",
    "DAG_FILE",
    "MANIFEST_FILE",
    "FORMAT_NAME",
    "FORMAT_VERSION",
]


def encode(
    embedding: Any,
    config: EncodeConfig | None = None,
    *,
    graph: CausalGraph | None = None,
    **options: Any,
) -> CapeEncodings:
    """Turn a hyperboloid embedding into rotary angles φ = scale · e (paper 000, Eqs. 25, A.22),
    or φ_i = scale · ω_i · e_i with ``frequencies="geometric"`` (:class:`EncodeConfig`).

    Parameters
    ----------
    embedding
        A :class:`~cape_pipeline.hyperbolic.HyperbolicEmbedding` (``hyperboloid`` (M, d+1),
        ``poincare`` (M, d), ``pagerank`` (M,), ``feature_names``; ``graph`` and ``params``
        are used when present). ``poincare`` is recomputed from ``hyperboloid`` (Eq. A.22).
    config
        The options (:class:`~cape_pipeline.encodings.EncodeConfig`, whose ``Attributes``
        document each one); ``None`` = the defaults.
    graph
        The causal DAG; defaults to ``embedding.graph``. Its feature names must match.
    **options
        Fields of :class:`~cape_pipeline.encodings.EncodeConfig` (``scale``, ``frequencies``,
        ``frequency_range``), replacing those of ``config``.

    Returns
    -------
    CapeEncodings
        ``angles`` (M, d) float64 radians, ``poincare`` (M, d), ``hyperboloid`` (M, d+1),
        ``pagerank`` (M,), ``feature_names``, ``graph``, ``frequencies`` (d,) or ``None``.

    Raises
    ------
    CapeConfigError
        If an option is unknown or invalid (see :class:`EncodeConfig`).
    CapeDataError
        If the arrays are inconsistent, not finite, off the hyperboloid, or the graph's
        feature names differ from the embedding's.
    """
    cfg = EncodeConfig.from_options(config, **options)
    try:
        p = np.asarray(embedding.hyperboloid, dtype=np.float64)
        pr = np.asarray(embedding.pagerank, dtype=np.float64)
        names = np.asarray([str(n) for n in embedding.feature_names], dtype=object)
    except AttributeError as exc:
        raise TypeError(
            "embedding: expected a HyperbolicEmbedding (hyperboloid, pagerank, feature_names)"
        ) from exc
    if p.ndim != 2 or p.shape[1] < 2:
        raise CapeDataError(f"hyperboloid: expected shape (M, d+1) with d ≥ 1, got {p.shape}")
    if graph is None:
        graph = getattr(embedding, "graph", None)
    if graph is not None:
        if not isinstance(graph, CausalGraph):
            raise TypeError(f"graph: expected a CausalGraph, got {type(graph).__name__}")
        if graph.feature_names.astype(str).tolist() != names.astype(str).tolist():
            raise CapeDataError("graph: feature names (or their order) differ from the embedding's")
    e = poincare_from_hyperboloid(p)
    angles, freq = angles_from_poincare(e, cfg)
    enc = CapeEncodings(
        feature_names=names,
        angles=angles,
        poincare=e,
        hyperboloid=p.copy(),
        pagerank=pr.copy(),
        scale=float(cfg.scale),
        frequencies=freq,
        graph=graph,
        params=dict(getattr(embedding, "params", {}) or {}),
        geometry=str(getattr(embedding, "geometry", "hyperbolic")),
    )
    _validate_arrays(enc, where="embedding")
    return enc


