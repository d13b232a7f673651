"""The baseline methods of Step I (:mod:`cape_pipeline.causal.baselines`): correlation and
partial-correlation graphs, gcastle's and DAGMA's DAG learners.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp

from cape_pipeline._utils import BLOCK_ENTRIES, seeded_global_rngs
from cape_pipeline.errors import CapeConfigError

__all__ = [
    "DAGMA_METHODS",
    "GCASTLE_METHODS",
    "correlation_graph",
    "dagma_defaults",
    "dagma_weights",
    "gcastle_weights",
    "partial_correlation_graph",
    "partial_correlation_matrix",
]

GCASTLE_METHODS = ("notears", "dag-gnn", "notears-low-rank")


def correlation_graph(
    x_std: np.ndarray,
    threshold: float,
    *,
    max_edges_per_row: int | None = None,
) -> sp.csr_array:
    """Symmetric graph of Pearson correlations with ``|r| > threshold`` (w/o-CSL ablation).

    Computed in row blocks of the correlation matrix ``R = Xᵀ X / N`` (standardized X), so
    memory is O(N M + block·M + edges), never a dense ``M × M`` matrix for large M.

    Parameters
    ----------
    x_std
        ``(N, M)`` float, columns standardized to mean 0 and population sd 1.
    threshold
        Keep ``|r_mn| > threshold`` (m ≠ n).
    max_edges_per_row
        Keep at most this many strongest correlations per feature before symmetrising (None:
        all above the threshold).

    Returns
    -------
    scipy.sparse.csr_array
        ``(M, M)`` float64 with ``[m, n] = [n, m] = r_mn``: both directions are present, so
        the result is **not a DAG** (it is the undirected similarity graph of Table 3).
    """
    n, m = x_std.shape
    xs = np.asarray(x_std, dtype=np.float64) / np.sqrt(n)
    block = max(1, BLOCK_ENTRIES // max(m, 1))
    rows, cols, vals = [], [], []
    for start in range(0, m, block):
        stop = min(m, start + block)
        r = xs[:, start:stop].T @ xs  # (b, M)
        r[np.arange(stop - start), np.arange(start, stop)] = 0.0
        mag = np.abs(r)
        keep = mag > threshold
        if max_edges_per_row is not None and max_edges_per_row < m:
            kth = np.partition(mag, m - max_edges_per_row, axis=1)[:, m - max_edges_per_row]
            keep &= mag >= kth[:, None]
        i, j = np.nonzero(keep)
        rows.append(i + start)
        cols.append(j)
        vals.append(r[i, j])
    r_all, c_all, v_all = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    # union of both directions (a top-k cut may keep only one side); r_mn = r_nm
    src = np.concatenate([r_all, c_all])
    dst = np.concatenate([c_all, r_all])
    w = np.concatenate([v_all, v_all])
    _, first = np.unique(src.astype(np.int64) * m + dst, return_index=True)
    return sp.csr_array((w[first], (src[first], dst[first])), shape=(m, m))


def gcastle_weights(
    x_std: np.ndarray, method: str, *, seed: int = 0, rank: int | None = None, **kwargs: object
) -> tuple[np.ndarray, np.ndarray]:
    """Run a gcastle gradient method with its default settings.

    Parameters
    ----------
    x_std
        ``(N, M)`` standardized data.
    method
        ``"notears"``, ``"dag-gnn"`` or ``"notears-low-rank"``.
    seed
        Seed passed to gcastle (it seeds global numpy/torch state itself).
    rank
        Rank for ``NotearsLowRank`` (required there).
    **kwargs
        Forwarded to the gcastle constructor (e.g. ``epochs`` for DAG_GNN).

    Returns
    -------
    weights, binary
        ``(M, M)`` float64 continuous weights (``[m, n]``: m → n) and gcastle's own ``(M, M)``
        0/1 decision (its default threshold 0.3).

    Raises
    ------
    ValueError
        For an unknown method.
    """
    import torch
    from castle.algorithms import DAG_GNN, Notears, NotearsLowRank

    x = np.asarray(x_std, dtype=np.float64)
    np.random.seed(seed)
    if method == "notears":
        algo = Notears(**kwargs)
        algo.learn(x)
        w = np.asarray(algo.weight_causal_matrix, dtype=np.float64)
    elif method == "notears-low-rank":
        algo = NotearsLowRank(**kwargs)
        algo.learn(x, rank=int(rank if rank is not None else max(1, x.shape[1] // 2)))
        w = np.asarray(algo.weight_causal_matrix, dtype=np.float64)
    elif method == "dag-gnn":
        algo = DAG_GNN(seed=seed, **kwargs)
        algo.learn(x)
        with torch.no_grad():
            w = torch.sinh(3.0 * algo.encoder.adj_A).detach().cpu().double().numpy()
    else:
        raise ValueError(f"unknown gcastle method {method!r}; expected one of {GCASTLE_METHODS}")
    binary = np.asarray(algo.causal_matrix, dtype=np.int8)
    return w, binary


# ----------------------------------------------------------------------------------------------
# partial correlations (sklearn graphical lasso)
# ----------------------------------------------------------------------------------------------

#: up to this many features ``alpha="auto"`` picks the graphical-lasso penalty by cross-validation
PARTIAL_CV_MAX = 200


def _check_kwargs(method: str, kwargs: dict[str, Any], allowed: Iterable[str]) -> None:
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise CapeConfigError(
            f"method_kwargs: unknown option(s) {unknown} for method {method!r}; "
            f"expected any of {sorted(allowed)}"
        )


def partial_correlation_matrix(x_std: np.ndarray, *, alpha: float | str = "auto") -> tuple[np.ndarray, float]:
    """Partial correlations ``ρ_ij = −Θ_ij / √(Θ_ii Θ_jj)`` from a graphical-lasso precision Θ.

    Θ is the sparse inverse covariance of the standardized data, estimated by
    :class:`sklearn.covariance.GraphicalLassoCV` (penalty chosen by 5-fold cross-validated
    likelihood, sklearn defaults) or by :class:`sklearn.covariance.GraphicalLasso` at a fixed
    penalty (Friedman, Hastie & Tibshirani 2008). Entries that the lasso sets to zero are exact
    zeros of ρ (conditional independence under a Gaussian model). Deterministic (unshuffled
    folds); numpy's global RNG state is restored afterwards.

    Parameters
    ----------
    x_std
        ``(N, M)`` float, columns standardized to mean 0 and sd 1.
    alpha
        ``"auto"`` (default): cross-validation for ``M <= 200`` (:data:`PARTIAL_CV_MAX`);
        above that the CV path (4 refinements × 5 folds × a grid of penalties, each an O(M³)
        fit per sweep) becomes the cost, so the fixed penalty ``α = √(log M / N)`` is used, the
        rate at which graphical-lasso support recovery holds (Ravikumar et al. 2011, Thm. 1).
        ``"cv"``: always cross-validate. A number > 0: that fixed penalty.

    Returns
    -------
    rho, alpha_used
        ``(M, M)`` float64 symmetric partial correlations with zero diagonal, and the penalty
        that was used (the CV choice for ``"cv"``).

    Raises
    ------
    CapeConfigError
        If ``alpha`` is not ``"auto"``, ``"cv"`` or a number > 0.
    """
    from sklearn.covariance import GraphicalLasso, GraphicalLassoCV

    x = np.asarray(x_std, dtype=np.float64)
    n, m = x.shape
    if isinstance(alpha, str):
        if alpha not in ("auto", "cv"):
            raise CapeConfigError(f"alpha: expected 'auto', 'cv' or a number > 0, got {alpha!r}")
        use_cv = alpha == "cv" or m <= PARTIAL_CV_MAX
    else:
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.number)) or not alpha > 0:
            raise CapeConfigError(f"alpha: expected 'auto', 'cv' or a number > 0, got {alpha!r}")
        use_cv = False
    np_state = np.random.get_state()  # sklearn's coordinate descent draws a seed from it
    try:
        if use_cv:
            est = GraphicalLassoCV(assume_centered=True).fit(x)
            alpha_used = float(est.alpha_)
        else:
            alpha_used = float(alpha) if not isinstance(alpha, str) else float(np.sqrt(np.log(m) / n))
            est = GraphicalLasso(alpha=alpha_used, assume_centered=True).fit(x)
    finally:
        np.random.set_state(np_state)
    theta = np.asarray(est.precision_, dtype=np.float64)
    d = np.sqrt(np.diag(theta))
    rho = -theta / np.outer(d, d)
    rho = (rho + rho.T) / 2.0
    np.fill_diagonal(rho, 0.0)
    return rho, alpha_used


def partial_correlation_graph(
    x_std: np.ndarray,
    threshold: float,
    *,
    alpha: float | str = "auto",
    max_edges_per_row: int | None = None,
) -> tuple[sp.csr_array, np.ndarray, float]:
    """Symmetric graph of graphical-lasso partial correlations with ``|ρ| > threshold``.

    The same convention as :func:`correlation_graph`: the graph is undirected, so both
    ``m → n`` and ``n → m`` carry ``ρ_mn`` and the result is **not a DAG**; ``threshold`` and
    ``max_edges_per_row`` act on ``|ρ|`` exactly as on ``|r|`` there.

    Parameters
    ----------
    x_std
        ``(N, M)`` float, standardized columns.
    threshold
        Keep ``|ρ_mn| > threshold`` (m ≠ n); 0 keeps the graphical-lasso support.
    alpha
        Graphical-lasso penalty, see :func:`partial_correlation_matrix`.
    max_edges_per_row
        Keep at most this many strongest partial correlations per feature before symmetrising.

    Returns
    -------
    graph, rho, alpha_used
        ``(M, M)`` float64 sparse graph, the dense ``(M, M)`` float64 partial correlations and
        the penalty used.

    Raises
    ------
    CapeConfigError
        For a bad ``alpha`` or ``max_edges_per_row``.
    """
    if max_edges_per_row is not None and (
        isinstance(max_edges_per_row, bool)
        or not isinstance(max_edges_per_row, (int, np.integer))
        or max_edges_per_row < 1
    ):
        raise CapeConfigError(f"max_edges_per_row: expected an integer >= 1 or None, got {max_edges_per_row!r}")
    rho, alpha_used = partial_correlation_matrix(x_std, alpha=alpha)
    m = rho.shape[0]
    mag = np.abs(rho)
    keep = mag > threshold
    if max_edges_per_row is not None and max_edges_per_row < m:
        kth = np.partition(mag, m - max_edges_per_row, axis=1)[:, m - max_edges_per_row]
        keep &= mag >= kth[:, None]
    keep |= keep.T  # union of both directions, as in correlation_graph
    np.fill_diagonal(keep, False)
    i, j = np.nonzero(keep)
    return sp.csr_array((rho[i, j], (i, j)), shape=(m, m)), rho, alpha_used


# ----------------------------------------------------------------------------------------------
# DAGMA (Bello, Aragam & Ravikumar 2022), package ``dagma`` 1.1.x
# ----------------------------------------------------------------------------------------------

DAGMA_METHODS = ("dagma", "dagma-mlp")
#: options of ``DagmaLinear.fit`` / ``DagmaNonlinear.fit`` exposed as method kwargs
_DAGMA_FIT_KWARGS = {
    "dagma": ("lambda1", "w_threshold", "T", "mu_init", "mu_factor", "s", "warm_iter", "max_iter", "lr", "beta_1", "beta_2"),
    "dagma-mlp": ("lambda1", "lambda2", "w_threshold", "T", "mu_init", "mu_factor", "s", "warm_iter", "max_iter", "lr"),
}
#: constructor options: DagmaLinear's loss; DagmaMLP's hidden width (dims = [M, hidden, 1]) and bias
_DAGMA_INIT_DEFAULTS = {"dagma": {"loss_type": "l2"}, "dagma-mlp": {"hidden": 10, "bias": True}}


def dagma_defaults(method: str) -> dict[str, Any]:
    """The installed ``dagma`` package's own defaults for the options of ``method``.

    Read from the signatures of ``DagmaLinear.fit`` / ``DagmaNonlinear.fit`` (so they follow
    the installed version), plus the constructor options: ``loss_type="l2"`` (continuous data;
    ``"logistic"`` for 0/1 data) for ``"dagma"``, ``hidden=10`` (the width in dagma's README and
    ``nonlinear.test``, ``dims=[M, 10, 1]``) and ``bias=True`` for ``"dagma-mlp"``.

    Raises
    ------
    CapeConfigError
        For a method other than ``"dagma"`` or ``"dagma-mlp"``.
    """
    if method not in DAGMA_METHODS:
        raise CapeConfigError(f"method: expected one of {DAGMA_METHODS}, got {method!r}")
    from dagma.linear import DagmaLinear
    from dagma.nonlinear import DagmaNonlinear

    fit = DagmaLinear.fit if method == "dagma" else DagmaNonlinear.fit
    sig = inspect.signature(fit).parameters
    out = {k: sig[k].default for k in _DAGMA_FIT_KWARGS[method]}
    if isinstance(out.get("s"), list):
        out["s"] = list(out["s"])
    return {**out, **_DAGMA_INIT_DEFAULTS[method]}


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and np.isfinite(v)


def _check_dagma_options(method: str, opts: dict[str, Any]) -> None:
    pos = (lambda v: _is_num(v) and v > 0, "a number > 0")
    nonneg = (lambda v: _is_num(v) and v >= 0, "a number >= 0")
    count = (lambda v: _is_num(v) and float(v) == int(v) and v >= 1, "an integer >= 1")
    checks: dict[str, tuple[Any, str]] = {
        "lambda1": nonneg,
        "lambda2": nonneg,
        "w_threshold": nonneg,
        "T": count,
        "mu_init": pos,
        "mu_factor": (lambda v: _is_num(v) and 0 < v <= 1, "a number in (0, 1]"),
        "s": (
            lambda v: (_is_num(v) and v > 0)
            or (isinstance(v, (list, tuple)) and len(v) > 0 and all(_is_num(e) and e > 0 for e in v)),
            "a number > 0 or a non-empty list of them",
        ),
        "warm_iter": count,
        "max_iter": count,
        "lr": pos,
        "beta_1": (lambda v: _is_num(v) and 0 <= v < 1, "a number in [0, 1)"),
        "beta_2": (lambda v: _is_num(v) and 0 <= v < 1, "a number in [0, 1)"),
        "loss_type": (lambda v: v in ("l2", "logistic"), "'l2' or 'logistic'"),
        "hidden": (lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1, "an integer >= 1"),
        "bias": (lambda v: isinstance(v, (bool, np.bool_)), "a bool"),
    }
    for key, value in opts.items():
        ok, what = checks[key]
        try:
            good = bool(ok(value))
        except (TypeError, ValueError):
            good = False
        if not good:
            raise CapeConfigError(f"{key}: expected {what} for method {method!r}, got {value!r}")


def dagma_weights(
    x_std: np.ndarray, method: str, *, seed: int = 0, progress: bool = False, **kwargs: Any
) -> tuple[np.ndarray, dict[str, Any]]:
    """Fit DAGMA (log-det acyclicity, Bello et al. 2022) and return its continuous weights.

    ``"dagma"``: ``dagma.linear.DagmaLinear`` (numpy; least squares ``1/(2N)‖X − XW‖²_F +
    λ1‖W‖₁`` for ``loss_type="l2"``) under ``h_s(W) = −log det(sI − W∘W) + d log s``.
    ``"dagma-mlp"``: ``dagma.nonlinear.DagmaMLP(dims=[M, hidden, 1])`` solved by
    ``DagmaNonlinear`` (torch, float64; log-MSE score, λ1 on the first layer, λ2 weight decay);
    the edge weight ``W[i, j]`` is the L2 norm of the first-layer weights from i into j's MLP,
    so it is ≥ 0.

    Parameters
    ----------
    x_std
        ``(N, M)`` standardized data (copied; ``DagmaLinear`` centres its input in place).
    method
        ``"dagma"`` or ``"dagma-mlp"``.
    seed
        Seeds numpy's, Python's and torch's global generators for the call (``DagmaMLP``'s
        initialisation draws from torch's); their states and torch's default dtype are
        restored afterwards.
    progress
        Show dagma's tqdm bar (off by default).
    **kwargs
        The package's ``fit`` options (``lambda1``, ``w_threshold``, ``T``, ``mu_init``,
        ``mu_factor``, ``s``, ``warm_iter``, ``max_iter``, ``lr``; ``beta_1``, ``beta_2`` for
        ``"dagma"``, ``lambda2`` for ``"dagma-mlp"``), plus ``loss_type`` (``"dagma"``) or
        ``hidden`` and ``bias`` (``"dagma-mlp"``). Defaults: :func:`dagma_defaults`.

    Returns
    -------
    weights, options
        ``(M, M)`` float64 weights before dagma's threshold (``[i, j]``: i → j; zero diagonal),
        and the full option dict used (defaults filled in). The caller keeps
        ``|W| >= options["w_threshold"]``, dagma's own rule.

    Raises
    ------
    CapeConfigError
        For an unknown method or option, or an invalid option value (the message names it).
    """
    opts = dagma_defaults(method)
    _check_kwargs(method, kwargs, opts)
    _check_dagma_options(method, kwargs)
    opts.update(kwargs)
    from unittest import mock

    import torch
    from dagma import linear as dagma_linear
    from dagma import nonlinear as dagma_nonlinear

    x = np.array(x_std, dtype=np.float64, copy=True)
    fit_opts = {k: opts[k] for k in _DAGMA_FIT_KWARGS[method]}
    fit_opts["w_threshold"] = 0.0  # continuous weights; thresholded by the caller
    fit_opts["warm_iter"], fit_opts["max_iter"], fit_opts["T"] = (
        int(opts["warm_iter"]), int(opts["max_iter"]), int(opts["T"])
    )
    if isinstance(fit_opts["s"], tuple):
        fit_opts["s"] = list(fit_opts["s"])
    if isinstance(fit_opts["s"], list):
        fit_opts["s"] = [float(v) for v in fit_opts["s"]]  # dagma mutates the list it is given
    else:
        fit_opts["s"] = float(fit_opts["s"])
    module = dagma_linear if method == "dagma" else dagma_nonlinear
    bar = functools.partial(module.tqdm, disable=not progress)
    with seeded_global_rngs(seed), mock.patch.object(module, "tqdm", bar):
        if method == "dagma":
            model = dagma_linear.DagmaLinear(loss_type=opts["loss_type"])
            w = model.fit(x, **fit_opts)
        else:
            mlp = dagma_nonlinear.DagmaMLP(
                dims=[x.shape[1], int(opts["hidden"]), 1], bias=bool(opts["bias"]), dtype=torch.float64
            )
            w = dagma_nonlinear.DagmaNonlinear(mlp, dtype=torch.float64).fit(x, **fit_opts)
    w = np.array(w, dtype=np.float64)
    np.fill_diagonal(w, 0.0)
    return w, opts
