"""Public entry point of Step I: :func:`discover` (paper 000, Sec. 3.3, Eqs. 5–10, Supp. G.4).

The options, their defaults and their checks are :class:`~cape_pipeline.causal.config.DiscoverConfig`;
the input checks are :func:`~cape_pipeline.causal._input.prepare_matrix`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import warnings
from typing import Any

import numpy as np
import pandas as pd

from cape_pipeline._keys import CONTROL_LABELS
from cape_pipeline.causal._input import prepare_matrix
from cape_pipeline.causal.algorithms import AlgorithmInputs, fit_algorithm
from cape_pipeline.causal.baselines import (
    DAGMA_METHODS,
    correlation_graph,
    dagma_weights,
    gcastle_weights,
    partial_correlation_graph,
)
from cape_pipeline.causal.config import (
    ALGORITHM_FIELDS,
    ALGORITHMS,
    BASELINE_THRESHOLD,
    DEFAULT_ACYCLICITY,
    DEFAULT_EPOCHS,
    DEFAULT_MIN_STEPS,
    METHODS,
    TRUE_DAG,
    DiscoverConfig,
    LowRankConfig,
    check_options,
    resolve_config,
)
from cape_pipeline.causal.covariates import (
    apply_covariates,
    cell_context,
    count_reliability,
    wants_thinning,
)
from cape_pipeline.causal.diagnostics import isolation_report
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.causal.postprocess import break_cycles, threshold_matrix
from cape_pipeline.errors import CapeConfigError, CapeWarning

__all__ = [
    "ALGORITHMS",
    "DEFAULT_ACYCLICITY",
    "METHODS",
    "DiscoverConfig",
    "check_options",
    "discover",
    "discover_scored",
    "prepare_matrix",
    "resolve_epochs",
]

logger = logging.getLogger(__name__)

#: above this many features the final adjacency is formed with a per-row cap
SPARSE_ABOVE = 5000


def resolve_epochs(epochs: int | None, n_obs: int, batch_size: int, min_steps: int = DEFAULT_MIN_STEPS) -> int:
    """Epoch budget of a run: ``epochs`` when given, else ``max(100, ⌈min_steps / B⌉)``.

    ``B = ⌈N / batch_size⌉`` is the number of AdamW steps per epoch. The paper's 100 epochs
    (Supp. F.4) were set for single-cell data with 10⁴–10⁵ cells; below about 6,400 rows they
    are fewer than 5,000 steps and the fit is visibly under-converged (a small Gaussian chain,
    100 epochs against 5,000 steps: ``benchmarks/discover/lowrank/RESULTS.md``).

    Parameters
    ----------
    epochs
        Explicit budget (returned unchanged) or None for the rule above.
    n_obs, batch_size
        N and the batch size (rows).
    min_steps
        Minimum number of optimizer steps for ``epochs=None``.

    Returns
    -------
    int
        Number of epochs, ≥ 1.
    """
    if epochs is not None:
        return int(epochs)
    steps_per_epoch = max(1, math.ceil(n_obs / max(1, min(batch_size, n_obs))))
    return max(DEFAULT_EPOCHS, math.ceil(int(min_steps) / steps_per_epoch))


def discover_scored(
    data: Any,
    config: DiscoverConfig | None = None,
    *,
    feature_names: Any = None,
    progress: bool = False,
    **options: Any,
) -> tuple[CausalGraph, np.ndarray | None]:
    """:func:`discover`, also returning the continuous edge scores before thresholding.

    Parameters are those of :func:`discover`.

    Returns
    -------
    graph, scores
        The :class:`CausalGraph` of :func:`discover`, and the dense ``(M, M)`` float64
        matrix of continuous weights (``A = U Vᵀ`` with zero diagonal for ``"cape"``,
        correlations for ``"correlation"``, partial correlations for
        ``"partial-correlation"``, the method's weights for gcastle and dagma) when
        ``M <= 5000``, else None. Used for AUPRC in the benchmarks.
    """
    cfg, explicit = resolve_config(config, options)
    if cfg.method == TRUE_DAG:
        raise CapeConfigError(
            "method: 'true-dag' takes the data's known graph and learns nothing; build that graph with "
            "CausalGraph.from_adjacency(adjacency, feature_names) (the pipeline's discover stage does)"
        )
    method, device, seed = cfg.method, cfg.device, cfg.seed
    method_options = dict(cfg.method_options)
    x_std, names = prepare_matrix(data, feature_names, missing=cfg.missing)
    n, m = x_std.shape
    single_cell, library = cell_context(data)
    algorithm = cfg.algorithm_for(m, n, single_cell=single_cell) if method == "cape" else None
    acfg = cfg.config_of(algorithm) if algorithm is not None else None
    reg = cfg.regression
    if reg.regulators is not None and algorithm is not None and algorithm != "regression":
        raise CapeConfigError(
            f"regression.regulators: used by algorithm='regression' only; algorithm={cfg.algorithm!r} chose "
            f"{algorithm!r} for these data; set algorithm='regression' or leave regulators out"
        )
    unused = [k for k in cfg.options_set() if algorithm is not None and k.split(".")[0] != ALGORITHM_FIELDS[algorithm]]
    if unused:
        logger.info("algorithm 'auto' chose %r for these data; unused: %s", algorithm, ", ".join(unused))
    iv = None
    label_warning = None
    if algorithm == "regression" and reg.interventions != "none" and hasattr(data, "obs"):
        from cape_pipeline.causal.interventions import (
            find_condition_column,
            intervention_targets,
            unread_label_columns,
        )

        column = (find_condition_column(data.obs, var_names=names) if reg.interventions == "auto"
                  else reg.interventions)
        if column is None and (unread := unread_label_columns(data.obs, names)):
            col, seen = next(iter(unread.items()))
            label_warning = (
                f"discover: obs[{col!r}] looks like perturbation labels ({', '.join(map(repr, seen))}, ...) but none "
                f"is a control label ({', '.join(CONTROL_LABELS[:6])}, ...; any case), so Step I ran without "
                f"interventions; if these cells were perturbed, label the control cells 'control' "
                f"(adata.obs[{col!r}] = adata.obs[{col!r}].replace({{'YOUR_CONTROL': 'control'}})), or set "
                "discover.regression.interventions=none to silence this"
            )
            warnings.warn(label_warning, CapeWarning, stacklevel=3)
        if column is not None:
            iv = intervention_targets(data.obs, names, column)
            if iv.keep_cells is not None and iv.n_left_out:
                # the cells without a usable label leave Step I before every row-wise step (standardizing,
                # covariates, reliability, the regressions); the caller's data are not changed
                del x_std
                data = data[iv.keep_cells]
                x_std, names = prepare_matrix(data, feature_names, missing=cfg.missing)
                n = x_std.shape[0]
                single_cell, library = cell_context(data)
    elif method == "cape" and reg.interventions not in ("auto", "none"):
        raise CapeConfigError(f"regression.interventions={reg.interventions!r}: only algorithm 'regression' uses "
                              f"interventions, this run uses {algorithm!r} (set algorithm='regression')")
    params: dict[str, Any] = {"method": method, "device": str(device), "seed": int(seed), "n_obs": int(n),
                              "n_vars": int(m)}
    if label_warning:
        params["warnings"] = [label_warning]
    params.update({k: getattr(cfg, k) for k in explicit if k in ("missing", "covariates", "n_states",
                                                                  "max_edges_per_row")})
    eff_rank = eff_epochs = None
    if algorithm is not None:
        params.update({"algorithm": algorithm, "support": algorithm, "algorithm_requested": cfg.algorithm,
                       "support_requested": cfg.algorithm})
        params.update({f.name: getattr(acfg, f.name) for f in dataclasses.fields(acfg) if f.name != "regulators"})
        if unused:
            params["unused_options"] = unused
    if algorithm in ("low-rank", "screened"):
        eff_epochs = resolve_epochs(acfg.epochs, n, acfg.batch_size, acfg.min_steps)
        if acfg.epochs is None and eff_epochs > DEFAULT_EPOCHS:
            logger.info(
                "epochs=None: %d rows at batch size %d; using %d epochs (at least %d AdamW steps)",
                n, acfg.batch_size, eff_epochs, acfg.min_steps,
            )
        params["effective_epochs"] = int(eff_epochs)
    if algorithm == "low-rank" or method == "notears-low-rank":
        rank = acfg.rank if algorithm == "low-rank" else method_options.pop("rank", LowRankConfig().rank)
        eff_rank = int(rank)
        if eff_rank >= m:
            eff_rank = m - 1
            logger.info("rank %d >= number of features %d; using rank %d", rank, m, eff_rank)
        params.update(rank=int(rank), effective_rank=eff_rank)
    if algorithm == "screened":
        params["posterior"] = "mean"
    threshold = float(acfg.threshold) if hasattr(acfg, "threshold") else float(
        method_options.pop("threshold", BASELINE_THRESHOLD) if method in ("correlation", "partial-correlation")
        else BASELINE_THRESHOLD)
    if method in ("correlation", "partial-correlation"):
        params["threshold"] = threshold
    params.update(method_options)
    regulators = None
    if algorithm == "regression" and reg.regulators is not None:
        from cape_pipeline.causal.regulators import resolve_regulators

        listed = resolve_regulators(reg.regulators, names, data)
        regulators = listed.index
        params["regulators"] = listed.summary()
    t0 = time.perf_counter()
    reliability = None
    if method == "cape":
        x_std, cov_params, labels = apply_covariates(x_std, cfg, single_cell=single_cell, library=library)
        params.update(cov_params)
        if algorithm == "regression" and library is not None and wants_thinning(reg.measurement_error):
            reliability = count_reliability(data, labels, library, seed=int(cfg.seed))
        if algorithm == "regression":
            params["measurement_error_used"] = "none" if reliability is None else "count thinning"
            if reliability is not None:
                params["median_reliability"] = float(np.median(reliability))
    max_per_row = cfg.max_edges_per_row
    if max_per_row is None and m > SPARSE_ABOVE:
        max_per_row = 200
    scores: np.ndarray | None = None
    edge_scores: pd.DataFrame | None = None
    history: list[dict[str, Any]] = []
    n_dropped = 0
    intervened = label_targets = None
    if iv is not None:
        intervened, label_targets = iv.targets, iv.n_label_targets
        if iv.keep_cells is not None and iv.n_left_out:
            rows = np.flatnonzero(iv.keep_cells)
            intervened = iv.targets[rows]
            label_targets = None if iv.n_label_targets is None else iv.n_label_targets[rows]
        params.update(iv.summary())
    if method == "cape":
        fit = fit_algorithm(algorithm, x_std, acfg, AlgorithmInputs(
            names=names, device=device, seed=int(seed), rank=eff_rank, epochs=eff_epochs, max_per_row=max_per_row,
            dense_scores=m <= SPARSE_ABOVE, progress=progress, reliability=reliability, intervened=intervened,
            label_targets=label_targets, regulators=regulators, unused=unused,
        ))
        adj, history, scores, n_dropped, edge_scores = (
            fit.adjacency, fit.history, fit.scores, fit.n_cycle_edges_dropped, fit.edge_scores
        )
        params.update(fit.params)
    elif method == "correlation":
        adj = correlation_graph(x_std, float(threshold), max_edges_per_row=max_per_row)
        if m <= SPARSE_ABOVE:
            scores = correlation_graph(x_std, -1.0).toarray()
        params["is_dag"] = False
    elif method == "partial-correlation":
        adj, rho, alpha_used = partial_correlation_graph(
            x_std,
            float(threshold),
            alpha=method_options.get("alpha", "auto"),
            max_edges_per_row=max_per_row,
        )
        if m <= SPARSE_ABOVE:
            scores = rho
        params["alpha_used"] = alpha_used
        params["is_dag"] = False
    elif method in DAGMA_METHODS:
        w, opts = dagma_weights(x_std, method, seed=seed, progress=progress, **method_options)
        scores = w.copy()
        params.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in opts.items()})
        params["threshold"] = f"dagma w_threshold ({opts['w_threshold']})"
        # dagma's own rule: zero |W| < w_threshold; cycles (if any survive) are broken as for CAPE
        kept = np.where(np.abs(w) >= float(opts["w_threshold"]), w, 0.0)
        adj, n_dropped = break_cycles(threshold_matrix(kept, 0.0))
    else:
        extra = {"rank": eff_rank} if method == "notears-low-rank" else {}
        w, binary = gcastle_weights(x_std, method, seed=seed, **extra, **method_options)
        scores = w.copy()
        np.fill_diagonal(scores, 0.0)
        params["threshold"] = "gcastle default (0.3)"
        adj, n_dropped = break_cycles(threshold_matrix(np.where(binary != 0, w, 0.0), 0.0))
    params["seconds"] = time.perf_counter() - t0
    diag = isolation_report(adj, m, threshold=threshold, method=method, algorithm=algorithm, scores=scores, n_obs=n,
                            min_effect=float(reg.min_effect))
    diag["warnings"] = [*params.get("warnings", []), *diag["warnings"]]  # the algorithm's own first
    params.update(diag)
    graph = CausalGraph(
        feature_names=names,
        adjacency=adj,
        history=history,
        params=params,
        n_cycle_edges_dropped=int(n_dropped),
        edge_scores=edge_scores,
    )
    return graph, scores


def discover(
    data: Any,
    config: DiscoverConfig | None = None,
    *,
    feature_names: Any = None,
    progress: bool = False,
    **options: Any,
) -> CausalGraph:
    """Learn a weighted causal DAG over the features of ``data`` (CAPE Step I).

    With ``method="cape"`` the default ``algorithm="auto"`` chooses from the data
    (:func:`~cape_pipeline.causal.algorithms.resolve_algorithm`). Data with at most 20 features
    (:data:`~cape_pipeline.causal.algorithms.AUTO_LOW_RANK_MAX`) or fewer than 50 rows
    (:data:`~cape_pipeline.causal.algorithms.LEARNED_MIN_OBS`) get the paper's low rank. Above
    that, single-cell data (an AnnData whose ingest or preprocess recorded modality ``scrna``,
    or that carries ``obs["cape_library_size"]``;
    :func:`~cape_pipeline.causal.covariates.cell_context`) get the
    regression algorithm (:func:`~cape_pipeline.causal.regression.fit_regression`: every feature
    regressed on its screened candidate parents after the cell-level covariates, an edge where
    its partial R² exceeds ``regression.min_effect`` at false-discovery rate ``regression.fdr``,
    repeated on ``regression.n_splits`` random splits of the cells;
    ``benchmarks/discover/counts/RESULTS.md``), and other data (arrays and DataFrames included)
    the learned algorithm
    (:func:`~cape_pipeline.causal.learned.fit_learned`: a learned screen of candidate parents,
    per-feature MLPs with the spectral acyclicity penalty, a greedy DAG and a refit; each
    edge's weight is its strength ``‖W₁‖₂ > τ/2``, a confidence to rank by), which finds real
    graphs at hundreds to thousands of features where the paper's rank-40 model keeps almost
    none (``benchmarks/discover/learned/RESULTS.md``).
    With ``algorithm="low-rank"`` (and ``"auto"`` at ≤ 20 features or < 50 rows) it fits the low-rank
    NOTEARS-VAE of paper 000: SEM
    ``f(X) = f(X) A + Z`` (Eq. 5), encoder ``Z = f(X)(I − A)`` (Eq. 6), decoder
    ``X̂ = f⁻¹(Z (I − A)⁻¹)`` (Eq. 7), loss ``−ELBO + λs‖A‖₁ + (ρ/2)h² + αh`` (Eqs. 8–10) with
    ``A = U Vᵀ`` of rank r (Supp. G.4), solved by the augmented Lagrangian (the penalty is held
    once the τ-thresholded graph is a DAG, see ``LowRankConfig.dag_threshold``); then thresholds
    ``|A| > τ`` and drops the weakest edge of every remaining cycle. Per-epoch cost
    O(N·M·r + (N/B)·M·r²) plus, for the exact ‖A‖₁ that ``l1="auto"`` (the default) uses when
    M ≤ ``l1_exact_max`` (500), O((N/B)·M²·r) in row blocks; above that the sampled estimate
    from S = ``l1_pairs`` (4096) entries costs O((N/B)·S·r) and no ``M × M`` matrix is
    formed during training (one sparse τ-thresholded graph is built per outer step).

    Parameters
    ----------
    data
        AnnData (``.X`` dense or scipy.sparse; ``.var_names``), pandas DataFrame (columns =
        features), or ``(N, M)`` ndarray with ``feature_names``. Each feature is standardized.
    config
        The options, a :class:`~cape_pipeline.causal.config.DiscoverConfig` (default: its
        defaults); ``options`` given too replace its fields (``dataclasses.replace``; an
        algorithm's options given as a dict update that algorithm's config).
    feature_names
        Names for ndarray input; overrides other names when given.
    progress
        Show a rich progress bar (outer step, epochs, current h).
    **options
        Fields of :class:`~cape_pipeline.causal.config.DiscoverConfig` (listed below); an
        algorithm's options go in its config, ``regression={"min_effect": 0.01}`` (the flat
        ``min_effect=0.01`` still works for one release, with a FutureWarning; a flat name that
        several algorithms have, ``epochs``, ``lr``, ``threshold``, …, needs an explicit
        ``algorithm``). With a baseline method, keywords that are not fields, e.g. ``hidden`` of
        ``"dagma-mlp"`` or ``threshold`` of ``"correlation"``, are that method's options
        (``method_options``).
    %(config_fields)s

    Returns
    -------
    CausalGraph
        ``adjacency`` ``(M, M)`` sparse float64 (``[m, n]``: weight of m → n), acyclic except
        for ``"correlation"``; ``params`` (method, ``algorithm`` and, for one release, the same
        value as ``support``, every option of the algorithm that ran, ``effective_rank``,
        ``seconds``); ``history`` (per outer step: ``recon``, ``kl``, ``neg_elbo``, ``l1``,
        ``h``, ``rho``, ``alpha``, ``epochs``, ``seconds``); ``n_cycle_edges_dropped``.

    Raises
    ------
    CapeDataError
        N < 2, M < 2, NaN/inf or all-missing features, constant features (all named);
        ``regression.regulators="var:COLUMN"`` without that boolean column; an ``interventions`` column that
        is missing, has no control cells or no label whose targets are all features.
    CapeConfigError
        An unknown method/algorithm/option or an out-of-range parameter (named), an option of
        an algorithm that an explicit ``algorithm`` does not run, a flat option of several
        algorithms with ``algorithm="auto"``, method ``"true-dag"`` (use
        :meth:`CausalGraph.from_adjacency` for a known graph), or ``regulators`` none of whose
        names is a feature, or with an algorithm other than ``"regression"``.
    CapeFileError
        A ``regulators`` file that is missing, unreadable or lists no names.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=500)
    >>> x = np.c_[a, 2 * a + rng.normal(size=500), rng.normal(size=500)]
    >>> g = discover(x, feature_names=["a", "b", "c"], low_rank={"epochs": 5}, device="cpu")
    >>> g.is_dag()
    True
    """
    graph, _ = discover_scored(data, config, feature_names=feature_names, progress=progress, **options)
    return graph


def _config_fields_doc() -> str:
    """The ``Attributes`` entries of :class:`DiscoverConfig`, as written there (one text)."""
    doc = DiscoverConfig.__doc__ or ""
    start = doc.find("    Attributes\n    ----------\n")
    stop = doc.find("\n\n    Raises\n")
    if start < 0 or stop < 0:  # pragma: no cover - docstrings stripped (python -OO)
        return ""
    return doc[start + len("    Attributes\n    ----------\n") : stop]


if discover.__doc__:
    # the options are documented once, on DiscoverConfig; discover's help lists them too
    discover.__doc__ = discover.__doc__.replace("    %(config_fields)s", _config_fields_doc())
