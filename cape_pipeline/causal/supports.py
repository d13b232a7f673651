"""Supports of Step I (how ``A`` is parameterised for method ``"cape"``), the options each one
takes, and the rule of ``support="auto"`` (:func:`resolve_support`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cape_pipeline.causal.sem import POSTERIORS
from cape_pipeline.errors import CapeConfigError

__all__ = [
    "AUTO_LOW_RANK_MAX", "COVARIATES", "LEARNED_MIN_OBS", "MEASUREMENT_ERROR", "N_SPLITS", "SUPPORTS",
    "THINNING_MIN_OBS",
    "UNUSED_BY_SUPPORT", "SupportFit", "SupportInputs", "fit_support", "resolve_support",
]

#: how A is parameterised for method "cape": chosen from the data ("auto"), the paper's low rank,
#: screened sparse, per-feature MLPs on a learned screen, or covariate-adjusted neighbourhood
#: regressions with a likelihood-ratio edge test (single-cell data)
SUPPORTS = ("auto", "low-rank", "screened", "learned", "regression")
#: cell-level covariates of Step I: "auto" (single-cell data: the library size where preprocess
#: recorded it, no cell states; other data: none) or an explicit choice. Cell states are not in
#: "auto": on counts driven by a regulatory graph they take the regulators' variation between
#: states with them and lower the recall, but they are the guard where hidden programs drive many
#: genes (on counts with gene modules and no graph they remove most of the false edges);
#: measured in benchmarks/discover/counts/RESULTS.md
COVARIATES = ("auto", "none", "states", "library", "states+library")
#: measurement error of support "regression": "auto" (the counting-noise correction on counts from
#: THINNING_MIN_OBS cells), "none" or "thinning" (each gene's counting-noise share from binomial
#: thinning, errors-in-variables regressions)
MEASUREMENT_ERROR = ("auto", "none", "thinning")
#: measurement_error="auto" corrects for counting noise from this many cells: on fewer cells the
#: correction costs precision at equal F1 on both count generators, from this many on it raises
#: F1 (benchmarks/discover/counts/RESULTS.md)
THINNING_MIN_OBS = 3000
#: order_rounds="auto" runs this many ordered re-tests wherever interventions apply (a third round
#: changes little; benchmarks/discover/interventional)
ORDER_ROUNDS = 2
#: n_splits of support "regression" (the default): random splits of the cells the whole fit is
#: repeated on, an edge kept where at least half of them keep it (regression.split_vote.vote). Measured
#: against one split on the same data and seeds (benchmarks/discover/interventional and
#: benchmarks/discover/counts, RESULTS.md); the time is n_splits times one fit's
N_SPLITS = 8
#: support="auto" takes the paper's low rank up to this many features and "learned" above
#: (measured on the suite: benchmarks/discover/learned/RESULTS.md)
AUTO_LOW_RANK_MAX = 20
#: the learned support needs at least this many rows (20 % are held out); "auto" below → low rank
LEARNED_MIN_OBS = 50
#: cape options that support "screened" does not use (it has its own exact ‖A‖₁ and init)
_NOT_SCREENED = ("l1", "l1_exact_max", "l1_pairs", "init_scale", "h_tol")
#: cape options that support "learned" does not use (per-feature MLPs, SDCD-style schedule)
_NOT_LEARNED = (*_NOT_SCREENED, "rank", "max_outer", "rho_init", "rho_max", "min_steps", "weight_decay",
                "lambda_sparse", "dag_threshold")
#: options of support "regression" only
_REGRESSION_ONLY = ("min_effect", "fdr", "measurement_error", "interventions", "order_rounds", "n_splits",
                    "regulators", "workers")
#: cape options that support "regression" does not use (closed-form regressions, a statistical edge test)
_NOT_REGRESSION = (*_NOT_LEARNED, "threshold", "epochs", "batch_size", "lr", "hidden", "power_iters")
#: per sparse support: the options it refuses, the posteriors it accepts, and why (for the error)
UNUSED_BY_SUPPORT = {
    "screened": ((*_NOT_SCREENED, *_REGRESSION_ONLY), (None, "mean"),
                 "exact sparse ‖A‖₁, spectral acyclicity, posterior 'mean'"),
    "learned": ((*_NOT_LEARNED, *_REGRESSION_ONLY), (None,), "per-feature MLPs, spectral acyclicity, early stopping"),
    "low-rank": (_REGRESSION_ONLY, (None, *POSTERIORS), "the paper's low-rank NOTEARS-VAE"),
    "regression": (_NOT_REGRESSION, (None,),
                   "neighbourhood regressions, a minimum-effect likelihood-ratio test, a greedy likelihood DAG"),
}


def resolve_support(support: str, n_features: int, n_obs: int | None = None, *, single_cell: bool = False) -> str:
    """The support used for ``n_features`` features: ``support`` itself unless it is ``"auto"``.

    ``"auto"`` → ``"low-rank"`` (the paper's ``A = U Vᵀ``) for M ≤ :data:`AUTO_LOW_RANK_MAX`
    or fewer than :data:`LEARNED_MIN_OBS` rows (the learned support holds out 20 % of the rows
    for early stopping); else ``"regression"`` for single-cell data (``single_cell``) and
    ``"learned"`` otherwise. Measured on the Step I suite
    (``benchmarks/discover/learned/RESULTS.md``): the learned support has the best F1 from
    M = 50 up on continuous data (synth50, scale-free and ER graphs at M = 200–2,000, SDCD's
    generator), the low rank on the 10- and 11-node sets (synth10, Sachs); on UMI counts
    (``benchmarks/discover/counts/RESULTS.md``, two generators) the regression support keeps
    more true edges as cells are added where the learned one keeps fewer.

    Raises
    ------
    CapeConfigError
        Unknown ``support``.
    """
    if support not in SUPPORTS:
        raise CapeConfigError(f"support: expected one of {', '.join(SUPPORTS)}, got {support!r}")
    if support != "auto":
        return support
    if int(n_features) <= AUTO_LOW_RANK_MAX or (n_obs is not None and int(n_obs) < LEARNED_MIN_OBS):
        return "low-rank"
    return "regression" if single_cell else "learned"


@dataclass
class SupportInputs:
    """What :func:`fit_support` passes every support beside the data and the config.

    Attributes
    ----------
    names
        ``(M,)`` feature names.
    rank, epochs
        The effective rank and epochs (low-rank and screened supports).
    max_per_row
        Keep at most this many out-edges per feature (None: all).
    dense_scores
        Return the ``(M, M)`` score matrix (small M only).
    progress
        Show progress.
    reliability, intervened, label_targets
        Regression support: each feature's reliability on counts, the ``(N, M)`` perturbation
        mask and the ``(N,)`` number of targets each cell's label names
        (:mod:`cape_pipeline.causal.interventions`), or None.
    regulators
        Regression support: ``(R,)`` int64 sorted indices of the features that may be parents
        (:func:`~cape_pipeline.causal.regulators.resolve_regulators`), or None (every feature).
    unused
        Options of the config that the support leaves unused (recorded).
    """

    names: Any
    rank: int
    epochs: int
    max_per_row: int | None
    dense_scores: bool
    progress: bool = False
    reliability: Any = None
    intervened: Any = None
    label_targets: Any = None
    regulators: Any = None
    unused: list[str] = field(default_factory=list)


@dataclass
class SupportFit:
    """What every support's ``fit_support`` returns: the DAG and what :func:`discover` records.

    Attributes
    ----------
    adjacency
        ``(M, M)`` sparse csr float64 DAG.
    history
        Per-epoch or per-stage records.
    scores
        ``(M, M)`` float64 continuous edge scores (for AUPRC), or None.
    n_cycle_edges_dropped
        Edges removed to make the graph acyclic.
    edge_scores
        Every screened pair with its statistics (``pandas.DataFrame``), or None.
    params
        Support-specific entries of the graph's ``params``.
    """

    adjacency: Any
    history: list[dict[str, Any]]
    scores: Any = None
    n_cycle_edges_dropped: int = 0
    edge_scores: Any = None
    params: dict[str, Any] = field(default_factory=dict)


def fit_support(support: str, x: Any, cfg: Any, inputs: SupportInputs) -> SupportFit:
    """Fit ``support`` on the standardized ``(N, M)`` float64 ``x``: every support behind one
    signature ``fit_support(x, cfg, inputs) -> SupportFit`` (as DAGMA's ``linear`` /
    ``nonlinear`` modules), each in its own package (:mod:`cape_pipeline.causal.regression`,
    ``learned``, ``screened``, ``lowrank``), whose ``__init__`` re-exports it.

    Raises
    ------
    CapeConfigError
        Unknown support (``"auto"`` must be resolved first).
    """
    from importlib import import_module

    packages = {"regression": "regression", "learned": "learned", "screened": "screened", "low-rank": "lowrank"}
    if support not in packages:
        raise CapeConfigError(f"support: expected one of {sorted(packages)}, got {support!r}")
    return import_module(f"cape_pipeline.causal.{packages[support]}").fit_support(x, cfg, inputs)
