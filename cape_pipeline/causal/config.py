"""The options of Step I: :class:`DiscoverConfig`, the options every method shares, the choice of
algorithm and one config per algorithm (nanoGPT's one config per model; DAGMA's options on their
own fit's signature).

Each algorithm's options, defaults and checks live in its own package:
:class:`~cape_pipeline.causal.regression.config.RegressionConfig` (``DiscoverConfig.regression``),
:class:`~cape_pipeline.causal.lowrank.config.LowRankConfig` (``.low_rank``),
:class:`~cape_pipeline.causal.screened.config.ScreenedConfig` (``.screened``) and
:class:`~cape_pipeline.causal.learned.config.LearnedConfig` (``.learned``).
:func:`~cape_pipeline.causal.api.discover` takes a :class:`DiscoverConfig` or its fields as keywords
(:func:`resolve_config`), and the pipeline's discover stage validates through it before any stage
runs. The earlier flat spelling of an algorithm's option (``min_effect=0.01``, ``--set
discover.fdr=0.1``) is mapped onto its algorithm's config by
:func:`~cape_pipeline.causal.options.nest_options`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import warnings
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from typing import Any

from cape_pipeline._config import did_you_mean
from cape_pipeline._config import is_int as _is_int
from cape_pipeline._config import is_num as _is_num
from cape_pipeline._utils import check_device
from cape_pipeline.causal.algorithms import (
    ALGORITHMS,
    AUTO_LOW_RANK_MAX,
    COVARIATES,
    LEARNED_MIN_OBS,
    resolve_algorithm,
)
from cape_pipeline.causal.baselines import DAGMA_METHODS, GCASTLE_METHODS
from cape_pipeline.causal.fitting import DEFAULT_EPOCHS, DEFAULT_MIN_STEPS
from cape_pipeline.causal.learned.config import LearnedConfig
from cape_pipeline.causal.lowrank.config import (
    ACYCLICITY,
    DEFAULT_ACYCLICITY,
    L1_MODES,
    LowRankConfig,
)
from cape_pipeline.causal.options import (
    ALGORITHM_FIELDS,
    CONFIG_CLASSES,
    FLAT_OPTIONS,
    nest_options,
)
from cape_pipeline.causal.regression.config import RegressionConfig
from cape_pipeline.causal.screened.config import ScreenedConfig
from cape_pipeline.errors import CapeConfigError

__all__ = [
    "ACYCLICITY",
    "ALGORITHMS",
    "ALGORITHM_FIELDS",
    "AUTO_LOW_RANK_MAX",
    "BASELINE_THRESHOLD",
    "DEFAULT_ACYCLICITY",
    "DEFAULT_EPOCHS",
    "DEFAULT_MIN_STEPS",
    "L1_MODES",
    "LEARNED_MIN_OBS",
    "METHODS",
    "DiscoverConfig",
    "LearnedConfig",
    "LowRankConfig",
    "RegressionConfig",
    "ScreenedConfig",
    "check_options",
    "nest_options",
    "resolve_algorithm",
    "resolve_config",
]

#: the methods :func:`~cape_pipeline.causal.api.discover` runs
METHODS = ("cape", "correlation", "partial-correlation", *GCASTLE_METHODS, *DAGMA_METHODS)
#: the known graph of the data instead of a learned one (pipeline only; see DiscoverConfig.method)
TRUE_DAG = "true-dag"
#: τ of the "correlation" and "partial-correlation" baselines (their ``method_options["threshold"]``)
BASELINE_THRESHOLD = 0.2
#: the method_options a baseline takes, where checked here (gcastle and dagma check their own)
_BASELINE_OPTIONS: dict[str, tuple[str, ...]] = {
    "correlation": ("threshold",), "partial-correlation": ("alpha", "threshold"),
}
#: methods that form their output with a per-row cap
_ROW_CAP_METHODS = ("cape", "correlation", "partial-correlation")
#: options of method "cape" only, besides the algorithm configs
_CAPE_ONLY = ("algorithm", "covariates", "n_states")


@dataclass(frozen=True)
class DiscoverConfig:
    """The options of Step I (:func:`~cape_pipeline.causal.api.discover`), validated on creation:
    those every method shares, the algorithm of method ``"cape"`` and one config per algorithm.

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
    algorithm
        ``"cape"``: ``"auto"`` (default: ``"low-rank"`` for M ≤ 20 features or N < 50 rows,
        else ``"regression"`` for single-cell data — an AnnData whose ingest or preprocess
        recorded modality ``scrna``, or that carries ``obs["cape_library_size"]`` — and
        ``"learned"`` for other data; the rule and its measurements are in
        ``benchmarks/discover/learned/RESULTS.md`` and ``benchmarks/discover/counts/RESULTS.md``;
        the choice is ``params["algorithm"]``, the request ``params["algorithm_requested"]``),
        ``"regression"`` (every feature regressed on its screened candidate parents after the
        covariates, a minimum-effect edge test, a greedy likelihood DAG: ``regression``),
        ``"learned"`` (per-feature MLPs on a learned screen, after SDCD: ``learned``),
        ``"low-rank"`` (the paper's ``A = U Vᵀ``: ``low_rank``) or ``"screened"`` (A sparse on
        screened candidate parents, for M in the thousands: ``screened``). With an explicit
        algorithm, options set for another algorithm are an error; with ``"auto"`` each
        algorithm's config applies where ``"auto"`` picks it (the others are recorded as
        ``params["unused_options"]``). Also accepted as ``support``, its earlier name (with a
        FutureWarning).
    missing
        NaN in the data: ``"error"`` (default) refuses them, naming the features; ``"mean"``
        replaces each feature's NaN by its mean over the observed rows, for structure learning
        only (the imputed value is the feature's mean, so it adds no covariance). The
        pipeline's discover stage uses ``"mean"`` on data whose modality marks missing values
        with NaN (methylation, proteomics; ingest rejects NaN elsewhere).
    device
        ``"auto"`` (cuda if available), ``"cpu"``, ``"cuda"``: where the fits run (for the
        regression algorithm: the screen, the regressions and the jackknife; its orientation
        and p-values run on the CPU).
    seed
        Seed of the local torch generators (global RNG state is left alone for ``"cape"``;
        dagma's global-RNG draws are seeded with it and restored afterwards).
    covariates
        ``"cape"``: cell-level covariates regressed out of every feature before any algorithm
        fits: ``"auto"`` (default: for single-cell data the log library size where preprocess
        recorded it, ``obs["cape_library_size"]``; otherwise none), ``"none"``, ``"states"``,
        ``"library"`` or ``"states+library"``. Cell states guard against hidden programs shared
        by many genes and cost recall where regulators drive the states
        (:data:`~cape_pipeline.causal.algorithms.COVARIATES`). Recorded as ``params["covariates_used"]``.
    n_states
        ``"cape"``: number of cell states (k-means on 30 principal components) used as
        covariates; None (default): ``min(30, max(2, N // 100))``.
    max_edges_per_row
        Per-row cap on the output graph, the strongest ``|weight|`` first (methods ``"cape"``,
        ``"correlation"``, ``"partial-correlation"``). None (default): every entry above τ for
        M ≤ 5000, else 200.
    regression
        ``"cape"``: the options of the regression algorithm, a
        :class:`~cape_pipeline.causal.regression.config.RegressionConfig` or a dict of its fields
        (``min_effect``, ``fdr``, ``n_splits``, ``regulators``, ``interventions``, …).
    low_rank
        ``"cape"``: the options of the low-rank algorithm, a
        :class:`~cape_pipeline.causal.lowrank.config.LowRankConfig` or a dict of its fields
        (``rank``, ``threshold``, ``epochs``, ``lr``, ``posterior``, …).
    screened
        ``"cape"``: the options of the screened algorithm, a
        :class:`~cape_pipeline.causal.screened.config.ScreenedConfig` or a dict of its fields.
    learned
        ``"cape"``: the options of the learned algorithm, a
        :class:`~cape_pipeline.causal.learned.config.LearnedConfig` or a dict of its fields.
    method_options
        Options of a baseline method (empty by default), e.g. gcastle's constructor options;
        for ``"correlation"`` and ``"partial-correlation"`` ``threshold`` (τ on ``|r|``,
        ``|ρ|``; 0.2), for ``"partial-correlation"`` ``alpha`` (``"auto"``: ``GraphicalLassoCV``
        for M ≤ 200, else ``GraphicalLasso`` at ``√(log M / N)``; ``"cv"``; or a number > 0, see
        :func:`~cape_pipeline.causal.baselines.partial_correlation_graph`); for ``"dagma"`` /
        ``"dagma-mlp"`` the package's ``fit`` options (``lambda1``, ``w_threshold``, ``T``,
        ``mu_init``, ``mu_factor``, ``s``, ``warm_iter``, ``max_iter``, ``lr``, …),
        ``loss_type`` (linear), ``hidden`` and ``bias`` (MLP, ``dims=[M, hidden, 1]``), see
        :func:`~cape_pipeline.causal.baselines.dagma_weights`. Must be empty for ``"cape"``.

    Raises
    ------
    CapeConfigError
        Naming the option and what was expected: unknown method or algorithm, a value out of
        range or of the wrong type (``regression.fdr: …``), an option of an algorithm that an
        explicit ``algorithm`` does not run, an option of another method, CUDA requested where
        there is none.
    """

    method: str = "cape"
    algorithm: str = ALGORITHMS[0]
    missing: str = "error"
    device: str = "auto"
    seed: int = 0
    covariates: str = COVARIATES[0]
    n_states: int | None = None
    max_edges_per_row: int | None = None
    regression: RegressionConfig = field(default_factory=RegressionConfig)
    low_rank: LowRankConfig = field(default_factory=LowRankConfig)
    screened: ScreenedConfig = field(default_factory=ScreenedConfig)
    learned: LearnedConfig = field(default_factory=LearnedConfig)
    method_options: Mapping[str, Any] = field(default_factory=dict)
    support: InitVar[str | None] = None

    def __post_init__(self, support: str | None = None) -> None:
        if support is not None:
            warnings.warn("DiscoverConfig(support=...) is now DiscoverConfig(algorithm=...); the earlier name "
                          "will be removed", FutureWarning, stacklevel=3)
            if self.algorithm not in (ALGORITHMS[0], support):
                raise CapeConfigError(f"support is the earlier name of algorithm; give only algorithm, "
                                      f"got algorithm={self.algorithm!r} and support={support!r}")
            object.__setattr__(self, "algorithm", support)
        for name, cls in CONFIG_CLASSES.items():
            object.__setattr__(self, name, _algorithm_config(name, cls, getattr(self, name)))
        method = self.method
        if method not in (*METHODS, TRUE_DAG):
            raise CapeConfigError(f"method: expected one of {', '.join((*METHODS, TRUE_DAG))}, got {method!r}")
        if self.missing not in ("error", "mean"):
            raise CapeConfigError(f"missing: expected 'error' or 'mean', got {self.missing!r}")
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
                f"method_options: unknown option(s) {sorted(self.method_options)} for method 'cape'; the options "
                f"of an algorithm go in its config ({', '.join(CONFIG_CLASSES)})"
            )
        if self.algorithm not in ALGORITHMS:
            raise CapeConfigError(f"algorithm: expected one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")
        if self.covariates not in COVARIATES:
            raise CapeConfigError(f"covariates: expected one of {', '.join(COVARIATES)}, got {self.covariates!r}")
        if not (self.n_states is None or _is_int(self.n_states, 0)):
            raise CapeConfigError(f"n_states: expected an integer >= 0 or None, got {self.n_states!r}")
        if self.algorithm != "auto":
            own = ALGORITHM_FIELDS[self.algorithm]
            other = [k for k in self.options_set() if k.split(".")[0] != own]
            if other:
                raise CapeConfigError(
                    f"{', '.join(other)}: not used by algorithm={self.algorithm!r} (options of another algorithm); "
                    f"drop them, or set algorithm='auto' or the algorithm they belong to"
                )

    def _check_not_cape(self) -> None:
        cape_only = [k for k in _CAPE_ONLY if getattr(self, k) != getattr(_defaults(), k)] + self.options_set()
        if cape_only:
            raise CapeConfigError(
                f"{', '.join(cape_only)}: only for method 'cape', got method {self.method!r}; "
                "options of a baseline go in method_options"
            )
        allowed = _BASELINE_OPTIONS.get(self.method)
        unknown = sorted(set(self.method_options) - set(allowed or ()))
        if allowed is not None and unknown:
            raise CapeConfigError(
                f"method_options: unknown option(s) {unknown} for method {self.method!r}; "
                f"expected any of {sorted(allowed)}"
            )
        tau = self.method_options.get("threshold", BASELINE_THRESHOLD)
        if allowed is not None and "threshold" in allowed and not _is_num(tau, lambda f: f >= 0):
            raise CapeConfigError(f"method_options.threshold: expected a finite number >= 0, got {tau!r}")

    @classmethod
    def stage_params(cls, params: Mapping[str, Any], *, where: str = "discover.") -> dict[str, Any]:
        """The pipeline's parameters of this config with the earlier spellings mapped
        (:func:`~cape_pipeline.causal.options.nest_options`, messages in the ``where``
        spelling: ``discover.regression.fdr``) and the dotted names gathered per algorithm config.

        Raises
        ------
        CapeConfigError
            As :func:`~cape_pipeline.causal.options.nest_options`.
        """
        return nest_options(params, where=where)

    def options_set(self) -> list[str]:
        """The algorithm options that differ from their defaults, as ``"regression.fdr"``, in field
        order."""
        out = []
        for name, cls in CONFIG_CLASSES.items():
            cfg, default = getattr(self, name), cls()
            out += [f"{name}.{f.name}" for f in dataclasses.fields(cls) if getattr(cfg, f.name) != getattr(default, f.name)]
        return out

    def algorithm_for(self, n_features: int, n_obs: int | None = None, *, single_cell: bool = False) -> str:
        """The algorithm a fit on ``n_features`` features (and ``n_obs`` rows) uses (``"auto"``
        resolved by :func:`~cape_pipeline.causal.algorithms.resolve_algorithm`)."""
        return resolve_algorithm(self.algorithm, n_features, n_obs, single_cell=single_cell)

    def config_of(self, algorithm: str) -> Any:
        """The config of ``algorithm`` (``"regression"``, ``"low-rank"``, ``"screened"``,
        ``"learned"``; not ``"auto"``)."""
        return getattr(self, ALGORITHM_FIELDS[algorithm])


def _algorithm_config(name: str, cls: type, value: Any) -> Any:
    """``value`` as a ``cls``: itself, or a ``cls`` built from a dict of its fields."""
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise CapeConfigError(f"{name}: expected a {cls.__name__} or a dict of its fields, got {value!r}")
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(value) - set(known))
    if unknown:
        hint = "".join(did_you_mean(str(u), known, prefix=f"{name}.") for u in unknown)
        raise CapeConfigError(f"{name}: unknown option(s) {unknown}{hint}; known: {', '.join(known)}")
    try:
        return cls(**value)
    except CapeConfigError as exc:
        raise CapeConfigError(f"{name}.{exc}") from None


@functools.cache
def _defaults() -> DiscoverConfig:
    return DiscoverConfig()


FIELDS = tuple(f.name for f in dataclasses.fields(DiscoverConfig))

_DATACLASS_INIT = DiscoverConfig.__init__
_INIT_NAMES = frozenset(inspect.signature(_DATACLASS_INIT).parameters) - {"self"}


@functools.wraps(_DATACLASS_INIT)
def _init(self: DiscoverConfig, *args: Any, **kwargs: Any) -> None:
    # an option the constructor does not take is a CapeConfigError naming its current spelling
    unknown = [k for k in kwargs if k not in _INIT_NAMES]
    if unknown:
        hints = [
            f"{k} belongs to " + " or ".join(f"{name}={{{k!r}: ...}}" for name in FLAT_OPTIONS[k])
            if k in FLAT_OPTIONS else f"{k} is not an option{did_you_mean(k, sorted(_INIT_NAMES))}"
            for k in unknown
        ]
        flat = any(k in FLAT_OPTIONS for k in unknown)
        raise CapeConfigError(
            "DiscoverConfig: " + "; ".join(hints)
            + (" (the keyword API, causal.discover(x, **options), still maps the flat names)" if flat else "")
        )
    _DATACLASS_INIT(self, *args, **kwargs)


DiscoverConfig.__init__ = _init  # type: ignore[method-assign]


def resolve_config(
    config: DiscoverConfig | None, options: Mapping[str, Any]
) -> tuple[DiscoverConfig, list[str]]:
    """``config`` (default: the defaults) with ``options`` put in (``dataclasses.replace``).

    The earlier spellings are mapped by :func:`nest_options` (with a FutureWarning). An
    algorithm's options given as a dict update that algorithm's config of ``config``
    (``regression={"fdr": 0.1}`` keeps its other fields); a config instance replaces it. Keywords
    that are not fields are a baseline's options (``method_options``) when the method is not
    ``"cape"``.

    Returns
    -------
    config, explicit
        The validated config, and the names of the options that were set (those that differ from
        the defaults, nested ones as ``"regression.fdr"``, and the keys of ``method_options``).

    Raises
    ------
    CapeConfigError
        An unknown option for method ``"cape"`` (named, with the known ones), or any check of
        :func:`nest_options` and :class:`DiscoverConfig`.
    """
    if config is not None and not isinstance(config, DiscoverConfig):
        raise CapeConfigError(f"config: expected a DiscoverConfig or None, got {type(config).__name__}")
    base = config if config is not None else _defaults()
    options = nest_options(options, base.method, base.algorithm, base.method_options)
    method = options.get("method", base.method)
    fields = {k: v for k, v in options.items() if k in FIELDS}
    extra = {k: v for k, v in options.items() if k not in FIELDS}
    if method == "cape" and extra:
        known = [*FIELDS, *FLAT_OPTIONS]
        hint = "".join(did_you_mean(str(u), known) for u in sorted(extra))
        raise CapeConfigError(
            f"unknown option(s) {sorted(extra)} for method 'cape'{hint}; expected any of {sorted(FIELDS)}"
        )
    if extra:
        fields["method_options"] = {**base.method_options, **fields.get("method_options", {}), **extra}
    for name, cls in CONFIG_CLASSES.items():
        if isinstance(fields.get(name), Mapping):
            current = getattr(base, name)
            fields[name] = _algorithm_config(name, cls, {**{f.name: getattr(current, f.name) for f in
                                                            dataclasses.fields(cls)}, **fields[name]})
    cfg = dataclasses.replace(base, **fields) if fields else base
    default = _defaults()
    explicit = [k for k in FIELDS if k not in ("method_options", *CONFIG_CLASSES) and getattr(cfg, k) != getattr(default, k)]
    explicit += cfg.options_set() + [k for k in cfg.method_options if k not in explicit]
    return cfg, explicit


def check_options(method: str = "cape", **options: Any) -> DiscoverConfig:
    """Validate the options of :func:`~cape_pipeline.causal.api.discover` without touching data
    (the pipeline itself builds :class:`DiscoverConfig`, which does the same checks).

    Takes the options as ``discover`` does: the fields of :class:`DiscoverConfig`, an algorithm's
    options as a dict (``regression={"fdr": 0.1}``) or, for one release, flat (``fdr=0.1``, with
    a FutureWarning), and a baseline's options as keywords.

    Returns
    -------
    DiscoverConfig
        The validated options.

    Raises
    ------
    CapeConfigError
        As :func:`resolve_config`.
    """
    return resolve_config(None, {"method": method, **options})[0]
