"""Every option of Step I, its default and its validation, written once: :class:`DiscoverConfig`.

:func:`~cape_pipeline.causal.api.discover` takes a :class:`DiscoverConfig` (or its fields as
keywords), the solver's :class:`~cape_pipeline.causal.fitting.SolverConfig` takes its defaults
from here, and the pipeline's discover stage validates through it before any stage runs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cape_pipeline._config import check_fields as _check_fields
from cape_pipeline._config import is_int as _is_int
from cape_pipeline._config import is_num as _is_num
from cape_pipeline._utils import check_device
from cape_pipeline.causal.baselines import DAGMA_METHODS, GCASTLE_METHODS
from cape_pipeline.causal.regression.split_vote import workers_ok
from cape_pipeline.causal.regulators import check_regulators
from cape_pipeline.causal.sem import POSTERIORS
from cape_pipeline.causal.supports import (
    AUTO_LOW_RANK_MAX,
    COVARIATES,
    LEARNED_MIN_OBS,
    MEASUREMENT_ERROR,
    N_SPLITS,
    SUPPORTS,
    UNUSED_BY_SUPPORT,
    resolve_support,
)
from cape_pipeline.errors import CapeConfigError

__all__ = [
    "ACYCLICITY",
    "DEFAULT_ACYCLICITY",
    "DEFAULT_EPOCHS",
    "DEFAULT_MIN_STEPS",
    "L1_MODES",
    "METHODS",
    "SUPPORTS",
    "AUTO_LOW_RANK_MAX",
    "LEARNED_MIN_OBS",
    "DiscoverConfig",
    "resolve_support",
    "check_options",
    "resolve_config",
]

#: the methods :func:`~cape_pipeline.causal.api.discover` runs
METHODS = ("cape", "correlation", "partial-correlation", *GCASTLE_METHODS, *DAGMA_METHODS)
#: the known graph of the data instead of a learned one (pipeline only; see DiscoverConfig.method)
TRUE_DAG = "true-dag"
ACYCLICITY = ("spectral", "majorant")
DEFAULT_ACYCLICITY = ACYCLICITY[0]
L1_MODES = ("auto", "exact", "sampled", "surrogate")
#: paper 000, Supp. F.4: 100 epochs
DEFAULT_EPOCHS = 100
#: with ``epochs=None`` the budget is raised to at least this many AdamW steps
DEFAULT_MIN_STEPS = 5000
#: options of method "cape" only (the others apply to every method, or to several)
CAPE_FIELDS = (
    "posterior", "min_steps", "support", "n_candidates", "h_tol", "rho_max", "rho_init", "hidden", "power_iters",
    "weight_decay", "init_scale", "l1", "l1_exact_max", "l1_pairs", "dag_threshold", "covariates", "n_states",
    "min_effect", "fdr", "measurement_error", "interventions", "order_rounds", "n_splits", "regulators",
    "workers",
)
#: the cape options given to a baseline as keywords were, and still are, the baseline's options
#: (e.g. ``hidden`` of "dagma-mlp"); these are refused for a baseline instead
_CAPE_ONLY_STRICT = ("posterior", "min_steps", "support", "n_candidates", "regulators")
#: the method_options a baseline takes, where checked here (gcastle and dagma check their own)
_BASELINE_OPTIONS: dict[str, tuple[str, ...]] = {"correlation": (), "partial-correlation": ("alpha",)}
#: methods that form their output with a per-row cap
_ROW_CAP_METHODS = ("cape", "correlation", "partial-correlation")


@dataclass(frozen=True)
class DiscoverConfig:
    """Every option of Step I (:func:`~cape_pipeline.causal.api.discover`), validated on creation.

    A default of None means "chosen from the data or the other options", as described per field.

    Attributes
    ----------
    method
        ``"cape"`` (default); ``"correlation"`` (the w/o-CSL ablation: ``|Pearson r| > τ``,
        symmetric with both directions present — **not a DAG**); ``"notears"``,
        ``"dag-gnn"``, ``"notears-low-rank"`` (gcastle 1.0.4 with its defaults and its own
        0.3 threshold; cycles are broken afterwards as for CAPE); ``"partial-correlation"``
        (graphical-lasso partial correlations ``|ρ| > τ``, symmetric like ``"correlation"``,
        **not a DAG**); ``"dagma"``, ``"dagma-mlp"`` (package ``dagma``: ``DagmaLinear`` and
        ``DagmaMLP`` + ``DagmaNonlinear`` with the package's defaults and its own
        ``w_threshold`` = 0.3 instead of τ; cycles broken as for CAPE); ``"true-dag"`` (the
        pipeline only: the data's known graph, ``varp["true_dag"]``, instead of a learned one;
        :func:`~cape_pipeline.causal.api.discover` refuses it, use
        :meth:`~cape_pipeline.causal.graph.CausalGraph.from_adjacency`).
    rank
        r of ``A = U Vᵀ`` (40). ``rank >= M`` is capped to ``M − 1`` (logged at INFO).
    lambda_sparse
        λs (Eq. 9), weight of ``‖A‖₁`` per batch of ``batch_size`` rows (see ``l1``).
    threshold
        τ on ``|A|`` (0.2); for ``"correlation"`` the threshold on ``|r|``.
    missing
        NaN in the data: ``"error"`` (default) refuses them, naming the features; ``"mean"``
        replaces each feature's NaN by its mean over the observed rows, for structure learning
        only (the imputed value is the feature's mean, so it adds no covariance). The
        pipeline's discover stage uses ``"mean"`` on data whose modality marks missing values
        with NaN (methylation, proteomics; ingest rejects NaN elsewhere).
    epochs
        AdamW epochs over all outer steps of the low-rank model. ``None`` (default) means the
        paper's 100 (Supp. F.4), raised for small N to at least ``min_steps`` (5000) AdamW
        steps: ``max(100, ⌈min_steps / ⌈N / batch_size⌉⌉)`` (see
        :func:`~cape_pipeline.causal.api.resolve_epochs`; e.g. N = 600 → 1000 epochs,
        N = 2000 → 313, N ≥ 6,400 → 100); the value used is ``params["effective_epochs"]``.
        With the learned support it caps the epochs of the screen and the refit (default 200,
        both stop early on validation).
    batch_size
        Rows per AdamW step: 128 for the low-rank model (Supp. F.4); the learned support uses
        its own 256 unless this is set to another value.
    lr
        AdamW learning rate: 3e-3 for the low-rank model (Supp. F.4); the learned support uses
        its own 1e-2 (Adam) unless this is set to another value.
    acyclicity
        ``"spectral"`` (default: ρ(A∘A) by power iteration, NO-BEARS; chosen on the
        benchmarks in ``benchmarks/discover/lowrank/RESULTS.md``) or ``"majorant"``
        (``tr exp(|V|ᵀ|U|) − r``).
    max_outer
        Augmented-Lagrangian outer steps (20); each runs ``ceil(epochs / max_outer)`` epochs.
    device
        ``"auto"`` (cuda if available), ``"cpu"``, ``"cuda"``: where the fits run (for
        ``support="regression"``: the screen, the regressions and the jackknife; its orientation
        and p-values run on the CPU).
    seed
        Seed of the local torch generators (global RNG state is left alone for ``"cape"``;
        dagma's global-RNG draws are seeded with it and restored afterwards).
    posterior
        ``"cape"``: ``"sampled"`` (reparameterised Z with learned variance) or ``"mean"``
        (decoder on μ and KL ½‖μ‖², as in the DAG-GNN reference code — fewer shrunk edges;
        compared in ``benchmarks/discover/lowrank/RESULTS.md``). None (default): ``"sampled"`` for
        ``support="low-rank"``, ``"mean"`` (its only one) for ``support="screened"``.
    min_steps
        ``"cape"`` with ``epochs=None``: the epochs are raised to at least this many AdamW
        steps (5000); 0 gives exactly 100 epochs.
    support
        ``"cape"``: ``"auto"`` (default: ``"low-rank"`` for M ≤ 20 features or N < 50 rows,
        else ``"regression"`` for single-cell data — an AnnData whose ingest or preprocess
        recorded modality ``scrna``, or that carries ``obs["cape_library_size"]`` — and
        ``"learned"`` for other data; the rule and its
        measurements are in ``benchmarks/discover/learned/RESULTS.md`` and
        ``benchmarks/discover/counts/RESULTS.md``; the choice is ``params["support"]``, the
        request ``params["support_requested"]``),
        ``"regression"`` (every feature regressed on its screened candidate parents after the
        covariates; a pair is an edge when its partial R² exceeds ``min_effect`` at
        false-discovery rate ``fdr``; the accepted pairs are oriented by a greedy likelihood
        DAG search and pruned given their DAG parents: see
        :func:`~cape_pipeline.causal.regression.fit_regression`; ``n_candidates`` left at 20
        means its own 10),
        ``"learned"`` (per-feature MLPs on a learned screen, after SDCD: see
        :func:`~cape_pipeline.causal.learned.fit_learned`; τ is the learned screen's cut on
        the strength ``‖W₁‖₂`` and the output keeps strength > τ/2, SDCD's 0.2 and 0.1;
        ``hidden``, ``lr``, ``batch_size`` and ``epochs`` left at their defaults mean the
        learned fit's own: 10 units, 1e-2, 256 rows, early stopping on 20 % held-out rows),
        ``"low-rank"`` (the paper's ``A = U Vᵀ``, reachable by name) or ``"screened"`` (A
        sparse on screened candidate parents, for M in the thousands — two correlation rounds
        pick ``3·n_candidates`` candidates per feature, a first phase fits without the
        acyclicity term, the second runs the spectral augmented Lagrangian on the phase-1
        support ``|A| > τ`` until it is a DAG and then refits that DAG's weights; posterior
        ``"mean"``, exact sparse ‖A‖₁; O(N·M²) once for the screen in row blocks, then
        O(N·M·k) per epoch; see :func:`~cape_pipeline.causal.screened.fit_screened` and
        ``benchmarks/discover/screened/RESULTS.md``).
    n_candidates
        ``"cape"`` with ``support="screened"``: k, candidate parents per feature and
        screening round (20).
    h_tol
        ``"cape"``: the augmented Lagrangian stops once the acyclicity h < ``h_tol`` (1e-8).
    rho_max
        ``"cape"``: the augmented Lagrangian stops once its penalty ρ > ``rho_max`` (1e16).
    rho_init
        ``"cape"``: initial penalty ρ (1).
    hidden
        ``"cape"``: width of the entrywise MLPs f, f⁻¹ (64).
    power_iters
        ``"cape"``: power-iteration steps per evaluation of the spectral h (10, warm-started).
    weight_decay
        ``"cape"``: AdamW decoupled weight decay (1e-2).
    init_scale
        ``"cape"``, low rank: spectral radius of ``|U||V|ᵀ`` at initialisation (0.1).
    max_edges_per_row
        Per-row cap on the output graph, the strongest ``|weight|`` first (methods ``"cape"``,
        ``"correlation"``, ``"partial-correlation"``). None (default): every entry above τ for
        M ≤ 5000, else 200.
    l1
        ``"cape"``, low rank: how ‖A‖₁ is evaluated; ``"auto"`` (default: exact for M ≤
        ``l1_exact_max``, else an unbiased estimate from ``l1_pairs`` sampled entries),
        ``"exact"``, ``"sampled"`` or ``"surrogate"`` (the factor bound
        ``Σ_k ‖U_k‖₁‖V_k‖₁ ≥ ‖A‖₁``).
    l1_exact_max
        ``"cape"``, low rank: ``l1="auto"`` computes ‖UVᵀ‖₁ exactly up to this many features
        (500) and estimates it above.
    l1_pairs
        ``"cape"``, low rank: the number S of sampled entries of the ‖UVᵀ‖₁ estimate (4096).
    dag_threshold
        ``"cape"``, low rank: the augmented-Lagrangian penalty stops growing once
        ``|A| > dag_threshold`` (with the ``max_edges_per_row`` cap) is a DAG. None (default):
        τ (``threshold``), so the penalty is held once the returned graph is acyclic.
    covariates
        ``"cape"``: cell-level covariates regressed out of every feature before any support
        fits: ``"auto"`` (default: for single-cell data the log library size where preprocess
        recorded it, ``obs["cape_library_size"]``; otherwise none), ``"none"``, ``"states"``,
        ``"library"`` or ``"states+library"``. Cell states guard against hidden programs shared
        by many genes and cost recall where regulators drive the states
        (:data:`~cape_pipeline.causal.supports.COVARIATES`). Recorded as ``params["covariates_used"]``.
    n_states
        ``"cape"``: number of cell states (k-means on 30 principal components) used as
        covariates; None (default): ``min(30, max(2, N // 100))``.
    min_effect
        ``"cape"``, support ``"regression"``: the partial R² an edge must exceed (0.003: it
        explains ≥ 0.3 % of its child's covariate-adjusted variance beyond the other candidates;
        chosen on two count generators, ``benchmarks/discover/counts/RESULTS.md``).
    fdr
        ``"cape"``, support ``"regression"``: Benjamini–Hochberg level of the edge test (0.05).
    measurement_error
        ``"cape"``, support ``"regression"``: ``"auto"`` (default: from 3,000 cells on,
        :data:`~cape_pipeline.causal.supports.THINNING_MIN_OBS`), ``"thinning"`` or ``"none"``:
        on counts preprocess normalized, correct the regressions for each gene's counting noise,
        measured by binomial thinning (:func:`~cape_pipeline.causal.covariates.count_reliability`;
        ``benchmarks/discover/counts/RESULTS.md``). Recorded as ``params["measurement_error_used"]``.
    interventions
        ``"cape"``, support ``"regression"``: the ``obs`` column of perturbation labels, ``"auto"``
        (default: a GEARS-style ``condition`` column with controls) or ``"none"``; a perturbed gene's
        conditional skips its perturbed cells; unusable labels' cells are left out (:mod:`.interventions`).
    order_rounds
        ``"cape"``, support ``"regression"``, with interventions: rounds of the ordered re-test
        (:mod:`.ordering`; each gene tested on the candidates that precede it in the order the
        perturbations' shifts and the DAG give; an edge whose parent's perturbation leaves the
        child unshifted, p > :data:`~.ordering.SHIFT_CONSISTENCY_P`, dropped). ``"auto"``:
        :data:`~.supports.ORDER_ROUNDS` (with or without the counting-noise correction), or an int ≥ 0.
        Recorded as ``params["order_rounds_used"]``.
    n_splits
        ``"cape"``, support ``"regression"``: random splits of the cells the whole fit (screen
        on one half, test on the other, both ways) is repeated on; an edge is kept where at
        least half of the splits keep it (:func:`~cape_pipeline.causal.regression.split_vote.vote`); with
        perturbation labels, then tested again with a jackknife variance
        (:func:`~cape_pipeline.causal.regression.jackknife.jackknife_retest`).
        Default :data:`~.supports.N_SPLITS` (8); 1 gives one fit without the re-test, in 1/8 of
        the time. Recorded as
        ``params["n_splits_used"]`` (1 below 20 cells).
    regulators
        ``"cape"``, support ``"regression"``: the only features that may be parents (None: all), as
        GRNBoost2's ``tf_names``: ``"human"``/``"mouse"`` (bundled TF lists), ``"var:COLUMN"`` (a
        bool var column), a file (a name per line, ``#`` comments) or a list (:mod:`~.causal.regulators`).
    workers
        ``"cape"``, support ``"regression"``: where the ``n_splits`` fits run: None (default) in
        this process; ``"local"``/``"local:N"``/a scheduler address: on ``dask.distributed``
        workers, with the same DAG (:func:`~cape_pipeline.causal.regression.split_vote.fit_on_workers`).
    method_options
        Options of a baseline method (empty by default), e.g. gcastle's constructor options;
        for ``"partial-correlation"`` ``alpha`` (``"auto"``: ``GraphicalLassoCV`` for M ≤
        200, else ``GraphicalLasso`` at ``√(log M / N)``; ``"cv"``; or a number > 0, see
        :func:`~cape_pipeline.causal.baselines.partial_correlation_graph`); for ``"dagma"`` /
        ``"dagma-mlp"`` the package's ``fit`` options (``lambda1``, ``w_threshold``, ``T``,
        ``mu_init``, ``mu_factor``, ``s``, ``warm_iter``, ``max_iter``, ``lr``, …),
        ``loss_type`` (linear), ``hidden`` and ``bias`` (MLP, ``dims=[M, hidden, 1]``), see
        :func:`~cape_pipeline.causal.baselines.dagma_weights`. Must be empty for ``"cape"``.

    Raises
    ------
    CapeConfigError
        Naming the option and what was expected: unknown method, a value out of range or of the
        wrong type, an option of another method, CUDA requested where there is none.
    """

    method: str = "cape"
    rank: int = 40
    lambda_sparse: float = 1.0
    threshold: float = 0.2
    missing: str = "error"
    epochs: int | None = None
    batch_size: int = 128
    lr: float = 3e-3
    acyclicity: str = DEFAULT_ACYCLICITY
    max_outer: int = 20
    device: str = "auto"
    seed: int = 0
    posterior: str | None = None
    min_steps: int = DEFAULT_MIN_STEPS
    support: str = SUPPORTS[0]
    n_candidates: int = 20
    h_tol: float = 1e-8
    rho_max: float = 1e16
    rho_init: float = 1.0
    hidden: int = 64
    power_iters: int = 10
    weight_decay: float = 1e-2
    init_scale: float = 0.1
    max_edges_per_row: int | None = None
    l1: str = L1_MODES[0]
    l1_exact_max: int = 500
    l1_pairs: int = 4096
    dag_threshold: float | None = None
    covariates: str = COVARIATES[0]
    n_states: int | None = None
    min_effect: float = 0.003
    fdr: float = 0.05
    measurement_error: str = MEASUREMENT_ERROR[0]
    interventions: str = "auto"
    order_rounds: int | str = "auto"
    n_splits: int = N_SPLITS
    regulators: str | tuple[str, ...] | None = None
    workers: str | None = None
    method_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regulators", check_regulators(self.regulators))
        method = self.method
        if method not in (*METHODS, TRUE_DAG):
            raise CapeConfigError(f"method: expected one of {', '.join((*METHODS, TRUE_DAG))}, got {method!r}")
        if self.missing not in ("error", "mean"):
            raise CapeConfigError(f"missing: expected 'error' or 'mean', got {self.missing!r}")
        checks = {
            "rank": (lambda v: _is_int(v, 1), "an integer >= 1"),
            "lambda_sparse": (lambda v: _is_num(v, lambda f: f >= 0), "a finite number >= 0"),
            "threshold": (lambda v: _is_num(v, lambda f: f >= 0), "a finite number >= 0"),
            "epochs": (lambda v: v is None or _is_int(v, 1), "an integer >= 1 or None"),
            "batch_size": (lambda v: _is_int(v, 1), "an integer >= 1"),
            "lr": (lambda v: _is_num(v, lambda f: f > 0), "a finite number > 0"),
            "max_outer": (lambda v: _is_int(v, 1), "an integer >= 1"),
            "acyclicity": (lambda v: v in ACYCLICITY, f"one of {', '.join(ACYCLICITY)}"),
        }
        _check_fields(self, checks)
        check_device(self.device)
        if not isinstance(self.method_options, Mapping):
            raise CapeConfigError(f"method_options: expected a dict, got {self.method_options!r}")
        mpr = self.max_edges_per_row
        if mpr is not None and method not in _ROW_CAP_METHODS:
            raise CapeConfigError(
                f"max_edges_per_row: only for methods {', '.join(_ROW_CAP_METHODS)}, got method {method!r}"
            )
        if mpr is not None and not _is_int(mpr, 1):
            raise CapeConfigError(f"max_edges_per_row: expected an integer >= 1 or None, got {mpr!r}")
        if method == "cape":
            self._check_cape()
        else:
            self._check_not_cape()

    def _check_cape(self) -> None:
        if self.method_options:
            raise CapeConfigError(
                f"method_options: unknown option(s) {sorted(self.method_options)} for method 'cape'; "
                f"expected any of {sorted(f.name for f in dataclasses.fields(self) if f.name != 'method_options')}"
            )
        _check_fields(self, {
            "posterior": (lambda v: v is None or v in POSTERIORS, f"one of {', '.join(POSTERIORS)}"),
            "support": (lambda v: v in SUPPORTS, f"one of {', '.join(SUPPORTS)}"),
            "n_candidates": (lambda v: _is_int(v, 1), "an integer >= 1"),
            "l1": (lambda v: v in L1_MODES, f"one of {', '.join(L1_MODES)}"),
            "covariates": (lambda v: v in COVARIATES, f"one of {', '.join(COVARIATES)}"),
            "n_states": (lambda v: v is None or _is_int(v, 0), "an integer >= 0 or None"),
            "min_effect": (lambda v: _is_num(v, lambda f: 0 <= f < 1), "a number in [0, 1)"),
            "measurement_error": (lambda v: v in MEASUREMENT_ERROR, f"one of {', '.join(MEASUREMENT_ERROR)}"),
            "interventions": (lambda v: isinstance(v, str) and bool(v), "'auto', 'none' or an obs column name"),
            "order_rounds": (lambda v: v == "auto" or _is_int(v, 0), "'auto' or an integer >= 0"),
            "n_splits": (lambda v: _is_int(v, 1), "an integer >= 1"),
            "workers": (workers_ok, "None, 'local', 'local:N' or a dask scheduler address"),
            "fdr": (lambda v: _is_num(v, lambda f: 0 < f < 1), "a number in (0, 1)"),
        })
        unused = UNUSED_BY_SUPPORT.get(self.support)
        if unused is not None:
            names, posteriors, what = unused
            default = _defaults()
            bad = [k for k in names if getattr(self, k) != getattr(default, k)]
            if self.posterior not in posteriors:
                bad.append("posterior")
            if self.acyclicity != "spectral" and self.support != "low-rank":
                bad.append("acyclicity")
            if bad:
                other = "support='regression'" if set(bad) <= set(UNUSED_BY_SUPPORT["low-rank"][0]) else "support='low-rank'"
                raise CapeConfigError(
                    f"{', '.join(bad)}: not used with support={self.support!r} ({what}); drop them or use {other}"
                )
        if not _is_int(self.min_steps, 0):
            raise CapeConfigError(f"min_steps: expected an integer >= 0, got {self.min_steps!r}")

    def _check_not_cape(self) -> None:
        default = _defaults()
        strict = [k for k in _CAPE_ONLY_STRICT if getattr(self, k) != getattr(default, k)]
        if strict:
            raise CapeConfigError(f"{', '.join(strict)}: only for method 'cape', got method {self.method!r}")
        other = [k for k in CAPE_FIELDS if k not in _CAPE_ONLY_STRICT and getattr(self, k) != getattr(default, k)]
        if other:
            raise CapeConfigError(
                f"{', '.join(other)}: only for method 'cape', got method {self.method!r}; "
                "options of a baseline go in method_options"
            )
        allowed = _BASELINE_OPTIONS.get(self.method)
        unknown = sorted(set(self.method_options) - set(allowed or ()))
        if allowed is not None and unknown:
            raise CapeConfigError(
                f"method_options: unknown option(s) {unknown} for method {self.method!r}; "
                f"expected any of {sorted(allowed)}"
            )

    def support_for(self, n_features: int, n_obs: int | None = None, *, single_cell: bool = False) -> str:
        """The support a fit on ``n_features`` features (and ``n_obs`` rows) uses (``"auto"``
        resolved by :func:`resolve_support`)."""
        return resolve_support(self.support, n_features, n_obs, single_cell=single_cell)

    @property
    def effective_posterior(self) -> str:
        """The posterior used: ``posterior``, else ``"mean"`` for the screened support and
        ``"sampled"`` for the low-rank one."""
        if self.posterior is not None:
            return self.posterior
        return "mean" if self.support == "screened" else POSTERIORS[0]


@functools.cache
def _defaults() -> DiscoverConfig:
    return DiscoverConfig()


FIELDS = tuple(f.name for f in dataclasses.fields(DiscoverConfig))


def resolve_config(
    config: DiscoverConfig | None, options: Mapping[str, Any]
) -> tuple[DiscoverConfig, list[str]]:
    """``config`` (default: the defaults) with ``options`` put in (``dataclasses.replace``).

    Keywords that are not fields are a baseline's options (``method_options``) when the method
    is not ``"cape"``, as are the cape solver options given with a baseline (they always went to
    the baseline, e.g. ``hidden`` of ``"dagma-mlp"``).

    Returns
    -------
    config, explicit
        The validated config, and the names of the options that were set: those in
        ``options`` (in their order), the fields of ``config`` that differ from the defaults
        and the keys of ``method_options`` (they are recorded in ``CausalGraph.params``).

    Raises
    ------
    CapeConfigError
        An unknown option for method ``"cape"`` (named, with the known ones), or any check of
        :class:`DiscoverConfig`.
    """
    if config is not None and not isinstance(config, DiscoverConfig):
        raise CapeConfigError(f"config: expected a DiscoverConfig or None, got {type(config).__name__}")
    base = config if config is not None else _defaults()
    method = options.get("method", base.method)
    fields = {k: v for k, v in options.items() if k in FIELDS}
    extra = {k: v for k, v in options.items() if k not in FIELDS}
    if method != "cape":
        routed = [k for k in CAPE_FIELDS if k in fields and k not in _CAPE_ONLY_STRICT]
        extra.update({k: fields.pop(k) for k in routed})
    elif extra:
        raise CapeConfigError(
            f"unknown option(s) {sorted(extra)} for method 'cape'; expected any of {sorted(FIELDS)}"
        )
    if extra:
        fields["method_options"] = {**base.method_options, **fields.get("method_options", {}), **extra}
    cfg = dataclasses.replace(base, **fields) if fields else base
    default = _defaults()
    explicit = [k for k in options if k != "method_options"]
    explicit += [
        k for k in FIELDS
        if k not in explicit and k != "method_options" and getattr(cfg, k) != getattr(default, k)
    ]
    explicit += [k for k in cfg.method_options if k not in explicit]
    return cfg, explicit


def check_options(method: str = "cape", **options: Any) -> DiscoverConfig:
    """Validate the options of :func:`~cape_pipeline.causal.api.discover` without touching data
    (the pipeline itself builds :class:`DiscoverConfig`, which does the same checks).

    A thin wrapper of :class:`DiscoverConfig` (which does the checks) that also takes a
    baseline's options as keywords, as ``discover`` does.

    Returns
    -------
    DiscoverConfig
        The validated options.

    Raises
    ------
    CapeConfigError
        As :class:`DiscoverConfig`.
    """
    return resolve_config(None, {"method": method, **options})[0]
