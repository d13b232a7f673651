"""Step 2 of the regression algorithm (:mod:`cape_pipeline.causal.regression`): every feature
regressed on its candidate parents, batched over features, and each candidate's partial F and
partial R² — with the errors-in-variables correction for counting noise and, with
interventions, each feature on its own rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from cape_pipeline._utils import batch_entries

__all__ = ["GRAM_MAX_FEATURES", "gram_matrix", "partial_f", "regressions"]

#: c of the errors-in-variables correction's margin c·√(K/N) in the noise's metric (:func:`partial_f`),
#: chosen on the count generators and screens (benchmarks/discover/interventional and counts)
_EIV_MARGIN = 3.0

#: entries of one batch of gathered candidate columns (b · N · K), 2²⁴ float64 = 128 MiB
_BATCH_ENTRIES = 1 << 24


#: up to this many features the screen and the regressions take their moments from one ``(M, M)``
#: Gram matrix ``ZᵀZ`` (``GRAM_MAX_FEATURES²`` float64 entries, 200 MB) instead of gathering
#: ``(N, K)`` candidate columns per feature: one BLAS product of O(N·M²) in place of O(N·M·K²)
#: memory-bound gathers, after which nothing touches the N rows (benchmarks/scale/RESULTS.md)
GRAM_MAX_FEATURES = 5000


def gram_matrix(z: torch.Tensor) -> torch.Tensor | None:
    """``ZᵀZ`` ``(M, M)`` in ``z``'s dtype and on its device, for :func:`regressions` (float64) and
    the screen (float32, :func:`~cape_pipeline.causal.screen.candidate_parents`), or None where
    they pass over the rows instead: more than :data:`GRAM_MAX_FEATURES` features. With per-feature
    rows (``keep``) :func:`regressions` takes each feature's moments on its own rows as those of
    this product less the moments of its dropped rows.

    Parameters
    ----------
    z
        ``(N, M)`` float tensor.
    """
    if z.shape[1] > GRAM_MAX_FEATURES:
        return None
    return z.T @ z


def _live_mask(parents: torch.Tensor) -> torch.Tensor:
    """``(M, K)`` bool: the first copy of each candidate of a row (repeats are padding)."""
    order = torch.argsort(parents, dim=1, stable=True)
    srt = torch.gather(parents, 1, order)
    dup_sorted = torch.zeros_like(srt, dtype=torch.bool)
    dup_sorted[:, 1:] = srt[:, 1:] == srt[:, :-1]
    dup = torch.zeros_like(dup_sorted)
    dup.scatter_(1, order, dup_sorted)
    return ~dup


Moments = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any]]


def _centred(
    gram: torch.Tensor, xty: torch.Tensor, yy: torch.Tensor, sx: torch.Tensor, sy: torch.Tensor, nb: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Raw moments ``XᵀX``, ``Xᵀy``, ``yᵀy`` of ``nb`` ``(b,)`` rows, with their column sums ``sx``
    ``(b, K)`` and ``sy`` ``(b,)``, centred on those rows."""
    mx, my = sx / nb[:, None], sy / nb
    gram = gram - nb[:, None, None] * (mx[:, :, None] * mx[:, None, :])
    xty = xty - (nb * my)[:, None, None] * mx[:, :, None]
    return gram, xty, yy - nb * my * my, nb


def _gram_moments(full: torch.Tensor, n: int) -> Moments:
    """Each batch's ``XᵀX`` ``(b, K, K)``, ``Xᵀy`` ``(b, K, 1)``, ``yᵀy`` ``(b,)`` and row count,
    read from ``ZᵀZ`` (padding columns 0), for the children ``ids`` with candidates ``idx`` and
    live mask ``lv`` (float64)."""

    def moments(ids: torch.Tensor, idx: torch.Tensor, lv: torch.Tensor) -> tuple[torch.Tensor, ...]:
        gram = full[idx[:, :, None], idx[:, None, :]] * (lv[:, :, None] * lv[:, None, :])
        return gram, (full[idx, ids[:, None]] * lv).unsqueeze(2), full[ids, ids], n

    return moments


