"""Geneformer's rank-value encoding as a positional encoding (``pe="rank-value"``).

Source: Theodoris et al., "Transfer learning enables predictions in network biology",
Nature 618, 616–624 (2023), Methods "Rank value encoding" and Geneformer's tokenizer
(``TranscriptomeTokenizer``, huggingface.co/ctheodoris/Geneformer): each cell's gene counts
are normalized by the cell's total count, then divided by each gene's *non-zero median*
expression across the pretraining corpus; the expressed genes are sorted by that normalized
value, descending, and the sorted gene tokens (truncated to the input size, 2,048 in v1)
are fed to a BERT encoder with learned absolute position embeddings, so that a gene's
position is its rank.

Here the tokens of a cell are its expressed features (:class:`~.tokens.TokenBatch`, kept in
``var_names`` order, the highest ``max_tokens`` values when truncated), and this PE adds to
token ``t`` a learned vector ``P[rank_t]``, ``rank_t`` the token's rank within its cell by
``value_t / median[idx_t]``, descending (0 = highest). We do **not** reorder the tokens:
with no other positional signal (every PE here acts per token, and attention, MLP and <cls>
pooling are permutation-equivariant), adding ``P[rank]`` to each token is the same as sorting
the tokens by rank and adding ``P[position]`` (Geneformer's input); the outputs are the same
up to that permutation and the <cls> output is identical.

Deviations, documented:

* The medians come from the training rows given to :meth:`RankValuePE.fit_data` (the task's
  training cells), not from Geneformer's 30M-cell corpus, and from the values as given
  (usually log-normalized), not from total-count-normalized counts. Ranks are invariant to
  any per-cell positive scaling (so Geneformer's per-cell total-count normalization is a
  no-op for the ranks) and to any per-gene positive scaling of the data that also scales the
  gene's median (Geneformer's normalization is designed to be).
* Genes with no non-zero training value, or a non-positive / non-finite median, get median
  1 (no normalization); Geneformer drops such genes from its vocabulary instead.
* Tokens with no observed value (NaN), padding, and tokens hidden for masked-value
  pretraining (``hide``) are not ranked and get no rank vector (the rank of a hidden token
  would leak its value); the other tokens are ranked among themselves. With
  ``tokens="all"`` the zero-valued features are ranked too (ties, by feature index, after
  the non-zero ones), which Geneformer never does.
* Ties in the normalized value are broken by lower feature index (deterministic), so the PE
  is permutation-equivariant only when a cell has no ties (:attr:`RankValuePE.equivariant`
  is false).

Init of the position table: N(0, 0.02²), BERT's ``initializer_range`` (Geneformer uses
``BertForMaskedLM`` with the default 0.02). <cls> gets no rank vector (as with every PE here).
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from cape_pipeline.models.pe.base import PositionalEncoding

__all__ = ["RankValuePE", "nonzero_medians", "token_ranks"]


def nonzero_medians(x: np.ndarray) -> np.ndarray:
    """Per-feature median of the non-zero, finite training values (Geneformer's normalizer).

    Parameters
    ----------
    x
        ``(N, M)`` float training data (NaN = missing, ignored; zeros ignored).

    Returns
    -------
    ndarray
        ``(M,)`` float32, positive: the median of each column's non-zero finite values, or 1
        where a column has none or its median is not positive.
    """
    v = np.asarray(x, dtype=np.float64)
    if v.ndim != 2:
        raise ValueError(f"nonzero_medians: expected (N, M) data, got shape {v.shape}")
    v = np.where(np.isfinite(v) & (v != 0), v, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns → NaN, replaced below
        med = np.nanmedian(v, axis=0) if v.shape[0] else np.full(v.shape[1], np.nan)
    med = np.where(np.isfinite(med) & (med > 0), med, 1.0)
    return med.astype(np.float32)


def token_ranks(score: torch.Tensor, idx: torch.Tensor, ranked: torch.Tensor) -> torch.Tensor:
    """Rank of each token within its row by ``score``, descending, ties by lower ``idx``.

    Parameters
    ----------
    score
        ``(B, T)`` float, e.g. the normalized values ``value / median[idx]``.
    idx
        ``(B, T)`` long feature index of each token (the tie-breaker).
    ranked
        ``(B, T)`` bool, tokens that take part; the others come after all of them (their
        rank is meaningless and should be ignored by the caller).

    Returns
    -------
    Tensor
        ``(B, T)`` long; among the ``ranked`` tokens of a row, a permutation of
        ``0 .. n_ranked - 1`` (0 = highest score).
    """
    # lexicographic sort by (not ranked, -score, idx) with stable sorts, last key first
    order = torch.argsort(idx, dim=1, stable=True)
    key = torch.where(ranked, -score, torch.zeros_like(score)).gather(1, order)
    order = order.gather(1, torch.argsort(key, dim=1, stable=True))
    order = order.gather(1, torch.argsort((~ranked).gather(1, order).to(torch.int8), dim=1, stable=True))
    rank = torch.empty_like(order)
    pos = torch.arange(order.shape[1], device=order.device).expand_as(order)
    return rank.scatter_(1, order, pos)


class RankValuePE(PositionalEncoding):
    """Geneformer's rank-value encoding: add a learned vector of each token's rank (see module).

    Parameters
    ----------
    n_features
        M; the medians buffer has M rows.
    d_model
        Model width D.
    n_positions
        Rows of the rank table (ranks ``0 .. n_positions - 1``); default M (a cell never has
        more tokens than features). Pass ``max_tokens`` to size it as Geneformer's input;
        higher ranks share the last row.
    std
        Init std of the rank table (BERT's 0.02).

    Attributes
    ----------
    medians
        ``(M,)`` float32 buffer, non-zero training medians (1 until :meth:`fit_data`); saved
        in the ``state_dict`` so a reloaded model ranks alike.
    table
        ``(n_positions, D)`` float32 learned rank embedding.
    """

    name = "rank-value"
    equivariant = False
    needs_values: ClassVar[bool] = True
    """The backbone calls ``embed(h, idx, values=..., pad=..., hide=...)`` for this PE."""

    def __init__(self, n_features: int, d_model: int, n_positions: int | None = None, std: float = 0.02) -> None:
        super().__init__()
        n_pos = n_features if n_positions is None or n_positions <= 0 else min(n_positions, n_features)
        self.register_buffer("medians", torch.ones(n_features))
        self.table = nn.Parameter(torch.randn(max(n_pos, 1), d_model) * std)

    def fit_data(self, x: np.ndarray) -> None:
        """Set :attr:`medians` from training data ``x`` ``(N, M)`` (:func:`nonzero_medians`)."""
        med = torch.as_tensor(nonzero_medians(x))
        if med.shape != self.medians.shape:
            raise ValueError(f"rank-value fit_data: expected {self.medians.shape[0]} features, got {med.shape[0]}")
        self.medians.copy_(med)

    def ranks(
        self, idx: torch.Tensor, values: torch.Tensor, pad: torch.Tensor | None = None, hide: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Ranks ``(B, T)`` long and the ranked mask ``(B, T)`` bool of the tokens.

        ``values`` ``(B, T)`` float (NaN = missing); ``pad``, ``hide`` ``(B, T)`` bool or None.
        Ranked: finite value, not padding, not hidden. Score: ``values / medians[idx]``.
        """
        ranked = torch.isfinite(values)
        for m in (pad, hide):
            if m is not None:
                ranked = ranked & ~m
        score = torch.nan_to_num(values.float(), nan=0.0, posinf=0.0, neginf=0.0) / self.medians[idx]
        return token_ranks(score, idx, ranked), ranked

    def embed(
        self,
        h: torch.Tensor,
        idx: torch.Tensor,
        values: torch.Tensor | None = None,
        pad: torch.Tensor | None = None,
        hide: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``h`` (B, T, D) + ``table[rank]`` on the ranked tokens (others unchanged) → (B, T, D).

        Raises
        ------
        ValueError
            If ``values`` is missing (the backbone passes it when :attr:`needs_values`).
        """
        if values is None:
            raise ValueError("pe='rank-value' needs the token values: call embed(h, idx, values=...)")
        rank, ranked = self.ranks(idx, values, pad, hide)
        p = self.table[rank.clamp(max=self.table.shape[0] - 1)]  # (B, T, D)
        return h + p * ranked[..., None].to(p.dtype)
