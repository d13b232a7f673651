"""scBERT-style backbone (paper 000 Supp. F.2, Eqs. F.106–F.108).

Token of gene j in cell i: ``C(bin(x_ij))`` with fixed absolute-value bins shared by all cells
(bin 0 = zero), plus the PE (scBERT's own: static gene2vec vectors, ``pe="static-absolute"``).
Attention is exact softmax attention (see :mod:`cape_pipeline.models.attention` for why not
Performer).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from cape_pipeline.models.blocks import TokenTransformer
from cape_pipeline.models.configs import ScBERTConfig
from cape_pipeline.models.tokens import TokenBatch, global_bins, select_tokens

__all__ = ["ScBERT"]


class ScBERT(TokenTransformer):
    """scBERT-style encoder with global value bins.

    Call :meth:`fit_data` on training data before use to set the bin edges (quantiles of the
    non-zero training values); until then the edges are ``1, 2, ..., B-2`` (integer
    intervals of log-normalized expression, as in scBERT).

    Parameters
    ----------
    config
        :class:`~cape_pipeline.models.configs.ScBERTConfig`.
    n_features, pe, attention, angles, static_table
        As in :class:`~cape_pipeline.models.blocks.TokenTransformer`.
    """

    config: ScBERTConfig

    def __init__(
        self,
        config: ScBERTConfig | None = None,
        *,
        n_features: int,
        pe: str = "static-absolute",
        attention: str = "dot",
        angles: np.ndarray | torch.Tensor | None = None,
        static_table: np.ndarray | torch.Tensor | None = None,
    ) -> None:
        config = ScBERTConfig() if config is None else config
        super().__init__(
            config, n_features=n_features, pe=pe, attention=attention, angles=angles, static_table=static_table
        )
        self.bin_embed = nn.Embedding(config.n_bins + 2, config.d_model)
        self.register_buffer("bin_edges", torch.arange(1, config.n_bins - 1, dtype=torch.float32))

    def fit_data(self, x: np.ndarray) -> None:
        """Set the ``B - 2`` inner bin edges to quantiles of the non-zero values of ``x`` (N, M)."""
        v = np.asarray(x, dtype=np.float64).ravel()
        v = v[np.isfinite(v) & (v != 0)]
        if v.size == 0:
            return
        q = np.quantile(v, np.arange(1, self.config.n_bins - 1) / (self.config.n_bins - 1))
        self.bin_edges.copy_(torch.as_tensor(q, dtype=torch.float32))

    def tokenize(self, x: torch.Tensor) -> TokenBatch:
        """``x`` (B, M) float → tokens with global bins (B, T)."""
        idx = select_tokens(x, self.config.max_tokens)
        values = torch.gather(x, 1, idx)
        missing = torch.isnan(values)
        b = global_bins(values, self.bin_edges).masked_fill(missing, self.config.n_bins)
        return TokenBatch(idx=idx, values=values, missing=missing, bins=b)

    def embed_values(self, tokens: TokenBatch, hide: torch.Tensor | None) -> torch.Tensor:
        """Bin embedding (B, T, D); hidden tokens get the <mask> bin."""
        assert tokens.bins is not None
        b = tokens.bins if hide is None else tokens.bins.masked_fill(hide, self.config.n_bins + 1)
        return self.bin_embed(b)
