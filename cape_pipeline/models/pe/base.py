"""The base class of every positional encoding (:class:`PositionalEncoding`, its four hooks),
in a module of its own so PEs defined elsewhere (:mod:`.rank_value`) import it without a cycle."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
from torch import nn

ScoreBias = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
QKTransform = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class PositionalEncoding(nn.Module):
    """Base class: a PE that does nothing (subclasses override one of the four hooks).

    Attributes
    ----------
    name
        Registry name.
    equivariant
        Whether permuting features together with the PE's rows permutes the outputs alike.
    """

    name: ClassVar[str] = "none"
    equivariant: ClassVar[bool] = True

    def embed(self, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """Input-side PE. ``h`` (B, T, D) float, ``idx`` (B, T) long → (B, T, D)."""
        return h

    def rotary(self, idx: torch.Tensor) -> torch.Tensor | None:
        """Per-token q/k rotary angles (B, T, D/2) in radians, or ``None``."""
        return None

    def score_bias(self, idx: torch.Tensor) -> ScoreBias | None:
        """A function ``(q, k) -> bias`` with q, k (B, H, 1+T, Dh) → (B, H, 1+T, 1+T), or ``None``.

        Row/column 0 (the <cls> token) of the bias must be zero.
        """
        return None

    def qk_transform(self, idx: torch.Tensor) -> QKTransform | None:
        """A per-token linear map of the per-head queries and keys, or ``None``.

        The function takes and returns q, k ``(B, H, 1+T, Dh)``; position 0 (the <cls> token)
        must be left unchanged. It generalizes :meth:`rotary` to any per-token map, e.g. the
        orthogonal path maps of paper 002 (``ape-tree``). A PE gives either this or
        :meth:`rotary`, not both.
        """
        return None
