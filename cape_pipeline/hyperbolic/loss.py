"""The loss of Step II (paper 000, Eqs. 15–17) on a batch of anchors, without an (n, n) matrix."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from cape_pipeline.hyperbolic import lorentz

__all__: list[str] = []


def _euclid_pairwise(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    sq = (x * x).sum(-1, keepdim=True) + (y * y).sum(-1) - 2.0 * (x @ y.T)
    return torch.sqrt(torch.clamp_min(sq, 1e-24))


def _euclid_dist(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    diff = x - y
    return torch.sqrt(torch.clamp_min((diff * diff).sum(-1), 1e-24))


def _euclid_norm(x: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(torch.clamp_min((x * x).sum(-1), 1e-24))


@dataclass
class _Pairs:
    """Positive pairs of the trained nodes as torch tensors (local node indices 0..n−1)."""

    indptr: torch.Tensor  # (n+1,) long
    indices: torch.Tensor  # (nnz,) long
    weights: torch.Tensor  # (nnz,) float64
    keys: torch.Tensor  # (nnz,) long, row·n + col, ascending (CSR order)
    n_neg: torch.Tensor  # (n,) float64, |N^-(m)| = n − 1 − |N^+(m)|
    n: int

    @classmethod
    def build(cls, positives: sp.csr_array, device: torch.device) -> _Pairs:
        pos = sp.csr_array(positives)
        pos.sort_indices()
        n = pos.shape[0]
        indptr = torch.as_tensor(pos.indptr.astype(np.int64), device=device)
        indices = torch.as_tensor(pos.indices.astype(np.int64), device=device)
        rows = torch.repeat_interleave(torch.arange(n, device=device), indptr[1:] - indptr[:-1])
        deg = (indptr[1:] - indptr[:-1]).to(torch.float64)
        return cls(
            indptr=indptr,
            indices=indices,
            weights=torch.as_tensor(pos.data, dtype=torch.float64, device=device),
            keys=rows * n + indices,
            n_neg=(n - 1) - deg,
            n=n,
        )


def _batch_loss(
    points: torch.Tensor,
    anchors: torch.Tensor,
    pairs: _Pairs,
    pagerank: torch.Tensor,
    *,
    lambda_g: float,
    negatives: int | None,
    hyperbolic: bool,
    generator: torch.Generator,
    scale: float = 1.0,
) -> torch.Tensor:
    """Eq. 15 restricted to a batch of anchors: the *sum* over anchors of L_con + λ_g Ω.

    ``scale`` multiplies every distance: 1/√κ for curvature −κ (points stay on the unit
    hyperboloid; see :attr:`EmbedConfig.curvature <cape_pipeline.hyperbolic.EmbedConfig>`).

    Never forms an (n, n) matrix: with all negatives the work is (B, n); with ``negatives=K`` it
    is (B, K) plus one distance per positive pair. All index work is in torch on the points'
    device (no host round trip).
    """
    device = points.device
    n = pairs.n
    b = anchors.numel()
    start = pairs.indptr[anchors]
    counts = pairs.indptr[anchors + 1] - start
    total = int(counts.sum())
    row = torch.repeat_interleave(torch.arange(b, device=device), counts, output_size=total)
    first = torch.cumsum(counts, 0) - counts
    ptr = torch.repeat_interleave(start - first, counts, output_size=total) + torch.arange(total, device=device)
    col = pairs.indices[ptr]
    w = pairs.weights[ptr].to(points.dtype)
    x = points[anchors]  # (B, d+1) or (B, d)

    if negatives is None:
        pair = lorentz.pairwise_dist if hyperbolic else _euclid_pairwise
        dmat = scale * pair(x, points)  # (B, n)
        not_neg = torch.zeros((b, n), dtype=torch.bool, device=device)
        not_neg[row, col] = True
        not_neg[torch.arange(b, device=device), anchors] = True
        neg_lse = torch.logsumexp((-dmat).masked_fill(not_neg, -math.inf), dim=1)  # (B,)
        d_pos = dmat[row, col]
    else:
        # K negatives shared by the batch: one (B, d+1) × (d+1, K) product instead of a (B, K, d+1) gather
        samples = torch.randint(0, n, (negatives,), generator=generator).to(device)
        y = points[samples]  # (K, ·)
        pair = lorentz.pairwise_dist if hyperbolic else _euclid_pairwise
        d_neg = scale * pair(x, y)  # (B, K)
        # drop samples that are the anchor itself or one of its positives: a (B, n) boolean mask
        # of this batch's positive rows (bytes, not an n × n matrix), read at the K samples
        is_pos = torch.zeros((b, n), dtype=torch.bool, device=device)
        is_pos[row, col] = True
        is_pos[torch.arange(b, device=device), anchors] = True
        bad = is_pos[:, samples]
        n_valid = (~bad).sum(1).to(points.dtype)
        n_neg = pairs.n_neg[anchors].to(points.dtype)
        # importance correction: the K_valid samples estimate the sum over all |N^-(m)| negatives
        correction = torch.log(n_neg.clamp_min(1.0)) - torch.log(n_valid.clamp_min(1.0))
        neg_lse = torch.logsumexp((-d_neg).masked_fill(bad, -math.inf), dim=1) + correction
        neg_lse = torch.where((n_neg > 0) & (n_valid > 0), neg_lse, torch.full_like(neg_lse, -math.inf))
        pts_col = points[col]
        d_pos = scale * (lorentz.dist(x[row], pts_col) if hyperbolic else _euclid_dist(x[row], pts_col))

    # −w log(e^{−d} / (e^{−d} + S)) = w (d + log(e^{−d} + S)),  S = e^{neg_lse}
    con = (w * (d_pos + torch.logaddexp(-d_pos, neg_lse[row]))).sum()
    d0 = scale * (lorentz.dist0(x) if hyperbolic else _euclid_norm(x))
    reg = (pagerank[anchors] * d0).sum()
    return con + lambda_g * reg
