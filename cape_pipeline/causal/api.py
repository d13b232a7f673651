"""Public entry point of Step I: :func:`discover` (paper 000, Sec. 3.3, Eqs. 5–10, Supp. G.4)."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch

from cape_pipeline.causal.baselines import (
    _PARTIAL_KWARGS,
    DAGMA_METHODS,
    GCASTLE_METHODS,
    _check_kwargs,
    correlation_graph,
    dagma_weights,
    gcastle_weights,
    partial_correlation_graph,
)
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.causal.model import POSTERIORS
from cape_pipeline.causal.postprocess import break_cycles, threshold_low_rank, threshold_matrix
from cape_pipeline.causal.screened import fit_screened
from cape_pipeline.causal.solver import ACYCLICITY, SolverConfig, fit_low_rank_vae
from cape_pipeline.errors import CapeConfigError, CapeDataError

__all__ = ["DEFAULT_ACYCLICITY", "METHODS", "check_options", "discover", "discover_scored", "prepare_matrix"]

logger = logging.getLogger(__name__)

METHODS = ("cape", "correlation", "partial-correlation", *GCASTLE_METHODS, *DAGMA_METHODS)
DEFAULT_ACYCLICITY = "spectral"
#: above this many features the final adjacency is formed with a per-row cap
SPARSE_ABOVE = 5000
_CAPE_KWARGS = {
    "h_tol",
    "rho_max",
    "rho_init",
    "hidden",
    "power_iters",
    "weight_decay",
    "init_scale",
    "max_edges_per_row",
    "l1",
    "l1_exact_max",
    "l1_pairs",
    "dag_threshold",
    "min_steps",
    "posterior",
    "support",
    "n_candidates",
}
#: how A is parameterised for method "cape": the paper's low rank, or screened sparse
SUPPORTS = ("low-rank", "screened")
#: paper 000, Supp. F.4: 100 epochs
DEFAULT_EPOCHS = 100
#: with ``epochs=None`` the budget is raised to at least this many AdamW steps (see discover)
DEFAULT_MIN_STEPS = 5000


def resolve_epochs(epochs: int | None, n_obs: int, batch_size: int, min_steps: int = DEFAULT_MIN_STEPS) -> int:
    """Epoch budget of a run: ``epochs`` when given, else ``max(100, ⌈min_steps / B⌉)``.

    ``B = ⌈N / batch_size⌉`` is the number of AdamW steps per epoch. The paper's 100 epochs
    (Supp. F.4) were set for single-cell data with 10⁴–10⁵ cells; below about 6,400 rows they
    are fewer than 5,000 steps and the fit is visibly under-converged (measured in
    ``benchmarks/discover/RESULTS.md``: a 5-node Gaussian chain, N = 600, has skeleton F1
    0.85 at 100 epochs = 500 steps and 1.0 at 5,000 steps on seeds 0–2).

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


