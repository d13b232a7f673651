"""Turning a batch of observations into feature tokens (pure tensor functions).

An observation ``x`` ``(M,)`` becomes T ≤ M tokens, each a feature index and a value: either
every feature (``expressed_only=False``) or only its expressed (non-zero, non-missing) ones,
as scGPT does. With more than ``max_tokens`` candidates, the ``max_tokens`` highest values are
kept per observation (scGPT's ``max_seq_len``; ties are broken by lower index). Rows of a batch
with fewer tokens than the longest are padded at the end (``pad``), and the padding is masked
out of attention, pooling and losses. Tokens keep ``var_names`` order; their PE rows/angles are
gathered by index. Missing values (NaN) never beat observed ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["TokenBatch", "select_tokens", "quantile_bins", "global_bins"]


@dataclass
class TokenBatch:
    """Tokens of B observations.

    Attributes
    ----------
    idx
        ``(B, T)`` long, feature index of each token (into the M features).
    values
        ``(B, T)`` float, the token's value (NaN = missing); the reconstruction target.
    missing
        ``(B, T)`` bool, value is missing.
    bins
        ``(B, T)`` long value-bin ids, or ``None`` for continuous-value backbones.
    pad
        ``(B, T)`` bool, padding (no feature; ``idx`` 0, value 0), or ``None`` for no padding.
    """

    idx: torch.Tensor
    values: torch.Tensor
    missing: torch.Tensor
    bins: torch.Tensor | None = None
    pad: torch.Tensor | None = None

    @property
    def observed(self) -> torch.Tensor:
        """``(B, T)`` bool: a real token with an observed value (not missing, not padding)."""
        ok = ~self.missing
        return ok if self.pad is None else ok & ~self.pad

    def select(self, rows: torch.Tensor) -> TokenBatch:
        """The tokens of the observations ``rows`` ``(b,)`` long (positions into the batch); the
        token width T is kept."""
        return TokenBatch(
            self.idx[rows],
            self.values[rows],
            self.missing[rows],
            None if self.bins is None else self.bins[rows],
            None if self.pad is None else self.pad[rows],
        )

    def to(self, device: torch.device | str) -> TokenBatch:
        """Move every tensor to ``device``."""
        return TokenBatch(
            self.idx.to(device),
            self.values.to(device),
            self.missing.to(device),
            None if self.bins is None else self.bins.to(device),
            None if self.pad is None else self.pad.to(device),
        )


def select_tokens(
    x: torch.Tensor, max_tokens: int, *, expressed_only: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Feature indices of the tokens of each observation, and their padding.

    Parameters
    ----------
    x
        ``(B, M)`` float, NaN = missing.
    max_tokens
        Keep at most this many features per row (``0`` = no cap).
    expressed_only
        Only non-zero, non-missing values become tokens (scGPT); rows are padded to the
        longest row of the batch.

    Returns
    -------
    (Tensor, Tensor or None)
        ``idx`` ``(B, T)`` long: real tokens ascending by feature index, then padding (index 0);
        ``pad`` ``(B, T)`` bool or ``None`` when no row is padded. Without ``expressed_only``,
        ``T = min(M, max_tokens)``; with it, ``T`` = the most expressed features of any row,
        capped by ``max_tokens`` (at least 1).
    """
    bsz, m = x.shape
    cap = m if max_tokens <= 0 else min(max_tokens, m)
    if not expressed_only:
        if cap >= m:
            return torch.arange(m, device=x.device).expand(bsz, m), None
        score = torch.nan_to_num(x, nan=float("-inf"))
        # stable descending sort: among equal values the lower index wins (deterministic)
        order = torch.sort(score, dim=1, descending=True, stable=True).indices[:, :cap]
        return torch.sort(order, dim=1).values, None
    ok = torch.isfinite(x) & (x != 0)  # (B, M)
    t = max(1, min(cap, int(ok.sum(dim=1).max())))
    score = torch.where(ok, x, torch.full_like(x, float("-inf")))
    order = torch.sort(score, dim=1, descending=True, stable=True).indices[:, :t]  # (B, T)
    pad = ~torch.gather(ok, 1, order)
    key = torch.sort(order + pad.long() * m, dim=1).values  # real tokens by index, padding last
    pad = key >= m
    idx = torch.where(pad, torch.zeros_like(key), key)
    return idx, (pad if bool(pad.any()) else None)


def quantile_bins(x: torch.Tensor, n_bins: int) -> torch.Tensor:
    """Per-observation equal-count bins of the non-zero values (scGPT value binning).

    Bin 0 is zero (and missing, which callers override); the non-zero values of a row get bins
    ``1 + floor(r * (B - 1) / n_nz)`` where ``r`` is the value's rank among that row's
    ``n_nz`` non-zero values (ties broken by index), i.e. B − 1 quantile bins per row.

    Parameters
    ----------
    x
        ``(B, M)`` float, NaN = missing.
    n_bins
        B, including bin 0.

    Returns
    -------
    Tensor
        ``(B, M)`` long in ``[0, n_bins)``.
    """
    v = torch.nan_to_num(x, nan=0.0)
    nz = v != 0
    key = torch.where(nz, v, torch.full_like(v, float("-inf")))
    rank = torch.argsort(torch.argsort(key, dim=1, stable=True), dim=1)  # (B, M), 0 = smallest
    n_nz = nz.sum(dim=1, keepdim=True)
    r = rank - (v.shape[1] - n_nz)  # rank among non-zero values
    b = 1 + torch.div(r * (n_bins - 1), n_nz.clamp(min=1), rounding_mode="floor")
    return torch.where(nz, b.clamp(1, n_bins - 1), torch.zeros_like(b))


def global_bins(x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
    """Fixed absolute-value bins (scBERT, Eq. F.106): 0 for zero, else ``1 + #edges < x``.

    Parameters
    ----------
    x
        ``(B, M)`` float, NaN = missing.
    edges
        ``(B_bins - 2,)`` ascending inner edges.

    Returns
    -------
    Tensor
        ``(B, M)`` long in ``[0, len(edges) + 2)``.
    """
    v = torch.nan_to_num(x, nan=0.0)
    b = 1 + torch.bucketize(v, edges.to(v.dtype), right=False)
    return torch.where(v != 0, b, torch.zeros_like(b))