def _row_moments(z: torch.Tensor, keep: torch.Tensor | None) -> Moments:
    """As :func:`_gram_moments`, from the gathered ``(b, N, K)`` columns; with ``keep`` each child
    on its own rows, centred there (the row counts ``(b,)``)."""

    def moments(ids: torch.Tensor, idx: torch.Tensor, lv: torch.Tensor) -> tuple[torch.Tensor, ...]:
        xp = z[:, idx].permute(1, 0, 2) * lv[:, None, :]  # (b, N, K), padding columns 0
        y = z[:, ids].T.unsqueeze(2)  # (b, N, 1)
        if keep is None:
            return xp.transpose(1, 2) @ xp, xp.transpose(1, 2) @ y, (y * y).sum((1, 2)), z.shape[0]
        w = keep[:, ids].T.to(torch.float64)  # (b, N)
        xw = xp * w[:, :, None]
        yw = y[:, :, 0] * w
        return _centred(xw.transpose(1, 2) @ xp, xw.transpose(1, 2) @ y, (yw * y[:, :, 0]).sum(1), xw.sum(1),
                        yw.sum(1), w.sum(1).clamp_min(1.0))

    return moments


def _downdated_moments(
    z: torch.Tensor, full: torch.Tensor, keep: torch.Tensor, k: int, budget: int,
) -> tuple[list[torch.Tensor], Moments]:
    """Each child's moments on its own rows (``keep``), centred there, as those of all rows
    (:func:`_gram_moments`) less those of its dropped rows: ``ZᵀZ`` and the column sums less the
    ``(b, R, K)`` gathered columns of the at most R rows where a child of the batch is dropped
    (perturbed). The batches hold children of similar dropped-row counts (sorted), sized so that
    ``b·R·K`` stays within ``budget``; O(M·K² + D·K²) past ``ZᵀZ``, D the dropped entries of
    ``keep``."""
    n, m = z.shape
    dev = z.device
    colsum = z.sum(0)
    read = _gram_moments(full, n)
    cols, rows = (~keep).T.nonzero(as_tuple=True)  # dropped entries, sorted by child then row
    n_drop = torch.bincount(cols, minlength=m)
    start = torch.cumsum(n_drop, 0) - n_drop
    order = torch.argsort(n_drop, stable=True)
    counts = n_drop[order].tolist()
    batches, s = [], 0
    while s < m:
        e = min(m, s + max(1, budget // (k * k)))
        if counts[e - 1]:  # fewer children where rows are gathered
            e = min(e, s + max(1, budget // (counts[e - 1] * k)))
        batches.append(order[s:e])
        s = e

    def moments(ids: torch.Tensor, idx: torch.Tensor, lv: torch.Tensor) -> tuple[torch.Tensor, ...]:
        gram, xty, yy, _ = read(ids, idx, lv)
        sx, sy = colsum[idx] * lv, colsum[ids]
        nd = n_drop[ids]
        r = int(nd.max()) if ids.numel() else 0
        if r:
            at = torch.arange(r, device=dev)
            valid = (at[None, :] < nd[:, None]).to(torch.float64)  # (b, R)
            dropped = rows[(start[ids][:, None] + at[None, :]).clamp_max(max(rows.numel() - 1, 0))]  # (b, R)
            xd = z[dropped[:, :, None], idx[:, None, :]] * (lv[:, None, :] * valid[:, :, None])  # (b, R, K)
            yd = z[dropped, ids[:, None]] * valid  # (b, R)
            gram = gram - xd.transpose(1, 2) @ xd
            xty = xty - xd.transpose(1, 2) @ yd[:, :, None]
            yy = yy - (yd * yd).sum(1)
            sx, sy = sx - xd.sum(1), sy - yd.sum(1)
        return _centred(gram, xty, yy, sx, sy, (n - nd).to(torch.float64).clamp_min(1.0))

    return batches, moments


def partial_f(
    z: torch.Tensor | None, parents: torch.Tensor, live: torch.Tensor, *, ridge: float = 1e-2,
    noise: torch.Tensor | None = None, keep: torch.Tensor | None = None, gram: torch.Tensor | None = None,
    n_rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Partial F statistic and partial R² of every candidate in every feature's regression
    (:func:`regressions`, whose docstring gives the model, the counting-noise correction and the
    parameters): ``F = β_j² / (σ² (G⁻¹)_jj)`` and ``R² = F / (F + ν)``.

    Returns
    -------
    f_stat, r2, dof
        ``(M, K)`` float64 partial F and partial R² (0 at padding) and ``(M,)`` float64
        residual degrees of freedom ``ν_c``.
    """
    coef, var, dof = regressions(z, parents, live, ridge=ridge, noise=noise, keep=keep, gram=gram, n_rows=n_rows)
    f_out = coef**2 / var
    return f_out, f_out / (f_out + dof[:, None]), dof


def regressions(
    z: torch.Tensor | None, parents: torch.Tensor, live: torch.Tensor, *, ridge: float = 1e-2,
    noise: torch.Tensor | None = None, keep: torch.Tensor | None = None, gram: torch.Tensor | None = None,
    n_rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every feature's regression on its candidates: coefficients, their variances, dof.

    Feature c is regressed on its live candidates ``P[c]`` (``z_c ≈ Z_P β``, ridge ``λ·N``
    on the correlation scale). The partial F of candidate j is ``β_j² / (σ² (G⁻¹)_jj)``, the
    squared t statistic: the likelihood-ratio statistic of dropping j from the model (Gaussian
    errors); the partial R² is ``F / (F + ν)`` with ``ν = N − K_c − 1`` residual degrees of
    freedom. Batched over features in groups that keep ``b·N·K`` below 2²⁴ entries.

    With ``noise`` (the share ``δ_j`` of each feature's variance that is measurement noise),
    the candidates' Gram matrix is the errors-in-variables moment estimate
    ``ZᵀZ − N·diag(δ_P)`` (Fuller 1987, *Measurement Error Models*, Eq. 2.2.3): the
    coefficients are those of the regression on the noise-free candidates, so a sibling that
    only stands in for a noisily measured parent no longer takes that parent's coefficient.
    The correction is made direction by direction of the generalized eigenproblem
    ``G v = λ·N·diag(δ_P) v`` (roots ``λ_i``; a direction's root is 1 where the data carry
    exactly the measured noise there, and the corrected matrix's root is ``λ_i − 1``): in full
    where ``λ_i ≥ 1 + c√(K/N)``, scaled back to leave the root ``c√(K/N)`` where it is smaller,
    and not at all where ``λ_i < c√(K/N)`` — a per-direction form of Fuller's modified
    estimator (Fuller 1987, §2.5, whose modification is one scalar for the whole matrix; ours).
    Without a margin the correction inverts sampling noise at small N; c =
    :data:`_EIV_MARGIN` is measured, not derived. Two other forms lose: raising the
    corrected spectrum to ``max(√(K/N), 0.05)·N`` along the identity hands variance back to
    every candidate — the sibling of a noisy parent included —, and a single scalar for the
    whole matrix (Fuller's form) lets one very noisy candidate scale back every other
    candidate's correction (``λ̂ ≤ (1 + ridge)/δ_max``). Against both, on two count generators
    with and without perturbation labels (``benchmarks/discover/interventional/RESULTS.md`` and
    ``benchmarks/discover/counts/RESULTS.md``), mean F1 rises on every screen and at every
    size, while at a few thousand cells the kept graph's precision falls. The statistic keeps
    the OLS form ``β_j² / (σ² (G_c⁻¹)_jj)`` with ``σ²`` the residual of the *observed*
    candidates (it carries ``βᵀΣ_uu β``); the full sandwich variance ``G_c⁻¹ G G_c⁻¹``
    (Fuller's Eq. 2.2.12) is too conservative at the edge floor: it keeps a small fraction of
    the edges (``benchmarks/discover/counts/RESULTS.md``).

    With ``keep``, feature c's regression uses only the rows where ``keep[:, c]`` (the cells in
    which c was not perturbed: its conditional is not ``P(c | parents)`` where it was set by
    an intervention), centred on those rows; ``N`` becomes that row count ``N_c``. Up to
    :data:`GRAM_MAX_FEATURES` features those moments are ``ZᵀZ`` and the column sums less the
    products of c's dropped rows (a perturbed feature's few cells): one BLAS product and
    O(D·K²) gathers, D the dropped entries, in place of O(N·M·K²) gathered over every row.

    Parameters
    ----------
    z
        ``(N, M)`` float64 tensor, standardized columns, on any device: the regressions run
        there (the other tensors are moved to it), in batches sized by
        :func:`~cape_pipeline._utils.batch_entries` (2²⁴ entries on the CPU, a share of the free
        memory on CUDA). None where ``gram`` and ``n_rows`` stand for it (the moments of rows
        that are not held: :func:`~cape_pipeline.causal.regression.moments.split_moments`).
    parents
        ``(M, K)`` int64 candidate table.
    live
        ``(M, K)`` bool, which entries are candidates (others are padding).
    ridge
        λ of the ridge term (1e-2; it stabilises near-collinear candidates and, with ``noise``,
        enters the roots ``λ_i`` of the correction).
    noise
        ``(M,)`` float64 in [0, 1): each feature's measurement-noise share of its (unit)
        variance, or None (no correction; the ordinary least squares above).
    keep
        ``(N, M)`` bool: the rows that count in each feature's own regression, or None (all).
    gram
        ``(M, M)`` float64 ``zᵀz`` on ``z``'s device (:func:`gram_matrix`), or None. Given, each
        regression's ``XᵀX``, ``Xᵀy`` and ``yᵀy`` are read from it: the same estimates as from the
        gathered columns up to the order of the float64 sums (relative differences of order
        ``N·ε``, ε = 2⁻⁵²). With ``keep`` it is the product over all of ``z``'s rows (made here
        where None and there are at most :data:`GRAM_MAX_FEATURES` features).
    n_rows
        N, the rows behind ``gram`` when ``z`` is None (ignored otherwise).

    Returns
    -------
    coef, var, dof
        On ``z``'s device: ``(M, K)`` float64 coefficients ``β`` (0 at padding) and their variances in the OLS form
        ``σ² (G⁻¹)_jj`` (1 at padding), and ``(M,)`` float64 residual degrees of freedom ``ν_c``.

    Raises
    ------
    ValueError
        ``z`` is None without ``gram`` and ``n_rows``, or with ``keep``.
    """
    if z is None:
        if gram is None or n_rows is None:
            raise ValueError("regressions: without z, gram and n_rows stand for it")
        if keep is not None:
            raise ValueError("regressions: keep needs z (the dropped rows are read from it)")
        n, m, dev = int(n_rows), gram.shape[0], gram.device
    else:
        n, m = z.shape
        dev = z.device
    k = parents.shape[1]
    parents, live = parents.to(dev), live.to(dev)
    noise = None if noise is None else noise.to(dev)
    keep = None if keep is None else keep.to(dev)
    coef = torch.zeros(m, k, dtype=torch.float64, device=dev)
    var = torch.ones(m, k, dtype=torch.float64, device=dev)
    dof = torch.zeros(m, dtype=torch.float64, device=dev)
    if k == 0:
        return coef, var, dof
    full = gram
    if keep is not None and full is None and m <= GRAM_MAX_FEATURES:
        full = z.T @ z
    eye = torch.eye(k, dtype=torch.float64, device=dev)
    budget = batch_entries(dev, _BATCH_ENTRIES, bytes_per_entry=80)
    if full is not None and keep is not None:
        batches, moments = _downdated_moments(z, full, keep, k, budget)
    else:
        # about ten float64 copies of a (b, N, K) batch are alive at once (gather, mask, weights, products);
        # read from the Gram matrix a batch is (b, K, K)
        rows = n if full is None else k
        chunk = max(1, budget // max(rows * k, 1))
        batches = [torch.arange(s, min(m, s + chunk), device=dev) for s in range(0, m, chunk)]
        moments = _gram_moments(full, n) if full is not None else _row_moments(z, keep)
    for ids in batches:
        idx = parents[ids]
        lv = live[ids].to(torch.float64)  # (b, K)
        gram, xty, yy, nb = moments(ids, idx, lv)
        ncol = nb if keep is None else nb[:, None]
        # ridge on live columns; padding columns get 1 on the diagonal (their β is 0)
        gram = gram + eye * (ridge * ncol * lv + (1.0 - lv))[:, None, :]
        g_obs = gram
        kc = lv.sum(1)  # live candidates of each child: K of the margin and of the degrees of freedom
        if noise is not None:
            nd = noise[idx] * ncol * lv  # (b, K) the noise variance N·δ of each candidate
            # G = LLᵀ; A = L⁻¹ N·diag(δ) L⁻ᵀ = U diag(μ) Uᵀ: direction i's root is λ_i = 1/μ_i
            chol = torch.linalg.cholesky(gram)  # PD with ridge > 0 (padding columns carry 1)
            half = torch.linalg.solve_triangular(chol, torch.diag_embed(nd.sqrt()), upper=False)
            mu, u = torch.linalg.eigh(half @ half.transpose(1, 2))
            margin = _EIV_MARGIN * torch.sqrt(kc / nb)
            share = (1.0 / mu.clamp_min(1e-12) - margin[:, None]).clamp(0.0, 1.0)  # of each direction's correction
            inner = eye - u @ torch.diag_embed(share * mu) @ u.transpose(1, 2)
            gram = chol @ inner @ chol.transpose(1, 2)
        g_inv = torch.linalg.inv(gram)
        beta = g_inv @ xty  # (b, K, 1)
        # residual of the observed candidates (with noise: it carries βᵀΣ_uu β too)
        rss = yy - 2 * (beta * xty).sum((1, 2)) + (beta.transpose(1, 2) @ g_obs @ beta)[:, 0, 0]
        nu = (nb - kc - 1).clamp_min(1.0)
        sigma2 = (rss / nu).clamp_min(1e-12)
        coef[ids] = beta[:, :, 0] * lv
        var[ids] = sigma2[:, None] * torch.diagonal(g_inv, dim1=1, dim2=2).clamp_min(1e-30)
        dof[ids] = nu
    return coef, var, dof
