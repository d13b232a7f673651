"""scGPT-style backbone (paper 000 Supp. F.2, Eq. F.109; Cui et al. 2024).

Token of gene j in cell i: ``GeneEncoder(j) + ValueEncoder(x_ij)`` (+ the PE of gene j), then a
<cls> token and pre-norm transformer blocks. ``GeneEncoder`` is scGPT's trainable gene-token
embedding followed by LayerNorm, the backbone's native identity (alone under PE ``none``). The
value encoder is scGPT's ``ContinuousValueEncoder`` (Linear(1, D) → ReLU → Linear(D, D) →
LayerNorm) on the log-normalized value, or its ``CategoryValueEncoder`` over per-cell quantile
bins (``value_encoder="binned"``). By default only expressed genes are tokens (scGPT's
``include_zero_gene=False``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from cape_pipeline.models.backbones.blocks import TokenTransformer, special_values
from cape_pipeline.models.backbones.configs import ScGPTConfig
from cape_pipeline.models.backbones.tokens import TokenBatch, quantile_bins

__all__ = ["ScGPT"]


class ScGPT(TokenTransformer):
    """scGPT-style encoder.

    Takes the arguments of :class:`~cape_pipeline.models.backbones.blocks.TokenTransformer`, with a
    :class:`~cape_pipeline.models.backbones.configs.ScGPTConfig` as ``config`` (``None``: its defaults).

    Examples
    --------
    >>> import torch
    >>> from cape_pipeline.models import ScGPT, ScGPTConfig
    >>> m = ScGPT(ScGPTConfig(d_model=16, n_heads=2, n_layers=1, tokens="all"), n_features=5, pe="none")
    >>> tok = m.tokenize(torch.rand(3, 5))
    >>> m(tok).shape  # (B, 1 + T, D)
    torch.Size([3, 6, 16])
    """

    config: ScGPTConfig
    config_class = ScGPTConfig

    def fit_data(self, x: np.ndarray) -> None:
        """With ``identity_init="coexpression"``, start the gene tokens from the co-expression
        embedding of the training data ``(N, M)`` (see :class:`ScGPTConfig`)."""
        super().fit_data(x)  # the PE's data-fitted buffers (rank-value's gene medians)
        if self.use_identity and self.config.identity_init == "coexpression":
            from cape_pipeline.models.pe import coexpression_embedding

            with torch.no_grad():
                self.gene_embed.weight.copy_(torch.as_tensor(coexpression_embedding(x, self.config.d_model)))

    def bins(self, x: torch.Tensor, idx: torch.Tensor, values: torch.Tensor) -> torch.Tensor | None:
        """Per-cell quantile bins of the tokens (``binned``, ``continuous-bins``): (B, T) long."""
        if self.config.value_encoder == "continuous":
            return None
        b = torch.gather(quantile_bins(x, self.config.n_bins), 1, idx)  # binned over the whole cell
        return b.masked_fill(torch.isnan(values), self.config.n_bins)

    def embed_identity(self, idx: torch.Tensor) -> torch.Tensor:
        """ScGPT's GeneEncoder: LayerNorm(Embedding(j)), (B, T) → (B, T, D)."""
        return self.gene_norm(self.gene_embed(idx))

    def embed_values(self, tokens: TokenBatch, hide: torch.Tensor | None) -> torch.Tensor:
        """Value embedding (B, T, D); hidden tokens get <mask>, missing ones <missing>."""
        if self.config.value_encoder == "binned":
            assert tokens.bins is not None
            b = tokens.bins if hide is None else tokens.bins.masked_fill(hide, self.config.n_bins + 1)
            return self.value_norm(self.bin_embed(b))
        raw = tokens.bins.to(tokens.values.dtype) if self.config.value_encoder == "continuous-bins" else tokens.values
        v = torch.nan_to_num(raw, nan=0.0).clamp(max=512.0)[..., None]  # (B, T, 1)
        h = self.value_norm(self.value_mlp(v))
        return special_values(h, tokens.missing, hide, self.missing_embed, self.mask_embed)

    def build_embeddings(self) -> None:
        """Gene tokens (with the identity) and the continuous or binned value encoder."""
        config, n_features = self.config, self.n_features
        d = config.d_model
        if self.use_identity:
            self.gene_embed = nn.Embedding(n_features, d)
            self.gene_norm = nn.LayerNorm(d)
        if config.value_encoder == "binned":
            self.bin_embed = nn.Embedding(config.n_bins + 2, d)  # + <missing>, <mask>
            self.value_norm = nn.LayerNorm(d)
        else:
            self.value_mlp = nn.Sequential(nn.Linear(1, d), nn.ReLU(), nn.Linear(d, d))
            self.value_norm = nn.LayerNorm(d)
            self.mask_embed = nn.Parameter(torch.randn(d) * 0.02)
            self.missing_embed = nn.Parameter(torch.randn(d) * 0.02)
