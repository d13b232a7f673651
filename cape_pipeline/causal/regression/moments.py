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

from cape_pipeline._utils import batch_entries

__all__ = ["HalfMoments", "split_moments"]

#: rows × features of one row block of the passes over the matrix (2²² float64: 32 MiB)
_BLOCK_ENTRIES = 1 << 22


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
    step = max(1, batch_entries(dev, _BLOCK_ENTRIES, bytes_per_entry=24) // max(m, 1))
    g_a = torch.zeros(m, m, dtype=f64, device=dev)
    s_a = torch.zeros(m, dtype=f64, device=dev)
    s_b = torch.zeros(m, dtype=f64, device=dev)
    for i in range(0, n, step):
        blk, sel = z[i : i + step], in_first[i : i + step]
        a = blk[sel]
        g_a.addmm_(a.T, a)
        s_a += a.sum(0)
        s_b += blk[~sel].sum(0)
    g_b = full_gram - g_a
    halves = []
    for g, s, rows in ((g_a, s_a, n_a), (g_b, s_b, n - n_a)):
        halves.append(_standardized_gram(g, s, rows))
    if not tanh:
        return tuple(HalfMoments(r, h[0]) for r, h in zip((n_a, n - n_a), halves, strict=True))  # type: ignore[return-value]
    r = m if pool is None else pool.numel()
    f32 = torch.float32
    acc = [{"t": torch.zeros(r, dtype=f64, device=dev), "tt": torch.zeros(r, dtype=f64, device=dev),
            "x": torch.zeros(m, dtype=f64, device=dev), "tx": torch.zeros(r, m, dtype=f64, device=dev)}
           for _ in range(2)]
    for i in range(0, n, step):
        blk, sel = z[i : i + step], in_first[i : i + step]
        for (_, mean, inv), a, rows in zip(halves, acc, (sel, ~sel), strict=True):
            xs = ((blk[rows] - mean) * inv).to(f32)  # the half's standardized rows of this block
            t = torch.tanh(xs if pool is None else xs[:, pool])
            a["t"] += t.sum(0, dtype=f64)
            a["tt"] += (t * t).sum(0, dtype=f64)
            a["x"] += xs.sum(0, dtype=f64)
            a["tx"] += (t.T @ xs).to(f64)
    out = []
    for (gram, _, _), a, rows in zip(halves, acc, (n_a, n - n_a), strict=True):
        mt = a["t"] / rows
        st = (a["tt"] / rows - mt * mt).clamp_min(0.0).sqrt().clamp_min(1e-12)
        cross = (a["tx"] - torch.outer(mt, a["x"])) / st[:, None]
        out.append(HalfMoments(rows, gram, cross))
    return out[0], out[1]
