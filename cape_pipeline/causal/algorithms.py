"""The algorithms of Step I for method ``"cape"`` (how ``A`` is parameterised and fitted), the
rule of ``algorithm="auto"`` (:func:`resolve_algorithm`) and the one signature every algorithm
is fitted behind (:func:`fit_algorithm`). Each algorithm's options are its own config
(``regression.config.RegressionConfig``, ``lowrank.config.LowRankConfig``, …)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cape_pipeline.errors import CapeConfigError

__all__ = [
    "ALGORITHMS", "AUTO_LOW_RANK_MAX", "COVARIATES", "LEARNED_MIN_OBS", "MEASUREMENT_ERROR", "N_SPLITS",
    "AlgorithmFit", "AlgorithmInputs", "fit_algorithm", "resolve_algorithm",
]

#: the algorithms of method "cape" (how A is parameterised): chosen from the data ("auto"), the
#: paper's low rank, screened sparse, per-feature MLPs on a learned screen, or covariate-adjusted
#: neighbourhood regressions with a likelihood-ratio edge test (single-cell data)
ALGORITHMS = ("auto", "low-rank", "screened", "learned", "regression")
#: cell-level covariates of Step I: "auto" (single-cell data: the library size where preprocess
#: recorded it, no cell states; other data: none) or an explicit choice. Cell states are not in
#: "auto": on counts driven by a regulatory graph they take the regulators' variation between
#: states with them and lower the recall, but they are the guard where hidden programs drive many
#: genes (on counts with gene modules and no graph they remove most of the false edges);
#: measured in benchmarks/discover/counts/RESULTS.md
COVARIATES = ("auto", "none", "states", "library", "states+library")
#: measurement error of algorithm "regression": "auto" (the counting-noise correction wherever the
#: data hold preprocessed counts, at every number of cells: it raises F1 on the count generators
#: at every size measured, benchmarks/discover/counts/RESULTS.md), "none" or "thinning" (each
#: gene's counting-noise share from binomial thinning, errors-in-variables regressions; "auto"
#: and "thinning" do the same)
MEASUREMENT_ERROR = ("auto", "none", "thinning")
#: order_rounds="auto" runs this many ordered re-tests wherever interventions apply (a third round
#: changes little; benchmarks/discover/interventional)
ORDER_ROUNDS = 2
#: n_splits of algorithm "regression" (the default): random splits of the cells the whole fit is
#: repeated on, an edge kept where at least half of them keep it (regression.split_vote.vote). Measured
#: against one split on the same data and seeds (benchmarks/discover/interventional and
#: benchmarks/discover/counts, RESULTS.md); the time is n_splits times one fit's
N_SPLITS = 8
#: algorithm="auto" takes the paper's low rank up to this many features and "learned" above
#: (measured on the suite: benchmarks/discover/learned/RESULTS.md)
AUTO_LOW_RANK_MAX = 20
#: the learned algorithm needs at least this many rows (20 % are held out); "auto" below → low rank
LEARNED_MIN_OBS = 50
def resolve_algorithm(
    algorithm: str, n_features: int, n_obs: int | None = None, *, single_cell: bool = False
) -> str:
    """The algorithm used for ``n_features`` features: ``algorithm`` itself unless it is ``"auto"``.

    ``"auto"`` → ``"low-rank"`` (the paper's ``A = U Vᵀ``) for M ≤ :data:`AUTO_LOW_RANK_MAX`
    or fewer than :data:`LEARNED_MIN_OBS` rows (the learned algorithm holds out 20 % of the rows
    for early stopping); else ``"regression"`` for single-cell data (``single_cell``) and
    ``"learned"`` otherwise. Measured on the Step I suite
    (``benchmarks/discover/learned/RESULTS.md``): the learned algorithm has the best F1 from
    M = 50 up on continuous data (synth50, scale-free and ER graphs at M = 200–2,000, SDCD's
    generator), the low rank on the 10- and 11-node sets (synth10, Sachs); on UMI counts
    (``benchmarks/discover/counts/RESULTS.md``, two generators) the regression algorithm keeps
    more true edges as cells are added where the learned one keeps fewer.

    Raises
    ------
    CapeConfigError
        Unknown ``algorithm``.
    """
    if algorithm not in ALGORITHMS:
        raise CapeConfigError(f"algorithm: expected one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    if algorithm != "auto":
        return algorithm
    if int(n_features) <= AUTO_LOW_RANK_MAX or (n_obs is not None and int(n_obs) < LEARNED_MIN_OBS):
        return "low-rank"
    return "regression" if single_cell else "learned"


@dataclass
class AlgorithmInputs:
    """What :func:`fit_algorithm` passes every algorithm beside the data and the config.

    Attributes
    ----------
    names
        ``(M,)`` feature names.
    device, seed
        The run's device (``"auto"``, ``"cpu"``, ``"cuda[:i]"``) and seed (``DiscoverConfig``).
    rank, epochs
        The effective rank and epochs (low-rank and screened algorithms).
    max_per_row
        Keep at most this many out-edges per feature (None: all).
    dense_scores
        Return the ``(M, M)`` score matrix (small M only).
    progress
        Show progress.
    reliability, intervened, label_targets
        Regression algorithm: each feature's reliability on counts, the ``(N, M)`` perturbation
        mask and the ``(N,)`` number of targets each cell's label names
        (:mod:`cape_pipeline.causal.interventions`), or None.
    regulators
        Regression algorithm: ``(R,)`` int64 sorted indices of the features that may be parents
        (:func:`~cape_pipeline.causal.regulators.resolve_regulators`), or None (every feature).
    unused
        Options set for algorithms that ``"auto"`` did not pick (recorded).
    """

    names: Any
    device: str
    seed: int
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
class AlgorithmFit:
    """What every algorithm's ``fit_algorithm`` returns: the DAG and what :func:`discover` records.

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
        Algorithm-specific entries of the graph's ``params``.
    """

    adjacency: Any
    history: list[dict[str, Any]]
    scores: Any = None
    n_cycle_edges_dropped: int = 0
    edge_scores: Any = None
    params: dict[str, Any] = field(default_factory=dict)


def fit_algorithm(algorithm: str, x: Any, cfg: Any, inputs: AlgorithmInputs) -> AlgorithmFit:
    """Fit the algorithm ``algorithm`` on the standardized ``(N, M)`` float64 ``x``: every algorithm
    behind one signature ``fit_algorithm(x, cfg, inputs) -> AlgorithmFit`` (as DAGMA's ``linear`` /
    ``nonlinear`` modules), each in its own package (:mod:`cape_pipeline.causal.regression`,
    ``learned``, ``screened``, ``lowrank``), whose ``__init__`` re-exports it; ``cfg`` is that
    algorithm's own config (``DiscoverConfig.regression``, ``.learned``, ``.screened``,
    ``.low_rank``).

    Raises
    ------
    CapeConfigError
        Unknown algorithm (``"auto"`` must be resolved first).
    """
    from importlib import import_module

    packages = {"regression": "regression", "learned": "learned", "screened": "screened", "low-rank": "lowrank"}
    if algorithm not in packages:
        raise CapeConfigError(f"algorithm: expected one of {sorted(packages)}, got {algorithm!r}")
    return import_module(f"cape_pipeline.causal.{packages[algorithm]}").fit_algorithm(x, cfg, inputs)
