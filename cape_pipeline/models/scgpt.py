"""scGPT-style backbone (paper 000 Supp. F.2, Eq. F.109).

Token of gene j in cell i: ``C_bin(bin(x_ij))`` (per-cell quantile bins, bin 0 = zero) plus the
PE of gene j (scGPT's own PE is the trainable gene-token table, ``pe="trainable-absolute"``),
then a <cls> token and pre-norm transformer blocks.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from cape_pipeline.models.blocks import TokenTransformer
from cape_pipeline.models.configs import ScGPTConfig
from cape_pipeline.models.tokens import TokenBatch, quantile_bins, select_tokens

__all__ = ["ScGPT"]


class ScGPT(TokenTransformer):
    """scGPT-style encoder.

    Parameters
    ----------
    config
        :class:`~cape_pipeline.models.configs.ScGPTConfig` (``n_bins`` value bins; ids
        ``n_bins`` and ``n_bins + 1`` are <missing> and <mask>).
    n_features, pe, attention, angles, static_table
        As in :class:`~cape_pipeline.models.blocks.TokenTransformer`.

    Examples
    --------
    >>> import torch
    >>> from cape_pipeline.models import ScGPT, ScGPTConfig
    >>> m = ScGPT(ScGPTConfig(d_model=16, n_heads=2, n_layers=1), n_features=5, pe="trainable-absolute")
    >>> tok = m.tokenize(torch.rand(3, 5))
    >>> m(tok).shape  # (B, 1 + T, D)
    torch.Size([3, 6, 16])
    """

    config: ScGPTConfig

    def __init__(
        self,
        config: ScGPTConfig | None = None,
        *,
        n_features: int,
        pe: str = "trainable-absolute",
        attention: str = "dot",
        angles: np.ndarray | torch.Tensor | None = None,
        static_table: np.ndarray | torch.Tensor | None = None,
    ) -> None:
        config = ScGPTConfig() if config is None else config
        super().__init__(
            config, n_features=n_features, pe=pe, attention=attention, angles=angles, static_table=static_table
        )
        self.bin_embed = nn.Embedding(config.n_bins + 2, config.d_model)
        self.gene_embed = nn.Embedding(n_features, config.d_model) if config.gene_token_embedding else None

    def tokenize(self, x: torch.Tensor) -> TokenBatch:
        """``x`` (B, M) float → tokens with per-cell quantile bins (B, T)."""
        bins = quantile_bins(x, self.config.n_bins)  # (B, M): binned over the whole cell
        idx = select_tokens(x, self.config.max_tokens)  # (B, T)
        values = torch.gather(x, 1, idx)
        missing = torch.isnan(values)
        b = torch.gather(bins, 1, idx).masked_fill(missing, self.config.n_bins)
        return TokenBatch(idx=idx, values=values, missing=missing, bins=b)

    def embed_values(self, tokens: TokenBatch, hide: torch.Tensor | None) -> torch.Tensor:
        """Bin embedding (B, T, D); hidden tokens get the <mask> bin."""
        assert tokens.bins is not None
        b = tokens.bins if hide is None else tokens.bins.masked_fill(hide, self.config.n_bins + 1)
        h = self.bin_embed(b)
        if self.gene_embed is not None:
            h = h + self.gene_embed(tokens.idx)
        return h
