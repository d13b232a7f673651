"""The cross-fitting halves of the regression algorithm as moments: each half's Gram matrix of
standardized columns (and the screen's ``tanh`` products), accumulated over row blocks of the
whole matrix, so that no ``(N/2, M)`` copy of a half is made (:func:`split_moments`).

Where every regression reads one Gram matrix (no perturbation labels, at most
:data:`~cape_pipeline.causal.regression.neighbourhood.GRAM_MAX_FEATURES` features, at least as
many cells in a half as features), the screen, the edge test and the orientation need only
these moments: a random split of 500,000 cells then costs two ``(M, M)`` matrices, not two
halves of the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from cape_pipeline._utils import BLOCK_ENTRIES, batch_entries, row_blocks

__all__ = ["HalfMoments", "split_moments"]



@dataclass(frozen=True)
class HalfMoments:
    """One cross-fitting half, as moments of its rows.

    Attributes
    ----------
    n
        The half's rows.
    gram
        ``(M, M)`` float64 ``ZₕᵀZₕ`` of the half's columns centred and scaled to unit sd on its
        own rows (a column with sd ≤ 1e-12 is 0), as
        :func:`~cape_pipeline.causal.covariates.unit_sd_rows` would make them.
    tanh_cross
        ``(R, M)`` float64 ``tᵀZₕ``: the pool features' ``tanh`` of those columns, standardized
        on the half (round 3 of :func:`~cape_pipeline.causal.screen.candidate_parents`), with
        the columns; None where it was not asked for.
    """

    n: int
    gram: torch.Tensor
    tanh_cross: torch.Tensor | None = None


def _standardized_gram(g: torch.Tensor, s: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """From a half's raw ``ZᵀZ`` and column sums: the Gram matrix of its standardized columns
    (made in ``g``'s own memory, no other ``(M, M)`` matrix), their means and the inverses of their
    sds (0 where sd ≤ 1e-12, as :func:`~cape_pipeline.causal.covariates.unit_sd`)."""
    mean = s / n
    cov = g.div_(n).addr_(mean, mean, alpha=-1.0)  # ZᵀZ/n − μμᵀ
    sd = torch.diagonal(cov).clamp_min(0.0).sqrt()
    ok = sd > 1e-12
    inv = torch.where(ok, 1.0 / sd.clamp_min(1e-300), torch.zeros((), dtype=sd.dtype, device=sd.device))
    return cov.mul_(inv[:, None]).mul_(inv[None, :]).mul_(n), mean, inv


def split_moments(
    z: torch.Tensor, in_first: torch.Tensor, full_gram: torch.Tensor, *, pool: torch.Tensor | None = None,
    tanh: bool = True,
) -> tuple[HalfMoments, HalfMoments]:
    """The two halves of one random split of the rows, as :class:`HalfMoments`.

    A pass over ``z`` in row blocks sums the first half's ``ZᵀZ`` and both halves' column sums
    (the second half's ``ZᵀZ`` is ``full_gram`` less the first's); a second pass, with each
    half's means and sds, sums round 3's ``tanh`` products (float32 blocks, float64 sums, as the
    screen's own float32 pass). Each half's Gram matrix is then that of its standardized columns,
    ``n·D⁻¹(ZₕᵀZₕ/n − μμᵀ)D⁻¹`` (D the sds): the same as from the standardized copy of the half
    up to the order of the float64 sums. Time O(N·M²) for the first pass and O(N·M·R) for the
    second; memory two ``(M, M)`` matrices and one row block.

    Parameters
    ----------
    z
        ``(N, M)`` float64 tensor (any device; the moments are made there).
    in_first
        ``(N,)`` bool tensor on ``z``'s device: the rows of the first half.
    full_gram
        ``(M, M)`` float64 ``zᵀz`` (:func:`~cape_pipeline.causal.regression.neighbourhood.gram_matrix`).
    pool
        ``(R,)`` int64 columns whose ``tanh`` enters round 3 (the regulators), or None (all M).
    tanh
        Make ``tanh_cross`` (:func:`~cape_pipeline.causal.screen.tanh_round_runs`).

    Returns
    -------
    first, second
        The halves ``in_first`` and ``~in_first``.

    Raises
    ------
    ValueError
        ``in_first`` is not ``(N,)`` bool or leaves a half with fewer than 2 rows.
    """
    n, m = z.shape
    if in_first.shape != (n,) or in_first.dtype != torch.bool:
        raise ValueError(f"split_moments: in_first must be an ({n},) bool tensor, got {tuple(in_first.shape)}")
    n_a = int(in_first.sum())
    if min(n_a, n - n_a) < 2:
        raise ValueError(f"split_moments: each half needs at least 2 rows, got {n_a} and {n - n_a}")
    dev, f64 = z.device, torch.float64
    blocks = row_blocks(n, m, batch_entries(dev, BLOCK_ENTRIES, bytes_per_entry=24))
    g_a = torch.zeros(m, m, dtype=f64, device=dev)
    s_a = torch.zeros(m, dtype=f64, device=dev)
    s_b = torch.zeros(m, dtype=f64, device=dev)
    for b in blocks:
        blk, sel = z[b], in_first[b]
        a = blk[sel]
        g_a.addmm_(a.T, a)
        s_a += a.sum(0)
        s_b += blk[~sel].sum(0)
    g_b = full_gram - g_a
    sizes = (n_a, n - n_a)
    halves = [_standardized_gram(g, s, k) for g, s, k in ((g_a, s_a, sizes[0]), (g_b, s_b, sizes[1]))]
    crosses = _tanh_crosses(z, in_first, blocks, halves, sizes, pool) if tanh else (None, None)
    return HalfMoments(sizes[0], halves[0][0], crosses[0]), HalfMoments(sizes[1], halves[1][0], crosses[1])


def _tanh_crosses(
    z: torch.Tensor, in_first: torch.Tensor, blocks: list[slice], halves: list[tuple[torch.Tensor, ...]],
    sizes: tuple[int, int], pool: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Round 3's ``(R, M)`` products ``tᵀZₕ`` of both halves in one pass over ``blocks``: each
    half's rows standardized with its means and inverse sds (``halves``, from
    :func:`_standardized_gram`), ``t`` the pool columns' ``tanh`` standardized on the half; float32
    blocks, float64 sums."""
    m = z.shape[1]
    dev, f64 = z.device, torch.float64
    r = m if pool is None else pool.numel()
    acc = [{"t": torch.zeros(r, dtype=f64, device=dev), "tt": torch.zeros(r, dtype=f64, device=dev),
            "x": torch.zeros(m, dtype=f64, device=dev), "tx": torch.zeros(r, m, dtype=f64, device=dev)}
           for _ in range(2)]
    for b in blocks:
        blk, sel = z[b], in_first[b]
        for (_, mean, inv), a, rows in zip(halves, acc, (sel, ~sel), strict=True):
            xs = ((blk[rows] - mean) * inv).to(torch.float32)  # the half's standardized rows of this block
            t = torch.tanh(xs if pool is None else xs[:, pool])
            a["t"] += t.sum(0, dtype=f64)
            a["tt"] += (t * t).sum(0, dtype=f64)
            a["x"] += xs.sum(0, dtype=f64)
            a["tx"] += (t.T @ xs).to(f64)
    out = []
    for a, k in zip(acc, sizes, strict=True):
        mt = a["t"] / k
        st = (a["tt"] / k - mt * mt).clamp_min(0.0).sqrt().clamp_min(1e-12)
        out.append((a["tx"] - torch.outer(mt, a["x"])) / st[:, None])
    return out[0], out[1]
