"""The options of the regression algorithm of Step I, their defaults and their checks:
:class:`RegressionConfig` (``DiscoverConfig.regression``)."""

from __future__ import annotations

from dataclasses import dataclass

from cape_pipeline._config import check_fields, is_int, is_num
from cape_pipeline.causal.algorithms import MEASUREMENT_ERROR, N_SPLITS
from cape_pipeline.causal.regression.split_vote import workers_ok
from cape_pipeline.causal.regulators import check_regulators

__all__ = ["REGRESSION_N_CANDIDATES", "ROWS_PER_CANDIDATE", "RegressionConfig", "resolve_candidates"]

#: the most candidate parents per feature and screening round of the regression algorithm (a
#: screen of 40 candidates ranks true pairs better than one of 80 on counts,
#: ``benchmarks/discover/counts``)
REGRESSION_N_CANDIDATES = 10

#: rows of a screening half per candidate parent that ``n_candidates="auto"`` keeps: the upper end
#: of the 10–20 observations per candidate predictor of Harrell's rule of thumb (*Regression
#: Modeling Strategies*, 2nd ed., 2015, §4.4); each feature's regression holds up to 4k candidates
ROWS_PER_CANDIDATE = 20


def resolve_candidates(n_candidates: int | str, n_rows: int) -> int:
    """k, candidate parents per feature and screening round, for ``n_rows`` rows.

    ``"auto"``: ``min(REGRESSION_N_CANDIDATES, max(1, ⌊N/2⌋ // (4·ROWS_PER_CANDIDATE)))``: each
    feature is regressed on up to 4k screened candidates on one cross-fitting half of the rows
    (⌊N/2⌋), so k is cut where a half has fewer than :data:`ROWS_PER_CANDIDATE` rows per
    candidate (below 1,600 rows: k = 2 at 400 rows, 6 at 1,000). With more candidates than the
    half's rows support, each partial F test loses its power among collinear candidates and the
    kept graph shrinks (``benchmarks/discover/candidates/RESULTS.md``). An int is returned as
    it is.

    Parameters
    ----------
    n_candidates
        ``"auto"`` or an int ≥ 1 (:attr:`RegressionConfig.n_candidates`).
    n_rows
        N, the rows Step I fits (after quality control), ≥ 0.

    Returns
    -------
    int
        k ≥ 1.
    """
    if n_candidates != "auto":
        return int(n_candidates)
    return int(min(REGRESSION_N_CANDIDATES, max(1, (int(n_rows) // 2) // (4 * ROWS_PER_CANDIDATE))))


@dataclass(frozen=True)
class RegressionConfig:
    """Options of the regression algorithm (:func:`~cape_pipeline.causal.regression.fit_regression`),
    the default of Step I for single-cell data; validated on creation.

    Every feature is regressed on its screened candidate parents after the covariates; a pair is
    an edge when its partial R² exceeds ``min_effect`` at false-discovery rate ``fdr``; the
    accepted pairs are oriented by a greedy likelihood DAG search and pruned given their DAG
    parents.

    Attributes
    ----------
    n_candidates
        k, candidate parents per feature and screening round: ``"auto"`` (default:
        :data:`REGRESSION_N_CANDIDATES` = 10 from 1,600 rows on, fewer below, so that a
        cross-fitting half keeps :data:`ROWS_PER_CANDIDATE` rows per candidate;
        :func:`resolve_candidates`) or an int ≥ 1. Recorded as ``params["n_candidates_used"]``.
    min_effect
        The partial R² an edge must exceed (0.003: it explains ≥ 0.3 % of its child's
        covariate-adjusted variance beyond the other candidates; chosen on two count generators,
        ``benchmarks/discover/counts/RESULTS.md``).
    fdr
        Benjamini–Hochberg level of the edge test (0.05).
    measurement_error
        ``"auto"`` (default) or ``"thinning"``, the same, or ``"none"``:
        on counts preprocess normalized (at every number of cells), correct the regressions for each gene's counting noise,
        measured by binomial thinning (:func:`~cape_pipeline.causal.covariates.count_reliability`;
        ``benchmarks/discover/counts/RESULTS.md``). Recorded as ``params["measurement_error_used"]``.
    interventions
        The ``obs`` column of perturbation labels, ``"auto"`` (default: a GEARS-style
        ``condition`` column with controls) or ``"none"``; a perturbed gene's conditional skips
        its perturbed cells; unusable labels' cells are left out
        (:mod:`~cape_pipeline.causal.interventions`).
    order_rounds
        With interventions: rounds of the ordered re-test
        (:mod:`~cape_pipeline.causal.regression.ordering`; each gene tested on the candidates that
        precede it in the order the perturbations' shifts and the DAG give; an edge whose parent's
        perturbation leaves the child unshifted, p >
        :data:`~cape_pipeline.causal.regression.ordering.SHIFT_CONSISTENCY_P`, dropped).
        ``"auto"``: :data:`~cape_pipeline.causal.algorithms.ORDER_ROUNDS` (with or without the
        counting-noise correction), or an int ≥ 0. Recorded as ``params["order_rounds_used"]``.
    shift_edges
        With interventions: add each perturbed gene's direct shifts (at the edge test's ``fdr``,
        those no two-step path explains) as edges, where the regressions' ``min_effect`` floor
        cannot see a perturbation that moves few cells
        (:mod:`~cape_pipeline.causal.regression.shift_edges`; default True). How many were added
        is recorded as ``params["n_shift_edges"]``.
    n_splits
        Random splits of the cells the whole fit (screen on one half, test on the other, both
        ways) is repeated on; an edge is kept where at least half of the splits keep it
        (:func:`~cape_pipeline.causal.regression.split_vote.vote`); with perturbation labels,
        then tested again with a jackknife variance
        (:func:`~cape_pipeline.causal.regression.jackknife.jackknife_retest`). Default
        :data:`~cape_pipeline.causal.algorithms.N_SPLITS` (8); 1 gives one fit without the re-test,
        in 1/8 of the time. Recorded as ``params["n_splits_used"]`` (1 below 20 cells).
    regulators
        The only features that may be parents (None: all), as GRNBoost2's ``tf_names``:
        ``"human"``/``"mouse"`` (bundled TF lists), ``"var:COLUMN"`` (a bool var column), a file
        (a name per line, ``#`` comments) or a list (:mod:`~cape_pipeline.causal.regulators`).
    workers
        Where the ``n_splits`` fits run: None (default) in this process;
        ``"local"``/``"local:N"``/a scheduler address: on ``dask.distributed`` workers, with the
        same DAG (:func:`~cape_pipeline.causal.regression.split_vote.fit_on_workers`).

    Raises
    ------
    CapeConfigError
        A value out of range or of the wrong type, naming the option and what was expected.
    """

    n_candidates: int | str = "auto"
    min_effect: float = 0.003
    fdr: float = 0.05
    measurement_error: str = MEASUREMENT_ERROR[0]
    interventions: str = "auto"
    order_rounds: int | str = "auto"
    shift_edges: bool = True
    n_splits: int = N_SPLITS
    regulators: str | tuple[str, ...] | None = None
    workers: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "regulators", check_regulators(self.regulators))
        check_fields(self, {
            "n_candidates": (lambda v: v == "auto" or is_int(v, 1), "'auto' or an integer >= 1"),
            "min_effect": (lambda v: is_num(v, lambda f: 0 <= f < 1), "a number in [0, 1)"),
            "fdr": (lambda v: is_num(v, lambda f: 0 < f < 1), "a number in (0, 1)"),
            "measurement_error": (lambda v: v in MEASUREMENT_ERROR, f"one of {', '.join(MEASUREMENT_ERROR)}"),
            "interventions": (lambda v: isinstance(v, str) and bool(v), "'auto', 'none' or an obs column name"),
            "order_rounds": (lambda v: v == "auto" or is_int(v, 0), "'auto' or an integer >= 0"),
            "shift_edges": (lambda v: isinstance(v, bool), "True or False"),
            "n_splits": (lambda v: is_int(v, 1), "an integer >= 1"),
            "workers": (workers_ok, "None, 'local', 'local:N' or a dask scheduler address"),
        })
