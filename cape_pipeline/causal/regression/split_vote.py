"""Step I on several random splits of the cells, and one graph from them (the regression
algorithm's ``n_splits``, :func:`~cape_pipeline.causal.regression.fit_regression`).

One split's screen on one half of the cells and test on the other (Wasserman & Roeder 2009)
keeps edges that rode on that split's noise, and which those are changes from split to split;
the edges most splits keep are the ones the data carry. Measured against one split on the same
data and seeds (``benchmarks/discover/interventional`` and ``benchmarks/discover/counts``,
RESULTS.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from cape_pipeline.causal.postprocess import greedy_dag
from cape_pipeline.causal.regression.edge_test import bh

__all__ = ["SPLIT_VOTE", "WEIGHT_DIGITS", "check_workers", "fit_on_workers", "fit_splits", "vote", "workers_ok"]

#: share of the random splits (``n_splits``) that must keep an edge (:func:`vote`; 0.5: a
#: majority, ties kept)
SPLIT_VOTE = 0.5
#: decimals of the mean weight that order the vote's edges: float64 sums in another order (threads,
#: devices, the Gram-matrix regressions) move a weight by ~1e-15, far below this
WEIGHT_DIGITS = 9


def vote(fits: list[Any], m: int, fdr: float) -> Any:
    """One fit from the fits of several random splits of the rows (``n_splits`` of
    :func:`~cape_pipeline.causal.regression.fit_regression`).

    Which edges: those kept in at least :data:`SPLIT_VOTE` of the splits' DAGs, inserted greedily
    (the most splits first, then the larger mean weight) and skipped where they close a cycle
    (:func:`~cape_pipeline.causal.postprocess.greedy_dag`); an edge's weight is its mean
    ``|partial correlation|`` over the splits that kept it. A selection frequency over random
    halves, as stability selection (Meinshausen & Bühlmann 2010, *J. R. Stat. Soc. B* 72:417)
    uses, at the majority threshold: one split's screen-and-test (Wasserman & Roeder 2009) keeps
    edges that rode on that split's noise, and which those are changes from split to split.

    The pairs: the union of the splits' screened pairs. Partial F and R² are means over all
    splits (0 where a split did not test the pair, so a pair screened in few splits ranks
    lower); the p-value is Meinshausen, Meier & Bühlmann's (2009, *J. Am. Stat. Assoc.*
    104:1671) quantile aggregation at γ = ½, ``min(1, 2 · median_b p_b)`` with ``p_b = 1``
    where split b did not test the pair, and the q-value its Benjamini–Hochberg adjustment;
    ``accepted``: the pair passed the edge test in at least :data:`SPLIT_VOTE` of the splits;
    ``n_tests`` sums over the splits. ``history`` holds every split's records (field
    ``split``) and one ``"split vote"`` record.

    Parameters
    ----------
    fits
        The :class:`~cape_pipeline.causal.regression.RegressionFit` of every split (at least 2),
        on the same ``M`` features.
    m
        M.
    fdr
        Benjamini–Hochberg level of the q-values (their values do not depend on it).

    Returns
    -------
    RegressionFit
        ``n_splits`` = ``len(fits)``.
    """
    b = len(fits)
    need = SPLIT_VOTE * b - 1e-9
    t0 = time.perf_counter()
    dags = [f.adjacency.tocoo() for f in fits]
    edge, inv = np.unique(np.concatenate([d.row.astype(np.int64) * m + d.col for d in dags]), return_inverse=True)
    n_kept = np.bincount(inv, minlength=edge.size).astype(np.float64)
    w_sum = np.bincount(inv, weights=np.concatenate([d.data for d in dags]), minlength=edge.size)
    sel = n_kept >= need
    dp, dc, n_kept, w = edge[sel] // m, edge[sel] % m, n_kept[sel], w_sum[sel] / n_kept[sel]
    # count first; the weight ∈ (0, 1] breaks ties, rounded to WEIGHT_DIGITS so that weights equal
    # but for rounding (a pair whose directions are each other's only parent in two splits has the
    # same |partial correlation| both ways) tie exactly and keep the edge listed first (parent index)
    acyclic = greedy_dag(dp, dc, n_kept + 0.5 * np.round(w, WEIGHT_DIGITS), m)
    adj = sp.csr_array((w[acyclic], (dp[acyclic], dc[acyclic])), shape=(m, m))
    codes = [f.parent * m + f.child for f in fits]
    uniq = np.unique(np.concatenate(codes))
    f_sum, r2_sum, n_acc = np.zeros(uniq.size), np.zeros(uniq.size), np.zeros(uniq.size)
    n_tests = np.zeros(uniq.size, dtype=np.int64)
    p_split = np.ones((b, uniq.size))
    for i, (f, code) in enumerate(zip(fits, codes, strict=True)):
        j = np.searchsorted(uniq, code)
        f_sum[j] += f.f_stat
        r2_sum[j] += f.partial_r2
        n_acc[j] += f.accepted
        n_tests[j] += f.n_tests
        p_split[i, j] = f.pvalue
    pvalue = np.minimum(1.0, 2.0 * np.median(p_split, axis=0))
    _, qvalue = bh(pvalue, fdr)
    history = [{**rec, "split": i} for i, f in enumerate(fits) for rec in f.history]
    history.append({"stage": "split vote", "n_splits": b, "n_edges_any_split": int(edge.size),
                    "n_voted": int(sel.sum()), "n_cycle_dropped": int((~acyclic).sum()), "n_edges": int(adj.nnz),
                    "seconds": time.perf_counter() - t0})
    return replace(
        fits[0], parent=uniq // m, child=uniq % m, f_stat=f_sum / b, partial_r2=r2_sum / b, pvalue=pvalue, qvalue=qvalue,
        accepted=n_acc >= need, n_tests=n_tests, adjacency=adj, history=history,
        n_oriented=int(round(np.mean([f.n_oriented for f in fits]))),
        n_pruned=int(round(np.mean([f.n_pruned for f in fits]))), n_splits=b,
    )


def check_workers(workers: str | None) -> str | None:
    """Validate the ``workers`` option of the regression algorithm (see :func:`fit_on_workers`).

    Raises
    ------
    CapeConfigError
        Naming the option and what was expected.
    """
    from cape_pipeline.errors import CapeConfigError

    if workers is None:
        return None
    ok = isinstance(workers, str) and (
        workers == "local" or "://" in workers
        or (workers.startswith("local:") and workers[6:].isdigit() and int(workers[6:]) >= 1)
    )
    if not ok:
        raise CapeConfigError(
            f"workers: expected None (the splits one after another in this process), 'local' or 'local:N' "
            f"(a dask LocalCluster of N worker processes) or a dask scheduler address such as "
            f"'tcp://host:8786', got {workers!r}"
        )
    return workers


def workers_ok(workers: Any) -> bool:
    """Whether :func:`check_workers` accepts ``workers``."""
    from cape_pipeline.errors import CapeConfigError

    try:
        check_workers(workers)
    except CapeConfigError:
        return False
    return True


def fit_splits(
    fit: Callable[..., Any], z: np.ndarray, zt: Any, row_sets: list[np.ndarray], opts: dict[str, Any],
    workers: str | None, on_done: Callable[[], None],
) -> list[Any]:
    """``fit(z, zt, rows, **opts)`` for every split's ``rows``: one after another in this process
    (``workers=None`` or one split), else at once on dask workers (:func:`fit_on_workers`)."""
    if workers is None or len(row_sets) < 2:
        fits = []
        for rows in row_sets:
            fits.append(fit(z, zt, rows, **opts))
            on_done()
        return fits
    return fit_on_workers(fit, z, row_sets, {**opts, "progress": False}, workers, on_done, device=str(zt.device))


def _fit_remote(
    fit: Callable[..., Any], z: np.ndarray, rows: np.ndarray, opts: dict[str, Any], threads: int, device: str = "cpu",
) -> Any:
    """One split's fit in a dask worker, with the submitting process's torch thread count (the
    floating-point sums, and so the DAG, are then those of the serial run), on ``device``."""
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    zt = torch.from_numpy(np.ascontiguousarray(z, dtype=np.float64)).to(device)
    return fit(z, zt, rows, **opts)


def fit_on_workers(
    fit: Callable[..., Any], z: np.ndarray, row_sets: list[np.ndarray], opts: dict[str, Any], workers: str,
    on_done: Callable[[], None] | None = None, device: str = "cpu",
) -> list[Any]:
    """The fits of several random splits of the rows, each on a ``dask.distributed`` worker.

    The splits' fits are independent, so they run at once on an existing engine's workers:
    ``workers="local"`` starts a ``distributed.LocalCluster`` of as many single-threaded worker
    processes as this process's CPU share (:func:`cape_pipeline._threads.cpu_share`),
    ``"local:N"`` of N; an address (``"tcp://host:8786"``) connects to a running scheduler (a
    cluster started with ``dask scheduler`` / ``dask worker`` or dask-jobqueue). ``z`` is sent
    to every worker once (``scatter(broadcast=True)``). Each worker sets torch's thread count to
    this process's, so every split's floating-point sums, and the DAG, equal the serial run's.

    Parameters
    ----------
    fit
        The fit of one split, ``fit(z, zt, rows, **opts)``: a module-level function (pickled by
        reference).
    z
        ``(N, M)`` float64 data.
    row_sets
        One permutation of ``range(N)`` per split.
    opts
        Keyword options of ``fit`` (picklable; no progress bar).
    workers
        As above (:func:`check_workers`).
    on_done
        Called once per finished split (a progress bar's advance).
    device
        Where each worker runs its fit (``"cpu"`` or ``"cuda[:i]"``; every worker on one host
        shares that GPU).

    Returns
    -------
    list
        The fits in the order of ``row_sets``.
    """
    import torch
    from distributed import Client, LocalCluster, as_completed

    from cape_pipeline._threads import cpu_share

    cluster = None
    if workers.startswith("local"):
        n = int(workers[6:]) if workers.startswith("local:") else cpu_share()[0]
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(workers)
    try:
        shared = client.scatter(z, broadcast=True)
        threads = torch.get_num_threads()
        futures = [client.submit(_fit_remote, fit, shared, rows, opts, threads, device, pure=False) for rows in row_sets]
        for _ in as_completed(futures):
            if on_done is not None:
                on_done()
        return client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
