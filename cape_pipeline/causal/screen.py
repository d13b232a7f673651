"""Candidate parents for the screened sparse algorithm of Step I (:func:`screen_parents`).

Two correlation rounds, the second on the residuals of a ridge fit on the first round's
candidates; no ``M × M`` matrix is formed (``X_bᵀ X`` in row blocks of size b × M) unless the
caller gives the Gram matrix ``XᵀX`` (``gram=``, for M in the thousands: every round's products
are then read from it). Used by :func:`~cape_pipeline.causal.screened.fit_screened` and the
regression and learned algorithms.
"""

from __future__ import annotations

import numpy as np
import torch

from cape_pipeline._utils import BLOCK_ENTRIES, batch_entries

__all__ = ["candidate_parents", "parent_table", "screen_parents", "tanh_round_runs"]



def _top_k_blocks(
    products, ysd: torch.Tensor, n: int, m: int, r: int, k: int, *, exclude_self: bool,
    pool: torch.Tensor | None, device: torch.device, bytes_per_entry: int, copies: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k ``|products(c) / (n · ysd_c)|`` over the R pool features for every feature c, in
    blocks of features: ``products(start, stop)`` gives the ``(b, R)`` sums ``Σ_rows y_c x_p``,
    making ``copies`` ``(b, R)`` temporaries (the block holds 2²² entries over all of them on the CPU)."""
    entries = max(1, BLOCK_ENTRIES // max(int(copies), 1))
    block = max(1, batch_entries(device, entries, bytes_per_entry=bytes_per_entry) // max(r, 1))
    where = None
    if pool is not None and exclude_self:
        where = torch.full((m,), -1, dtype=torch.int64, device=device)  # column of y → its place in pool
        where[pool] = torch.arange(pool.numel(), device=device)
    vals, idxs = [], []
    for start in range(0, m, block):
        stop = min(m, start + block)
        c = products(start, stop).abs() / (n * ysd[start:stop, None])  # (b, R)
        if exclude_self and where is None:
            i = torch.arange(stop - start, device=device)
            c[i, i + start] = -1.0
        elif where is not None:
            pos = where[start:stop]
            i = torch.nonzero(pos >= 0).squeeze(1)
            c[i, pos[i]] = -1.0
        v, ix = torch.topk(c, k, dim=1)
        vals.append(v)
        idxs.append(ix if pool is None else pool[ix])
    return torch.cat(vals), torch.cat(idxs)


def _top_abs_corr(
    x: torch.Tensor, y: torch.Tensor, k: int, *, exclude_self: bool, pool: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k ``|corr(y_c, x_p)|`` over p for every column c of y, in row blocks.

    ``x`` ``(N, M)`` standardized — or with ``pool``, ``(N, R)``: the columns ``pool`` (``(R,)``
    int64 indices into y's columns) only; ``y`` ``(N, M)`` with columns of any scale. Returns
    values and indices into y's columns, each ``(M, k)``, ``k ≤ R``. Cost O(N·M·R) time, O(b·R)
    memory per block.
    """
    n, r = x.shape
    ysd = y.std(dim=0, unbiased=False).clamp_min(1e-12)
    return _top_k_blocks(lambda a, b: y[:, a:b].T @ x, ysd, n, y.shape[1], r, k, exclude_self=exclude_self,
                         pool=pool, device=x.device, bytes_per_entry=4 * x.element_size())


def _gram_ridge_fits(
    gram: torch.Tensor, parents: torch.Tensor, ridge: float, n: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ridge fits of :func:`_ridge_residuals` from the Gram matrix ``gram`` = ``XᵀX`` ``(M, M)``
    alone: coefficients ``β`` ``(M, k)`` and residual sums of squares ``(M,)``."""
    m, k = parents.shape
    eye = torch.eye(k, dtype=gram.dtype, device=gram.device)
    beta = torch.empty(m, k, dtype=gram.dtype, device=gram.device)
    rss = torch.empty(m, dtype=gram.dtype, device=gram.device)
    chunk = max(1, batch_entries(gram.device, 1 << 24, bytes_per_entry=32) // max(k * k, 1))
    for start in range(0, m, chunk):
        idx = parents[start : start + chunk]  # (b, k)
        col = torch.arange(start, start + idx.shape[0], device=gram.device)
        g_pp = gram[idx[:, :, None], idx[:, None, :]]  # (b, k, k)
        g_pc = gram[idx, col[:, None]].unsqueeze(2)  # (b, k, 1)
        b = torch.linalg.solve(g_pp / n + ridge * eye, g_pc / n)
        beta[start : start + idx.shape[0]] = b[:, :, 0]
        rss[start : start + idx.shape[0]] = (gram[col, col] - 2 * (b * g_pc).sum((1, 2))
                                            + (b.transpose(1, 2) @ g_pp @ b)[:, 0, 0])
    return beta, rss


def _top_abs_corr_residuals(
    cross: torch.Tensor, gram: torch.Tensor, parents: torch.Tensor, ridge: float, n: int, k: int, *,
    pool: torch.Tensor | None,
) -> torch.Tensor:
    """The indices of :func:`_top_abs_corr` ``(f, _ridge_residuals(x, parents, ridge), k,
    exclude_self=True, pool=pool)`` from moments alone: ``cross`` ``(R, M)`` = ``fᵀX`` (f the
    pool features, standardized) and ``gram`` = ``XᵀX``; ``fᵀ(x_c − X_P β_c) = cross[:, c] −
    cross[:, P] β_c``. Cost O(M·R·k), no ``(N, M)`` residual matrix."""
    m = gram.shape[0]
    r = cross.shape[0]
    beta, rss = _gram_ridge_fits(gram, parents, ridge, n)
    ysd = (rss.clamp_min(0.0) / n).sqrt().clamp_min(1e-12)

    def products(a: int, b: int) -> torch.Tensor:
        idx = parents[a:b]
        fitted = (cross[:, idx].permute(1, 0, 2) @ beta[a:b, :, None])[:, :, 0]  # (b, R)
        return cross[:, a:b].T - fitted

    k_par = parents.shape[1]
    return _top_k_blocks(products, ysd, n, m, r, k, exclude_self=True, pool=pool, device=gram.device,
                         bytes_per_entry=4 * gram.element_size() * (k_par + 1), copies=k_par + 1)[1]


def _ridge_residuals(x: torch.Tensor, parents: torch.Tensor, ridge: float) -> torch.Tensor:
    """``x_c − X_{P[c]} β_c`` with ``β_c`` the ridge fit of each column on its candidates.

    ``x`` ``(N, M)``, ``parents`` ``(M, k)``; returns ``(N, M)``. The M small ``k × k``
    systems are solved in batches of b columns (``b·N·k`` ≤ 2²⁴ entries at a time), O(N·M·k²),
    on the transposed ``(M, N)`` copy of ``x``, whose rows (features) gather contiguously.
    """
    n, m = x.shape
    k = parents.shape[1]
    xt = x.T.contiguous()  # (M, N)
    out = torch.empty_like(xt)
    eye = torch.eye(k, dtype=x.dtype, device=x.device)
    chunk = max(1, batch_entries(x.device, 1 << 24, bytes_per_entry=4 * x.element_size()) // max(n * k, 1))
    for start in range(0, m, chunk):
        idx = parents[start : start + chunk]  # (b, k)
        xp = xt[idx]  # (b, k, N)
        y = xt[start : start + idx.shape[0]].unsqueeze(2)  # (b, N, 1)
        gram = xp @ xp.transpose(1, 2) / n + ridge * eye
        beta = torch.linalg.solve(gram, xp @ y / n)
        out[start : start + idx.shape[0]] = (y - xp.transpose(1, 2) @ beta).squeeze(2)
    return out.T


def screen_parents(
    x: torch.Tensor | None, k: int, *, ridge: float = 1e-2, regulators: torch.Tensor | None = None,
    gram: torch.Tensor | None = None, n_rows: int | None = None,
) -> torch.Tensor:
    """Candidate parents of every feature in two correlation rounds, without an M × M matrix.

    Round 1 takes, for each feature c, the k features of largest ``|corr(x_c, x_p)|`` and
    symmetrises: p is also a candidate of c when c is among p's top k (a hub's children all see
    the hub); the union is truncated to the 2k strongest. Round 2 regresses each x_c on its
    round-1 candidates (ridge) and adds the k features most correlated with the residual —
    parents that a stronger neighbour masked in round 1 (it raises the share of true edges
    among the candidates on scale-free and Erdős–Rényi SEMs;
    ``benchmarks/discover/screened/RESULTS.md``). A forward-selection screen in the
    spirit of SDCD's first stage (Nazaret et al. 2024), at the cost of two passes of ``Xᵀ X``.

    Parameters
    ----------
    x
        ``(N, M)`` float tensor, columns standardized (mean 0, sd 1).
    k
        Candidates per feature and round, ``1 ≤ k``; capped so the table fits in M − 1.
    ridge
        Ridge of the round-2 regressions (on the correlation scale).
    regulators
        ``(R,)`` int64 sorted column indices of the features that may be parents (prior
        knowledge, ``DiscoverConfig.regulators``), or None (every feature). Given, both rounds
        pick among these columns only, k is capped at ``R − 1`` (at least 1) and round 1's
        symmetrisation adds ``c`` as a candidate of p only where c is one of them.
    gram
        ``(M, M)`` ``xᵀx`` in ``x``'s dtype, or None. Given, both rounds read their products from
        it (round 2's residual correlations as ``G[:, c] − G[:, P] β_c``: no ``(N, M)`` residual
        matrix, O(M²·k) after the O(N·M²) product); the candidates are those of the row passes up
        to float rounding (a near-tie at the k-th place may order the other way).
    n_rows
        N, the rows behind ``gram`` where ``x`` is None (rows that are not held:
        :func:`~cape_pipeline.causal.regression.moments.split_moments`); ignored otherwise.

    Returns
    -------
    torch.Tensor
        ``(M, 3k)`` int64 (fewer columns when M is small) candidate parents; row c never holds
        c — except with ``regulators`` where c is the only one listed, whose row then holds
        nothing else (callers mask ``table == c`` out). A row with fewer distinct candidates
        than columns repeats its strongest one (:class:`ScreenedSEMVAE` masks repeats out).

    Cost O(N·M²) time in row blocks (two passes; O(N·M·R) with ``regulators``),
    O(N·M·k² + M·k) for the ridge fits.

    Raises
    ------
    ValueError
        ``x`` is None without ``gram`` and ``n_rows``.
    """
    if x is None and (gram is None or n_rows is None):
        raise ValueError("screen_parents: without x, gram and n_rows stand for it")
    n, m = x.shape if x is not None else (int(n_rows), gram.shape[0])
    dev = gram.device if x is None else x.device
    k = int(min(max(int(k), 1), max(1, (m - 1) // 3)))
    xp = x
    if regulators is not None:
        k = min(k, max(1, regulators.numel() - 1))
        xp = None if x is None else x[:, regulators]  # (N, R)
    width = 2 * k
    with torch.no_grad():
        if gram is None:
            tv, ti = _top_abs_corr(xp, x, k, exclude_self=True, pool=regulators)
        else:
            cols = slice(None) if regulators is None else regulators
            # the columns' sd: of the rows where held, else from the Gram matrix's diagonal
            ysd = (x.std(dim=0, unbiased=False) if x is not None else (torch.diagonal(gram) / n).sqrt()).clamp_min(1e-12)
            r = m if regulators is None else regulators.numel()
            tv, ti = _top_k_blocks(lambda a, b: gram[a:b][:, cols], ysd, n, m, r, k, exclude_self=True,
                                   pool=regulators, device=dev, bytes_per_entry=4 * gram.element_size())
        rows = torch.arange(m, device=dev).repeat_interleave(k)
        cols = ti.reshape(-1)
        vals = tv.reshape(-1)
        # every (c, p, |r|) pair from both directions, each pair once
        if regulators is None:
            pair = torch.cat([rows * m + cols, cols * m + rows])
            v_all = torch.cat([vals, vals])
        else:
            # c → p only where c may be a parent; a regulator's own column fills its row only when R = 1
            may = torch.zeros(m, dtype=torch.bool, device=dev)
            may[regulators] = True
            fwd = cols != rows
            back = fwd & may[rows]
            pair = torch.cat([(rows * m + cols)[fwd], (cols * m + rows)[back]])
            v_all = torch.cat([vals[fwd], vals[back]])
        uniq, inv = torch.unique(pair, return_inverse=True)
        v_u = torch.zeros(uniq.numel(), dtype=v_all.dtype, device=dev)
        v_u.scatter_reduce_(0, inv, v_all, reduce="amax", include_self=False)
        c_u, p_u = uniq // m, uniq % m
        # group by c, strongest |r| first (|r| ≤ 1 < 4)
        order = torch.argsort(c_u.to(torch.float64) * 4.0 - v_u.to(torch.float64))
        c_all, p_all = c_u[order], p_u[order]
        counts = torch.bincount(c_all, minlength=m)
        starts = torch.cumsum(counts, 0) - counts
        rank = torch.arange(c_all.numel(), device=dev) - starts[c_all]
        keep = rank < width
        first = ti[:, :1].repeat(1, width)  # pad with the strongest candidate
        first[c_all[keep], rank[keep]] = p_all[keep]
        if gram is None:
            resid = _ridge_residuals(x, first, ridge)
            _, second = _top_abs_corr(xp, resid, k, exclude_self=True, pool=regulators)
        else:
            cross = gram if regulators is None else gram[regulators]
            second = _top_abs_corr_residuals(cross, gram, first, ridge, n, k, pool=regulators)
    return torch.cat([first, second], dim=1)


def tanh_round_runs(m: int, k: int, n_regulators: int | None = None) -> bool:
    """Whether :func:`candidate_parents` runs its ``tanh`` round (round 3) for M features, k
    candidates per round and ``n_regulators`` listed regulators (None: every feature): it does
    where the table of rounds 1–3 still fits in the M − 1 other features."""
    k1 = int(min(max(int(k), 1), max(1, (m - 1) // 3)))
    k3 = int(min(max(int(k), 1), max(1, (m - 1) // 4)))
    if n_regulators is not None:
        k1 = min(k1, max(1, n_regulators - 1))
        k3 = min(k3, max(1, n_regulators - 1))
    return 3 * k1 + k3 <= m - 1


def candidate_parents(
    x: torch.Tensor | None, k: int, *, ridge: float = 1e-2, regulators: torch.Tensor | None = None,
    gram: torch.Tensor | None = None, n_rows: int | None = None, tanh_cross: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(M, 4k)`` candidate parents: three linear rounds and one nonlinear round of screening.

    Rounds 1–2 are :func:`~cape_pipeline.causal.screen.screen_parents` (3k columns). Round 3
    regresses each feature on those candidates (ridge) and adds the k features whose
    ``tanh(x_p)`` (standardized) is most correlated with the residual: a parent whose effect
    is odd but not linear (a sum of sigmoids whose linear terms cancel) has near-zero
    correlation with its child yet a clear one with this feature. Round 3 raises the share of
    true edges among the candidates on SDCD's generator
    (``benchmarks/discover/learned/RESULTS.md``).

    Parameters
    ----------
    x
        ``(N, M)`` float tensor, standardized columns.
    k
        Candidates per round (``n_candidates``), capped so the table fits in M − 1.
    ridge
        Ridge of the residual regressions.
    regulators
        ``(R,)`` int64 sorted column indices of the features that may be parents, or None
        (every feature): every round picks among these columns only
        (:func:`screen_parents`), so a feature that is not listed is nobody's candidate.
    gram
        ``(M, M)`` ``xᵀx`` in ``x``'s dtype, or None: as in :func:`screen_parents`, for every round
        (round 3 adds one O(N·M·R) product ``tanh(x)ᵀx``).
    n_rows, tanh_cross
        Where ``x`` is None (rows that are not held): N, and round 3's ``(R, M)`` product
        ``tᵀx`` of the pool's standardized ``tanh(x_p)`` with the columns (None where
        :func:`tanh_round_runs` says the round does not run), both from
        :func:`~cape_pipeline.causal.regression.moments.split_moments`, beside ``gram``.

    Returns
    -------
    torch.Tensor
        ``(M, K)`` int64, K ≤ 4k; row c never holds c (with ``regulators``: except where c is
        the only regulator, see :func:`screen_parents`); repeats are possible (masked later).

    Raises
    ------
    ValueError
        ``x`` is None without ``gram`` and ``n_rows``, or without ``tanh_cross`` where round 3 runs.
    """
    if x is None and (gram is None or n_rows is None):
        raise ValueError("candidate_parents: without x, gram and n_rows stand for it")
    n, m = x.shape if x is not None else (int(n_rows), gram.shape[0])
    first = screen_parents(x, k, ridge=ridge, regulators=regulators, gram=gram, n_rows=n_rows)
    k3 = int(min(max(int(k), 1), max(1, (m - 1) // 4)))
    if regulators is not None:
        k3 = min(k3, max(1, regulators.numel() - 1))
    if first.shape[1] + k3 > m - 1:
        return first
    with torch.no_grad():
        if x is None:
            if tanh_cross is None:
                raise ValueError("candidate_parents: without x, round 3 needs tanh_cross")
            third = _top_abs_corr_residuals(tanh_cross, gram, first, ridge, n, k3, pool=regulators)
            return torch.cat([first, third], dim=1)
        t = torch.tanh(x if regulators is None else x[:, regulators])
        t = (t - t.mean(0)) / t.std(0, unbiased=False).clamp_min(1e-12)
        if gram is None:
            resid = _ridge_residuals(x, first, ridge)
            _, third = _top_abs_corr(t, resid, k3, exclude_self=True, pool=regulators)
        else:
            third = _top_abs_corr_residuals(t.T @ x, gram, first, ridge, n, k3, pool=regulators)
    return torch.cat([first, third], dim=1)


def parent_table(parent: np.ndarray, child: np.ndarray, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``(M, W)`` parent table of an edge list, the layout every sparse algorithm works on.

    Row c lists c's parents in the order they appear in the list (stable), padded to
    ``W = max(1, largest in-degree)`` with another node's index (``(c + 1) mod M``) that the
    mask marks dead.

    Parameters
    ----------
    parent, child
        ``(E,)`` int arrays, edges ``parent → child`` (no repeats).
    m
        Number of features M.

    Returns
    -------
    table, live
        ``(M, W)`` int64 and bool tensors.
    """
    order = np.argsort(child, kind="stable")
    parent, child = parent[order], child[order]
    counts = np.bincount(child, minlength=m)
    width = max(1, int(counts.max(initial=0)))
    slot = np.arange(child.size) - np.repeat(np.cumsum(counts) - counts, counts)
    table = np.repeat(((np.arange(m) + 1) % m)[:, None], width, axis=1).astype(np.int64)
    live = np.zeros((m, width), dtype=bool)
    table[child, slot] = parent
    live[child, slot] = True
    return torch.from_numpy(table), torch.from_numpy(live)
