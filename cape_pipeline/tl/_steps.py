"""AnnData-facing tools in the scanpy manner: ``tl.discover``, ``tl.embed``, ``tl.encode``.

Each takes ``adata`` first and keyword-only options, writes its result onto the matching axis
(``varp`` for the feature graph, ``varm`` for per-feature vectors, ``uns["cape"]`` for
parameters), and returns ``None`` — or, with ``copy=True``, a new AnnData.
"""

from __future__ import annotations

import os
from typing import Any

import anndata as ad
import numpy as np
import scipy.sparse as sp

from cape_pipeline import _keys
from cape_pipeline.errors import CapeDataError

__all__ = ["discover", "embed", "encode"]


def _uns(adata: ad.AnnData) -> dict[str, Any]:
    if _keys.UNS not in adata.uns or not isinstance(adata.uns[_keys.UNS], dict):
        adata.uns[_keys.UNS] = {}
    return adata.uns[_keys.UNS]


def _plain(params: dict[str, Any]) -> dict[str, Any]:
    """JSON-like copy of a params dict that h5ad can store (no None, str keys)."""
    out: dict[str, Any] = {}
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, dict):
            out[str(k)] = _plain(v)
        elif isinstance(v, (str, int, float, bool, np.integer, np.floating)):
            out[str(k)] = v
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float)) for x in v):
            out[str(k)] = list(v)
        else:
            out[str(k)] = str(v)
    return out


def _show_progress(progress: bool | None) -> bool:
    """``progress``, or by default as scanpy would speak: in a terminal or notebook, or when
    ``scanpy.settings.verbosity`` is ``info`` (2) or more."""
    if progress is not None:
        return bool(progress)
    from cape_pipeline._progress import interactive

    try:
        import scanpy as sc

        verbose = int(sc.settings.verbosity) >= 2
    except Exception:  # noqa: BLE001 - scanpy missing or an odd verbosity object: stay quiet
        verbose = False
    return verbose or interactive()


def discover(
    adata: ad.AnnData, *, key_added: str = _keys.DAG, copy: bool = False, progress: bool | None = None, **kwargs: Any
) -> ad.AnnData | None:
    """Learn the causal DAG among ``adata``'s features (Step I) and store it.

    Cost: with the default (learned) support above 20 features, about 4 min for 1,000–3,000
    cells × 2,000 genes and 5 min for 20,000 × 2,000 on 2 CPU cores
    (``benchmarks/scale/RESULTS.md``);
    the paper's low-rank model (``support="low-rank"``, the default up to 20 features) runs at
    least 5,000 optimizer steps, about 1–2 min on small data.

    Parameters
    ----------
    adata
        ``(n_obs, n_vars)`` AnnData, preprocessed (see :func:`cape_pipeline.pp.preprocess`).
    key_added
        ``varp`` key for the adjacency.
    copy
        Work on and return a copy.
    progress
        Show progress (a bar in a terminal or notebook, else a line every 30 s); ``None``
        (default): in a terminal or notebook, or when ``scanpy.settings.verbosity >= 2``.
    **kwargs
        Passed to :func:`cape_pipeline.causal.api.discover` (``method``, ``rank``, ``epochs``,
        ``regulators``, …).

    Returns
    -------
    None or AnnData
        Writes ``varp[key_added]`` — (n_vars, n_vars) ``scipy.sparse.csr_matrix`` float64,
        ``[i, j]`` = weight of edge i → j — and ``uns["cape"]["discover"]`` (parameters,
        ``n_edges``, ``n_cycle_edges_dropped``, ``key_added``).

    Raises
    ------
    CapeDataError, CapeConfigError
        As :func:`cape_pipeline.causal.api.discover`.
    """
    from cape_pipeline.causal.api import discover as _discover

    adata = adata.copy() if copy else adata
    graph = _discover(adata, progress=_show_progress(progress), **kwargs)
    adata.varp[key_added] = sp.csr_matrix(graph.adjacency)
    _uns(adata)["discover"] = _plain(
        {**graph.params, "n_edges": graph.n_edges, "n_cycle_edges_dropped": graph.n_cycle_edges_dropped, "key_added": key_added}
    )
    return adata if copy else None


def _graph_from(adata: ad.AnnData, graph_key: str) -> Any:
    from cape_pipeline.causal.graph import CausalGraph

    return CausalGraph.from_anndata(adata, graph_key)