def _cap_rows(adj: sp.csr_array, k: int) -> sp.csr_array:
    """Keep the ``k`` strongest ``|weight|`` out-edges of every row of a sparse adjacency."""
    adj = sp.csr_array(adj)
    lengths = np.diff(adj.indptr)
    if lengths.max(initial=0) <= k:
        return adj
    coo = adj.tocoo()
    order = np.lexsort((-np.abs(coo.data), coo.row))
    rank = np.arange(order.size) - np.repeat(adj.indptr[:-1], lengths)
    keep = order[rank < k]
    return sp.csr_array((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=adj.shape)


def _names_list(names: Any, limit: int = 5) -> str:
    names = [str(n) for n in names]
    more = f" (+{len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(repr(n) for n in names[:limit]) + more


def prepare_matrix(
    data: Any, feature_names: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Validate input data and standardize each feature (mean 0, population sd 1).

    Parameters
    ----------
    data
        AnnData (``.X`` dense or scipy.sparse, ``.var_names``), pandas DataFrame (columns =
        features) or ``(N, M)`` array-like.
    feature_names
        Names for an array input (default ``x0 … x{M-1}``); overrides AnnData/DataFrame names
        when given.

    Returns
    -------
    x_std, names
        ``(N, M)`` float64 standardized matrix and ``(M,)`` object array of names.

    Raises
    ------
    CapeDataError
        Wrong dimensionality, N < 2, M < 2, non-numeric columns, NaN/inf (columns named),
        all-missing or constant features (named), or a name list of the wrong length.
    """
    names: Any = None
    if hasattr(data, "X") and hasattr(data, "var_names"):
        x = data.X
        names = np.asarray(data.var_names, dtype=object)
        if sp.issparse(x):
            x = x.toarray()
        x = np.asarray(x)
    elif isinstance(data, pd.DataFrame):
        bad = [c for c in data.columns if not pd.api.types.is_numeric_dtype(data[c])]
        if bad:
            raise CapeDataError(f"data: non-numeric columns {_names_list(bad)}; expected numbers")
        names = np.asarray(data.columns.astype(str), dtype=object)
        x = data.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        if sp.issparse(data):
            data = data.toarray()
        x = np.asarray(data)
    if x.dtype.kind not in "biuf":
        raise CapeDataError(f"data: expected a numeric matrix, got dtype {x.dtype}")
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise CapeDataError(f"data: expected a 2-D (N observations, M features) matrix, got shape {x.shape}")
    n, m = x.shape
    if feature_names is not None:
        names = np.asarray([str(f) for f in feature_names], dtype=object)
    if names is None:
        names = np.asarray([f"x{i}" for i in range(m)], dtype=object)
    if names.shape != (m,):
        raise CapeDataError(f"feature_names: expected {m} names (one per column), got {names.size}")
    if n < 2:
        raise CapeDataError(f"data: expected at least 2 observations (rows), got {n}")
    if m < 2:
        raise CapeDataError(f"data: expected at least 2 features (columns), got {m}")
    finite = np.isfinite(x)
    if not finite.all():
        all_missing = ~finite.any(axis=0) & np.isnan(x).all(axis=0)
        if all_missing.any():
            raise CapeDataError(f"data: features {_names_list(names[all_missing])} are all missing (NaN)")
        bad = ~finite.all(axis=0)
        raise CapeDataError(
            f"data: features {_names_list(names[bad])} contain NaN or inf; impute or drop them first"
        )
    mean = x.mean(axis=0)
    sd = x.std(axis=0)
    const = ~(sd > 1e-12 * np.maximum(1.0, np.abs(mean)))
    if const.any():
        raise CapeDataError(f"data: features {_names_list(names[const])} are constant; drop them first")
    return (x - mean) / sd, names


def check_options(
    method: str = "cape",
    *,
    rank: int = 40,
    lambda_sparse: float = 1.0,
    threshold: float = 0.2,
    epochs: int | None = None,
    batch_size: int = 128,
    lr: float = 3e-3,
    max_outer: int = 20,
    acyclicity: str = DEFAULT_ACYCLICITY,
    device: Any = "auto",
    **method_kwargs: Any,
) -> None:
    """Validate the options of :func:`discover` without touching data (the pipeline calls this
    for every stage before the first one runs).

    Parameters are those of :func:`discover`; ``method_kwargs`` are its method options
    (``posterior``, ``min_steps``, ``support``, ``n_candidates`` and the solver options of
    method ``"cape"``).

    Raises
    ------
    CapeConfigError
        Naming the option and what was expected: unknown method, a value out of range or of the
        wrong type, an option of another method, CUDA requested where there is none.
    """
    if method not in METHODS:
        raise CapeConfigError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    finite = math.isfinite
    checks = {
        "rank": (rank, lambda v: isinstance(v, (int, np.integer)) and v >= 1, "an integer >= 1"),
        "lambda_sparse": (lambda_sparse, lambda v: finite(float(v)) and float(v) >= 0, "a finite number >= 0"),
        "threshold": (threshold, lambda v: finite(float(v)) and float(v) >= 0, "a finite number >= 0"),
        "epochs": (
            epochs, lambda v: v is None or (isinstance(v, (int, np.integer)) and v >= 1), "an integer >= 1 or None"
        ),
        "batch_size": (batch_size, lambda v: isinstance(v, (int, np.integer)) and v >= 1, "an integer >= 1"),
        "lr": (lr, lambda v: finite(float(v)) and float(v) > 0, "a finite number > 0"),
        "max_outer": (max_outer, lambda v: isinstance(v, (int, np.integer)) and v >= 1, "an integer >= 1"),
        "acyclicity": (acyclicity, lambda v: v in ACYCLICITY, f"one of {', '.join(ACYCLICITY)}"),
    }
    for key, (value, ok, what) in checks.items():
        try:
            good = bool(ok(value)) and not isinstance(value, bool)
        except (TypeError, ValueError):
            good = False
        if not good:
            raise CapeConfigError(f"{key}: expected {what}, got {value!r}")
    dev = device
    if not (dev == "auto" or isinstance(dev, torch.device)):
        try:
            torch.device(dev)
        except (RuntimeError, TypeError) as exc:
            raise CapeConfigError(f"device: expected 'auto', 'cpu' or 'cuda[:i]', got {dev!r}") from exc
    if str(dev).startswith("cuda") and not torch.cuda.is_available():
        raise CapeConfigError(f"device: {dev!r} requested but CUDA is not available; use 'auto' or 'cpu'")
    if method == "cape":
        unknown = set(method_kwargs) - _CAPE_KWARGS
        if unknown:
            raise CapeConfigError(
                f"method_kwargs: unknown option(s) {sorted(unknown)} for method 'cape'; "
                f"expected any of {sorted(_CAPE_KWARGS)}"
            )
    cape_only = sorted({"posterior", "min_steps", "support", "n_candidates"} & set(method_kwargs))
    if method != "cape" and cape_only:
        raise CapeConfigError(f"{', '.join(cape_only)}: only for method 'cape', got method {method!r}")
    if method == "cape" and method_kwargs.get("posterior", POSTERIORS[0]) not in POSTERIORS:
        raise CapeConfigError(
            f"posterior: expected one of {', '.join(POSTERIORS)}, got {method_kwargs['posterior']!r}"
        )
    support = method_kwargs.get("support", SUPPORTS[0])
    n_candidates = method_kwargs.get("n_candidates", 20)
    if method == "cape":
        if support not in SUPPORTS:
            raise CapeConfigError(f"support: expected one of {', '.join(SUPPORTS)}, got {support!r}")
        if isinstance(n_candidates, bool) or not isinstance(n_candidates, (int, np.integer)) or n_candidates < 1:
            raise CapeConfigError(f"n_candidates: expected an integer >= 1, got {n_candidates!r}")
        if support == "screened":
            bad = sorted(set(method_kwargs) & {"l1", "l1_exact_max", "l1_pairs", "init_scale", "h_tol"})
            if method_kwargs.get("posterior", "mean") != "mean":
                bad.append("posterior")
            if acyclicity != "spectral":
                bad.append("acyclicity")
            if bad:
                raise CapeConfigError(
                    f"{', '.join(bad)}: not used with support='screened' (exact sparse ‖A‖₁, "
                    "spectral acyclicity, posterior 'mean'); drop them or use support='low-rank'"
                )
    min_steps = method_kwargs.get("min_steps", DEFAULT_MIN_STEPS)
    if isinstance(min_steps, bool) or not isinstance(min_steps, (int, np.integer)) or min_steps < 0:
        raise CapeConfigError(f"min_steps: expected an integer >= 0, got {min_steps!r}")


def discover_scored(
    data: Any,
    *,
    method: str = "cape",
    rank: int = 40,
    lambda_sparse: float = 1.0,
    threshold: float = 0.2,
    epochs: int | None = None,
    batch_size: int = 128,
    lr: float = 3e-3,
    acyclicity: str = DEFAULT_ACYCLICITY,
    device: str = "auto",
    seed: int = 0,
    feature_names: Any = None,
    progress: bool = False,
    max_outer: int = 20,
    **method_kwargs: Any,
) -> tuple[CausalGraph, np.ndarray | None]:
    """:func:`discover`, also returning the continuous edge scores before thresholding.

    Returns
    -------
    graph, scores
        The :class:`CausalGraph` of :func:`discover`, and the dense ``(M, M)`` float64
        matrix of continuous weights (``A = U Vᵀ`` with zero diagonal for ``"cape"``,
        correlations for ``"correlation"``, partial correlations for
        ``"partial-correlation"``, the method's weights for gcastle and dagma) when
        ``M <= 5000``, else None. Used for AUPRC in the benchmarks.
    """
    check_options(
        method,
        rank=rank,
        lambda_sparse=lambda_sparse,
        threshold=threshold,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        max_outer=max_outer,
        acyclicity=acyclicity,
        device=device,
        **method_kwargs,
    )
    support = method_kwargs.pop("support", SUPPORTS[0]) if method == "cape" else None
    n_candidates = method_kwargs.pop("n_candidates", 20) if method == "cape" else None
    min_steps = method_kwargs.pop("min_steps", DEFAULT_MIN_STEPS) if method == "cape" else DEFAULT_MIN_STEPS
    x_std, names = prepare_matrix(data, feature_names)
    n, m = x_std.shape
    eff_epochs = resolve_epochs(epochs, n, batch_size, min_steps)
    if epochs is None and eff_epochs > DEFAULT_EPOCHS and method == "cape":
        logger.info(
            "epochs=None: %d rows at batch size %d; using %d epochs (at least %d AdamW steps)",
            n, batch_size, eff_epochs, min_steps,
        )
    eff_rank = int(rank)
    if eff_rank >= m:
        eff_rank = m - 1
        logger.info("rank %d >= number of features %d; using rank %d", rank, m, eff_rank)
    params: dict[str, Any] = {
        "method": method,
        "rank": int(rank),
        "effective_rank": eff_rank,
        "lambda_sparse": float(lambda_sparse),
        "threshold": float(threshold),
        "epochs": None if epochs is None else int(epochs),
        "effective_epochs": int(eff_epochs),
        "min_steps": int(min_steps),
        "batch_size": int(batch_size),
        "lr": float(lr),
        "acyclicity": acyclicity,
        "device": str(device),
        "seed": int(seed),
        "max_outer": int(max_outer),
        "n_obs": int(n),
        "n_vars": int(m),
        **{k: v for k, v in method_kwargs.items()},
    }
    if method == "cape":
        params["support"] = support
        if support == "screened":
            params["n_candidates"] = int(n_candidates)
            params["posterior"] = "mean"
    t0 = time.perf_counter()
    max_per_row = method_kwargs.get("max_edges_per_row")
    if max_per_row is None and m > SPARSE_ABOVE:
        max_per_row = 200
    scores: np.ndarray | None = None
    history: list[dict[str, Any]] = []
    n_dropped = 0
    common = {
        "rank": eff_rank,
        "lambda_sparse": float(lambda_sparse),
        "epochs": int(eff_epochs),
        "batch_size": int(batch_size),
        "lr": float(lr),
        "acyclicity": acyclicity,
        "max_outer": int(max_outer),
        "seed": int(seed),
    }
    if method == "cape" and support == "screened":
        used = {"rho_max", "rho_init", "hidden", "power_iters", "weight_decay"}
        config = SolverConfig(**common, **{k: v for k, v in method_kwargs.items() if k in used})
        fit = fit_screened(
            torch.from_numpy(x_std.astype(np.float32)),
            config,
            n_candidates=int(n_candidates),
            threshold=float(threshold),
            device=device,
            progress=progress,
        )
        history = fit.history
        adj = fit.adjacency(float(threshold))
        if max_per_row is not None:
            adj = _cap_rows(adj, int(max_per_row))
        adj, n_dropped = break_cycles(adj)
        if m <= SPARSE_ABOVE:
            scores = fit.scores()
        params["device"] = str(fit.model.w.device) if fit.model is not None else str(device)
        params["n_candidate_columns"] = int(fit.parents.shape[1])
        params["screen_seconds"] = float(fit.screen_seconds)
    elif method == "cape":
        solver_kwargs = {k: v for k, v in method_kwargs.items() if k != "max_edges_per_row"}
        # hold the AL penalty once the τ-thresholded output is a DAG (SolverConfig.dag_threshold)
        solver_kwargs.setdefault("dag_threshold", float(threshold))
        solver_kwargs["dag_max_edges_per_row"] = max_per_row  # the check sees the output graph
        config = SolverConfig(**common, **solver_kwargs)
        res = fit_low_rank_vae(
            torch.from_numpy(x_std.astype(np.float32)), config, device=device, progress=progress
        )
        history = res.history
        # on the factors' device (a GPU makes this O(M² r) pass cheap); same values as res.u/v
        fu, fv = (res.model.u, res.model.v) if res.model is not None else (res.u, res.v)
        adj = threshold_low_rank(fu, fv, float(threshold), max_edges_per_row=max_per_row)
        adj, n_dropped = break_cycles(adj)
        if m <= SPARSE_ABOVE:
            scores = res.u @ res.v.T
            np.fill_diagonal(scores, 0.0)
        params["device"] = str(res.model.u.device) if res.model is not None else str(device)
    elif method == "correlation":
        adj = correlation_graph(x_std, float(threshold), max_edges_per_row=max_per_row)
        if m <= SPARSE_ABOVE:
            scores = correlation_graph(x_std, -1.0).toarray()
        params["is_dag"] = False
    elif method == "partial-correlation":
        _check_kwargs(method, method_kwargs, _PARTIAL_KWARGS)
        adj, rho, alpha_used = partial_correlation_graph(
            x_std,
            float(threshold),
            alpha=method_kwargs.get("alpha", "auto"),
            max_edges_per_row=max_per_row,
        )
        if m <= SPARSE_ABOVE:
            scores = rho
        params["alpha_used"] = alpha_used
        params["is_dag"] = False
    elif method in DAGMA_METHODS:
        w, opts = dagma_weights(x_std, method, seed=seed, progress=progress, **method_kwargs)
        scores = w.copy()
        params.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in opts.items()})
        params["threshold"] = f"dagma w_threshold ({opts['w_threshold']})"
        # dagma's own rule: zero |W| < w_threshold; cycles (if any survive) are broken as for CAPE
        kept = np.where(np.abs(w) >= float(opts["w_threshold"]), w, 0.0)
        adj, n_dropped = break_cycles(threshold_matrix(kept, 0.0))
    else:
        if method == "notears-low-rank":
            method_kwargs = dict(method_kwargs)
            w, binary = gcastle_weights(x_std, method, seed=seed, rank=eff_rank, **method_kwargs)
        else:
            w, binary = gcastle_weights(x_std, method, seed=seed, **method_kwargs)
        scores = w.copy()
        np.fill_diagonal(scores, 0.0)
        params["threshold"] = "gcastle default (0.3)"
        adj, n_dropped = break_cycles(threshold_matrix(np.where(binary != 0, w, 0.0), 0.0))
    params["seconds"] = time.perf_counter() - t0
    graph = CausalGraph(
        feature_names=names,
        adjacency=adj,
        history=history,
        params=params,
        n_cycle_edges_dropped=int(n_dropped),
    )
    return graph, scores


def discover(
    data: Any,
    *,
    method: str = "cape",
    rank: int = 40,
    lambda_sparse: float = 1.0,
    threshold: float = 0.2,
    epochs: int | None = None,
    batch_size: int = 128,
    lr: float = 3e-3,
    acyclicity: str = DEFAULT_ACYCLICITY,
    device: str = "auto",
    seed: int = 0,
    feature_names: Any = None,
    progress: bool = False,
    max_outer: int = 20,
    **method_kwargs: Any,
) -> CausalGraph:
    """Learn a weighted causal DAG over the features of ``data`` (CAPE Step I).

    With ``method="cape"`` this fits the low-rank NOTEARS-VAE of paper 000: SEM
    ``f(X) = f(X) A + Z`` (Eq. 5), encoder ``Z = f(X)(I − A)`` (Eq. 6), decoder
    ``X̂ = f⁻¹(Z (I − A)⁻¹)`` (Eq. 7), loss ``−ELBO + λs‖A‖₁ + (ρ/2)h² + αh`` (Eqs. 8–10) with
    ``A = U Vᵀ`` of rank r (Supp. G.4), solved by the augmented Lagrangian (the penalty is held
    once the τ-thresholded graph is a DAG, see ``dag_threshold`` below); then thresholds
    ``|A| > τ`` and drops the weakest edge of every remaining cycle. Per-epoch cost
    O(N·M·r + (N/B)·M·r²) plus, for the exact ‖A‖₁ used when M ≤ 1000, O((N/B)·M²·r) in row
    blocks; above that the sampled estimate costs O((N/B)·S·r) and no ``M × M`` matrix is
    formed during training (one sparse τ-thresholded graph is built per outer step).

    Parameters
    ----------
    data
        AnnData (``.X`` dense or scipy.sparse; ``.var_names``), pandas DataFrame (columns =
        features), or ``(N, M)`` ndarray with ``feature_names``. Each feature is standardized.
    method
        ``"cape"`` (default); ``"correlation"`` (the w/o-CSL ablation: ``|Pearson r| > τ``,
        symmetric with both directions present — **not a DAG**); ``"notears"``,
        ``"dag-gnn"``, ``"notears-low-rank"`` (gcastle 1.0.4 with its defaults and its own
        0.3 threshold; cycles are broken afterwards as for CAPE); ``"partial-correlation"``
        (graphical-lasso partial correlations ``|ρ| > τ``, symmetric like ``"correlation"``,
        **not a DAG**); ``"dagma"``, ``"dagma-mlp"`` (package ``dagma``: ``DagmaLinear`` and
        ``DagmaMLP`` + ``DagmaNonlinear`` with the package's defaults and its own
        ``w_threshold`` = 0.3 instead of τ; cycles broken as for CAPE).
    rank
        r of ``A = U Vᵀ`` (40). ``rank >= M`` is capped to ``M − 1`` (logged at INFO).
    lambda_sparse
        λs (Eq. 9), weight of ``‖A‖₁`` per batch of ``batch_size`` rows (see ``l1`` below).
    threshold
        τ on ``|A|`` (0.2); for ``"correlation"`` the threshold on ``|r|``.
    epochs, batch_size, lr
        AdamW budget over all outer steps (100 epochs, 128 rows, 3e-3; Supp. F.4).
        ``epochs=None`` (default) means the paper's 100 epochs, raised for small N to at
        least ``min_steps`` (5000) AdamW steps: ``max(100, ⌈min_steps / ⌈N / batch_size⌉⌉)``
        (see :func:`resolve_epochs`; e.g. N = 600 → 1000 epochs, N = 2000 → 313,
        N ≥ 6,400 → 100). The value used is ``params["effective_epochs"]``.
    acyclicity
        ``"spectral"`` (default: ρ(A∘A) by power iteration, NO-BEARS; chosen on the
        benchmarks in ``benchmarks/discover/RESULTS.md``) or ``"majorant"``
        (``tr exp(|V|ᵀ|U|) − r``).
    device
        ``"auto"`` (cuda if available), ``"cpu"``, ``"cuda"``.
    seed
        Seed of the local torch generators (global RNG state is left alone for ``"cape"``).
    feature_names
        Names for ndarray input; overrides other names when given.
    progress
        Show a rich progress bar (outer step, epochs, current h).
    max_outer
        Augmented-Lagrangian outer steps; each runs ``ceil(epochs / max_outer)`` epochs.
    **method_kwargs
        ``"cape"``: ``h_tol``, ``rho_max``, ``rho_init``, ``hidden``, ``power_iters``,
        ``weight_decay``, ``max_edges_per_row`` (default: all above τ for M ≤ 5000, else 200),
        ``l1`` (``"auto"``: exact ‖A‖₁ for M ≤ ``l1_exact_max`` = 500, else an unbiased
        estimate from ``l1_pairs`` sampled entries; or ``"exact"``, ``"sampled"``,
        ``"surrogate"``), ``dag_threshold`` (default τ: the augmented-Lagrangian penalty
        stops growing once ``|A| > τ`` is a DAG; None for the plain rule of Eq. 10),
        ``min_steps`` (5000, used with ``epochs=None``; 0 gives exactly 100 epochs),
        ``posterior`` (``"sampled"``, default: reparameterised Z with learned variance;
        ``"mean"``: decoder on μ and KL ½‖μ‖², as in the DAG-GNN reference code — fewer
        shrunk edges; compared in ``benchmarks/discover/RESULTS.md``),
        ``support`` (``"low-rank"``, default: the paper's ``A = U Vᵀ``; ``"screened"``: A
        sparse on screened candidate parents, for M in the thousands — two correlation
        rounds pick ``3·n_candidates`` candidates per feature, a first phase fits without the
        acyclicity term, the second runs the spectral augmented Lagrangian on the phase-1
        support ``|A| > τ`` until it is a DAG and then refits that DAG's weights; posterior
        ``"mean"``, exact sparse ‖A‖₁; O(N·M²) once for the screen in row blocks, then
        O(N·M·k) per epoch; see :func:`~cape_pipeline.causal.screened.fit_screened` and
        ``benchmarks/discover/RESULTS_scale.md``), ``n_candidates`` (20, k per screening
        round).
        gcastle methods: forwarded to the gcastle constructor.
        ``"partial-correlation"``: ``alpha`` (``"auto"``: ``GraphicalLassoCV`` for M ≤ 200,
        else ``GraphicalLasso`` at ``√(log M / N)``; ``"cv"``; or a number > 0) and
        ``max_edges_per_row``; see :func:`~cape_pipeline.causal.baselines.partial_correlation_graph`.
        ``"dagma"`` / ``"dagma-mlp"``: the package's ``fit`` options (``lambda1``,
        ``w_threshold``, ``T``, ``mu_init``, ``mu_factor``, ``s``, ``warm_iter``,
        ``max_iter``, ``lr``, …), ``loss_type`` (linear), ``hidden`` and ``bias`` (MLP,
        ``dims=[M, hidden, 1]``); see :func:`~cape_pipeline.causal.baselines.dagma_weights`.
        ``seed`` seeds dagma's global-RNG draws, which are restored afterwards.

    Returns
    -------
    CausalGraph
        ``adjacency`` ``(M, M)`` sparse float64 (``[m, n]``: weight of m → n), acyclic except
        for ``"correlation"``; ``params`` (method, every parameter, ``effective_rank``,
        ``seconds``); ``history`` (per outer step: ``recon``, ``kl``, ``neg_elbo``, ``l1``,
        ``h``, ``rho``, ``alpha``, ``epochs``, ``seconds``); ``n_cycle_edges_dropped``.

    Raises
    ------
    CapeDataError
        N < 2, M < 2, NaN/inf or all-missing features, constant features (all named).
    CapeConfigError
        An unknown method/acyclicity/option or an out-of-range parameter (named).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=500)
    >>> x = np.c_[a, 2 * a + rng.normal(size=500), rng.normal(size=500)]
    >>> g = discover(x, feature_names=["a", "b", "c"], epochs=5, device="cpu")
    >>> g.is_dag()
    True
    """
    graph, _ = discover_scored(
        data,
        method=method,
        rank=rank,
        lambda_sparse=lambda_sparse,
        threshold=threshold,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        acyclicity=acyclicity,
        device=device,
        seed=seed,
        feature_names=feature_names,
        progress=progress,
        max_outer=max_outer,
        **method_kwargs,
    )
    return graph
