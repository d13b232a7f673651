"""Supports of Step I (how ``A`` is parameterised for method ``"cape"``), the options each one
takes, and the rule of ``support="auto"`` (:func:`resolve_support`)."""

from __future__ import annotations

from cape_pipeline.causal.model import POSTERIORS
from cape_pipeline.errors import CapeConfigError

__all__ = [
    "AUTO_LOW_RANK_MAX", "COVARIATES", "LEARNED_MIN_OBS", "MEASUREMENT_ERROR", "SUPPORTS", "UNUSED_BY_SUPPORT",
    "resolve_support",
]

#: how A is parameterised for method "cape": chosen from the data ("auto"), the paper's low rank,
#: screened sparse, per-feature MLPs on a learned screen, or state-adjusted neighbourhood
#: regressions with a likelihood-ratio edge test (single-cell data)
SUPPORTS = ("auto", "low-rank", "screened", "learned", "regression")
#: cell-level covariates of Step I: "auto" (single-cell data: cell states, and the library size
#: where preprocess recorded it; other data: none) or an explicit choice
COVARIATES = ("auto", "none", "states", "library", "states+library")
#: measurement error of support "regression": "none" (default) or "thinning" (each gene's
#: counting-noise share from binomial thinning, errors-in-variables regressions). Not the default:
#: on counts driven by a regulatory graph it raises F1 from 10,000 cells on (two generators), but
#: on counts whose genes share hidden module activities it turns the modules into edges (513
#: kept, all false, against 6 without it, at 10,000 cells) — benchmarks/discover/counts/RESULTS.md
MEASUREMENT_ERROR = ("none", "thinning")
#: support="auto" takes the paper's low rank up to this many features and "learned" above
#: (measured on the suite: benchmarks/discover/RESULTS_learned.md)
AUTO_LOW_RANK_MAX = 20
#: the learned support needs at least this many rows (20 % are held out); "auto" below → low rank
LEARNED_MIN_OBS = 50
#: cape options that support "screened" does not use (it has its own exact ‖A‖₁ and init)
_NOT_SCREENED = ("l1", "l1_exact_max", "l1_pairs", "init_scale", "h_tol")
#: cape options that support "learned" does not use (per-feature MLPs, SDCD-style schedule)
_NOT_LEARNED = (*_NOT_SCREENED, "rank", "max_outer", "rho_init", "rho_max", "min_steps", "weight_decay",
                "lambda_sparse", "dag_threshold")
#: options of support "regression" only
_REGRESSION_ONLY = ("min_effect", "fdr", "measurement_error", "interventions")
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
    (``benchmarks/discover/RESULTS_learned.md``): the learned support has the best F1 from
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