def embed(
    adata: ad.AnnData,
    *,
    graph_key: str = _keys.DAG,
    key_added: str = _keys.HYPERBOLOID,
    copy: bool = False,
    progress: bool | None = None,
    **kwargs: Any,
) -> ad.AnnData | None:
    """Embed the stored feature DAG on the hyperboloid (Step II) and store the points.

    Cost: seconds for a few thousand features with edges (9 s for 2,000 genes of which 738
    have an edge, ``benchmarks/scale``); 91 s at M = 5,000, d = 64 on one core.

    Parameters
    ----------
    adata
        AnnData with a DAG in ``varp[graph_key]`` (from :func:`discover`).
    graph_key
        ``varp`` key of the adjacency.
    key_added
        ``varm`` key for the hyperboloid points.
    copy
        Work on and return a copy.
    progress
        As in :func:`discover`.
    **kwargs
        Passed to :func:`cape_pipeline.hyperbolic.embed` (``dim``, ``max_epochs``, ``geometry``, …).

    Returns
    -------
    None or AnnData
        Writes ``varm[key_added]`` (n_vars, d + 1) float64 Lorentz points,
        ``varm["cape_poincare"]`` (n_vars, d) float64, ``var["cape_pagerank"]`` float64 and
        ``uns["cape"]["embed"]`` (parameters, final loss, the loss per epoch in ``loss_history``
        for :func:`cape_pipeline.pl.plot_loss`).

    Raises
    ------
    CapeDataError
        If ``varp[graph_key]`` is absent.
    """
    from cape_pipeline.hyperbolic import embed as _embed

    adata = adata.copy() if copy else adata
    emb = _embed(_graph_from(adata, graph_key), progress=_show_progress(progress), **kwargs)
    adata.varm[key_added] = np.asarray(emb.hyperboloid, dtype=np.float64)
    adata.varm[_keys.POINCARE] = np.asarray(emb.poincare, dtype=np.float64)
    adata.var[_keys.PAGERANK] = np.asarray(emb.pagerank, dtype=np.float64)
    final = float(emb.loss_history[-1]) if len(emb.loss_history) else float("nan")
    _uns(adata)["embed"] = _plain({**emb.params, "geometry": emb.geometry, "final_loss": final, "key_added": key_added,
                                   "loss_history": [float(v) for v in emb.loss_history]})
    return adata if copy else None


def encode(
    adata: ad.AnnData,
    encodings: Any = None,
    *,
    scale: float | None = None,
    frequencies: str = "single",
    frequency_range: float = 100.0,
    missing: str = "error",
    key_added: str = _keys.ANGLES,
    copy: bool = False,
) -> ad.AnnData | None:
    """Store CAPE rotary angles for ``adata``'s features (Step III, φ = c·e, Sec. 3.5 below Eq. 25).

    Parameters
    ----------
    adata
        ``(n_obs, n_vars)`` AnnData.
    encodings
        ``None``: compute φ from ``varm["cape_poincare"]`` (written by :func:`embed`).
        A :class:`~cape_pipeline.encodings.CapeEncodings` or a path to an encodings directory
        (``cape run ... --out DIR``): align its angles to ``adata.var_names`` by name.
    scale
        c in φ = c·e (radians per unit of Poincaré coordinate); used when ``encodings`` is None.
        ``None`` = :data:`cape_pipeline.encodings.DEFAULT_SCALE` (π/4, the default of
        :class:`~cape_pipeline.encodings.EncodeConfig`).
    frequencies, frequency_range
        The angle map when ``encodings`` is None: ``"single"`` (the paper's φ = c·e) or
        ``"geometric"`` (φ_i = c·ω_i·e_i, ω_i = ``frequency_range`` ^ (i/(d−1))); see
        :class:`~cape_pipeline.encodings.EncodeConfig`.
    missing
        With ``encodings``: ``"error"`` raises on features of ``adata`` that the encodings lack,
        ``"zero"`` gives them angle 0 (no rotation).
    key_added
        ``varm`` key for the angles.
    copy
        Work on and return a copy.

    Returns
    -------
    None or AnnData
        Writes ``varm[key_added]`` (n_vars, d) float64 angles in radians and
        ``uns["cape"]["encode"]`` (scale, d, source, missing policy).

    Raises
    ------
    CapeDataError
        Missing ``varm["cape_poincare"]``; features absent from the encodings with
        ``missing="error"``.
    CapeFileError
        An encodings directory that is missing or invalid.
    """
    adata = adata.copy() if copy else adata
    if encodings is None:
        if _keys.POINCARE not in adata.varm:
            raise CapeDataError(
                f"adata.varm[{_keys.POINCARE!r}] not found: run cape_pipeline.tl.embed(adata) first, "
                "or pass encodings= (a CapeEncodings or an encodings directory)"
            )
        from cape_pipeline.encodings import EncodeConfig
        from cape_pipeline.encodings.config import angles_from_poincare

        cfg = EncodeConfig.from_options(**({} if scale is None else {"scale": scale}), frequencies=frequencies,
                                        frequency_range=frequency_range)
        angles, freq = angles_from_poincare(adata.varm[_keys.POINCARE], cfg)
        info: dict[str, Any] = {"scale": cfg.scale, "source": f"varm['{_keys.POINCARE}']",
                                "frequencies": None if freq is None else freq.tolist()}
    else:
        from cape_pipeline.encodings import load_encodings

        enc = load_encodings(encodings) if isinstance(encodings, (str, os.PathLike)) else encodings
        angles = np.asarray(enc.align(adata.var_names, missing=missing), dtype=np.float64)
        info = {"scale": float(enc.scale), "source": str(encodings) if isinstance(encodings, (str, os.PathLike)) else "CapeEncodings", "missing": missing,
                "frequencies": None if enc.frequencies is None else enc.frequencies.tolist()}
    adata.varm[key_added] = angles
    _uns(adata)["encode"] = _plain({**info, "d": int(angles.shape[1]), "key_added": key_added})
    return adata if copy else None
