"""Baselines for Step I: correlation and partial-correlation graphs, gcastle's and DAGMA's DAG learners.

* :func:`correlation_graph` — the "w/o-CSL" ablation of paper 000 (Table 3): a similarity graph
  of thresholded absolute Pearson correlations. It is symmetric (both m → n and n → m are
  present) and therefore **not a DAG**.
* :func:`gcastle_weights` — gcastle 1.0.4's ``Notears`` (linear, Zheng et al. 2018),
  ``DAG_GNN`` (Yu et al. 2019) and ``NotearsLowRank`` (Fang et al. 2020) with their default
  settings, returning the continuous weight matrix and gcastle's own binary decision.
* :func:`partial_correlation_graph` — partial correlations from sklearn's graphical lasso,
  undirected like the correlation graph (both directions present, **not a DAG**).
* :func:`dagma_weights` — DAGMA (Bello, Aragam & Ravikumar 2022, package ``dagma`` 1.1),
  linear (``DagmaLinear``) and MLP (``DagmaMLP`` + ``DagmaNonlinear``), with the package's
  defaults and the global RNG / default-dtype state restored afterwards.

All take the same standardized ``(N, M)`` matrix as CAPE. Note that gcastle reseeds the global
numpy / torch generators inside ``learn``; these wrappers are for benchmarks and comparisons.
"""

from __future__ import annotations

from cape_pipeline.causal.baselines.methods import (
    DAGMA_METHODS,
    GCASTLE_METHODS,
    PARTIAL_CV_MAX,
    correlation_graph,
    dagma_defaults,
    dagma_weights,
    gcastle_weights,
    partial_correlation_graph,
    partial_correlation_matrix,
)

__all__ = [
    "DAGMA_METHODS",
    "GCASTLE_METHODS",
    "PARTIAL_CV_MAX",
    "correlation_graph",
    "dagma_defaults",
    "dagma_weights",
    "gcastle_weights",
    "partial_correlation_graph",
    "partial_correlation_matrix",
]
