"""scBERT-style backbone (paper 000 Supp. F.2, Eqs. F.106–F.108; Yang et al. 2022).

Token of gene j in cell i: ``C(bin(x_ij)) + g_j`` (+ the PE of gene j), with fixed
absolute-value bins shared by all cells (bin 0 = zero) and ``g_j`` scBERT's gene2vec vector,
kept fixed during training: the backbone's native identity (alone under PE ``none``). gene2vec
itself is not shipped here; its stand-in is the co-expression embedding of the training data
(:func:`~cape_pipeline.models.pe.coexpression_embedding`, set by :meth:`ScBERT.fit_data`).
Attention is exact softmax attention (see :mod:`cape_pipeline.models.attention` for why not
Performer).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from cape_pipeline.models.backbones.blocks import TokenTransformer
from cape_pipeline.models.backbones.configs import ScBERTConfig
from cape_pipeline.models.backbones.tokens import TokenBatch, global_bins
from cape_pipeline.models.pe import coexpression_embedding

__all__ = ["ScBERT"]


class ScBERT(TokenTransformer):
    """scBERT-style encoder with global value bins and a static per-gene identity.

    Call :meth:`fit_data` on training data before use: it sets the bin edges (quantiles of the
    non-zero training values; until then ``1, 2, ..., B-2``, integer intervals of
    log-normalized expression, as in scBERT) and the static identity vectors (until then 0).

    Takes the arguments of :class:`~cape_pipeline.models.backbones.blocks.TokenTransformer`, with a
    :class:`~cape_pipeline.models.backbones.configs.ScBERTConfig` as ``config`` (``None``: its defaults).
    """

    config: ScBERTConfig
    config_class = ScBERTConfig

    def fit_data(self, x: np.ndarray) -> None:
        """Set the ``B - 2`` inner bin edges to quantiles of the non-zero values of ``x`` (N, M),
        and the static identity to the co-expression embedding of ``x``."""
        super().fit_data(x)  # the PE's data-fitted buffers (rank-value's gene medians)
        if self.use_identity:
            self.gene_vectors.copy_(torch.as_tensor(coexpression_embedding(x, self.config.d_model)))
        v = np.asarray(x, dtype=np.float64).ravel()
        v = v[np.isfinite(v) & (v != 0)]
        if v.size == 0:
            return
        q = np.quantile(v, np.arange(1, self.config.n_bins - 1) / (self.config.n_bins - 1))
        self.bin_edges.copy_(torch.as_tensor(q, dtype=torch.float32))

    def bins(self, x: torch.Tensor, idx: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """Global bins of the tokens: (B, T) long."""
        return global_bins(values, self.bin_edges).masked_fill(torch.isnan(values), self.config.n_bins)

    def embed_identity(self, idx: torch.Tensor) -> torch.Tensor:
        """The static gene vectors g_j: (B, T) → (B, T, D)."""
        return self.gene_vectors[idx]

    def embed_values(self, tokens: TokenBatch, hide: torch.Tensor | None) -> torch.Tensor:
        """Bin embedding (B, T, D); hidden tokens get the <mask> bin."""
        assert tokens.bins is not None
        b = tokens.bins if hide is None else tokens.bins.masked_fill(hide, self.config.n_bins + 1)
        return self.bin_embed(b)

    def build_embeddings(self) -> None:
        """Value-bin embedding, bin edges and (with the identity) the static gene vectors."""
        config, n_features = self.config, self.n_features
        self.bin_embed = nn.Embedding(config.n_bins + 2, config.d_model)
        self.register_buffer("bin_edges", torch.arange(1, config.n_bins - 1, dtype=torch.float32))
        if self.use_identity:
            self.register_buffer("gene_vectors", torch.zeros(n_features, config.d_model))
