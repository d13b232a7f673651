"""Encodings from an AnnData after :mod:`cape_pipeline.tl` (``CapeEncodings.from_anndata``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cape_pipeline import _keys
from cape_pipeline.errors import CapeDataError


def encodings_from_anndata(cls: Any, adata: Any, *, angles_key: str = _keys.ANGLES, graph_key: str = _keys.DAG) -> Any:
    """A ``cls`` (:class:`~cape_pipeline.encodings.CapeEncodings`) from ``adata``.

    Reads ``varm[angles_key]`` (n_vars, d) angles, ``varm["cape_poincare"]``,
    ``varm["cape_hyperboloid"]``, ``var["cape_pagerank"]``, the DAG in ``varp[graph_key]``
    (optional) and the scale and Step II parameters under ``uns["cape"]``.

    Raises
    ------
    CapeDataError
        A key of the steps is missing: names the ``tl`` function to run first.
    """
    from cape_pipeline.causal.graph import CausalGraph
    from cape_pipeline.encodings.config import DEFAULT_SCALE

    need = [("varm", angles_key, "tl.encode"), ("varm", _keys.POINCARE, "tl.embed"),
            ("varm", _keys.HYPERBOLOID, "tl.embed"), ("var", _keys.PAGERANK, "tl.embed")]
    for where, key, fn in need:
        if key not in getattr(adata, where):
            raise CapeDataError(f"from_anndata: adata.{where}[{key!r}] not found; run cape_pipeline.{fn}(adata) first")
    uns = adata.uns.get(_keys.UNS) if isinstance(adata.uns.get(_keys.UNS), dict) else {}
    graph = CausalGraph.from_anndata(adata, graph_key) if graph_key in adata.varp else None
    emb = dict(uns.get("embed", {}))
    return cls(
        feature_names=np.asarray(adata.var_names, dtype=str),
        angles=np.asarray(adata.varm[angles_key], dtype=np.float64),
        poincare=np.asarray(adata.varm[_keys.POINCARE], dtype=np.float64),
        hyperboloid=np.asarray(adata.varm[_keys.HYPERBOLOID], dtype=np.float64),
        pagerank=np.asarray(adata.var[_keys.PAGERANK], dtype=np.float64),
        scale=float(uns.get("encode", {}).get("scale", DEFAULT_SCALE)),
        frequencies=None if uns.get("encode", {}).get("frequencies") is None
        else np.asarray(uns["encode"]["frequencies"], dtype=np.float64),
        graph=graph,
        params=emb,
        geometry=str(emb.get("geometry", "hyperbolic")),
    )
