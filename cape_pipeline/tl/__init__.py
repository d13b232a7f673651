"""The scanpy-style tools: ``tl.discover``, ``tl.embed``, ``tl.encode`` on an AnnData, writing
their results under the keys of :mod:`cape_pipeline._keys` (``varp["cape_dag"]``,
``varm["cape_hyperboloid"]``, ``varm["cape_poincare"]``, ``var["cape_pagerank"]``,
``varm["cape_angles"]``, ``uns["cape"]``). The functions live in :mod:`._steps`."""

from __future__ import annotations

from cape_pipeline.tl._steps import discover, embed, encode

__all__ = ["discover", "embed", "encode"]
