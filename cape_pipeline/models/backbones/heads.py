"""Task heads on top of a backbone's outputs ``(B, 1 + T, D)`` (paper 000 Supp. E).

* :class:`ValueDecoder` — per-token value, for masked-value pretraining (and perturbation).
* :class:`ClassifierHead` — cell-type logits from the pooled cell embedding (annotation).
* :class:`RegressionHead` — one number per observation (age).
* :func:`pool` — the cell embedding: the <cls> output or the mean of the token outputs.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from cape_pipeline.models.backbones.tokens import TokenBatch

__all__ = ["ValueDecoder", "ClassifierHead", "RegressionHead", "pool", "Pooling"]

Pooling = Literal["cls", "mean", "cls+mean"]


def pool(h: torch.Tensor, tokens: TokenBatch, how: Pooling = "cls") -> torch.Tensor:
    """Cell embedding from encoder outputs.

    Parameters
    ----------
    h
        ``(B, 1 + T, D)`` encoder output, <cls> first.
    tokens
        The tokens (missing values and padding are excluded from the mean).
    how
        ``cls`` (the <cls> output), ``mean`` (mean over observed tokens) or ``cls+mean``
        (their sum).

    Returns
    -------
    Tensor
        ``(B, D)``.
    """
    if how == "cls":
        return h[:, 0]
    keep = tokens.observed.to(h.dtype)[..., None]  # (B, T, 1)
    mean = (h[:, 1:] * keep).sum(1) / keep.sum(1).clamp(min=1.0)
    return mean if how == "mean" else h[:, 0] + mean


class ValueDecoder(nn.Module):
    """Per-token MLP D → D → 1: ``(B, T, D) → (B, T)``."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_model), nn.GELU(), nn.Linear(d_model, 1))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """(B, T, D) → (B, T)."""
        return self.net(h).squeeze(-1)


class ClassifierHead(nn.Module):
    """MLP D → D → C on the cell embedding: ``(B, D) → (B, C)`` logits."""

    def __init__(self, d_model: int, n_classes: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(d_model), nn.Linear(d_model, d_model), nn.GELU(), nn.Dropout(dropout), nn.Linear(d_model, n_classes)
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """(B, D) → (B, C)."""
        return self.net(z)


class RegressionHead(nn.Module):
    """MLP D → D → 1 on the cell embedding: ``(B, D) → (B,)``.

    Stands in for MethylGPT's ResNet1D head (paper 000 Supp. E.4): a two-layer MLP is enough
    for the small CPU models here and keeps every PE on the same head.
    """

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, d_model), nn.GELU(), nn.Linear(d_model, 1))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """(B, D) → (B,)."""
        return self.net(z).squeeze(-1)
