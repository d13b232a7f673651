"""MethylGPT-style backbone: CpG-site tokens with continuous β-value embeddings.

Token of CpG j in sample i: ``CpG(j) + MLP(β_ij)`` (1 → hidden → D) plus the PE of site j.
``CpG(j)`` is MethylGPT's trainable CpG-site token embedding (``nn.Embedding`` + LayerNorm, as
scGPT's gene encoder it derives from): the native identity, alone under PE ``none``. A missing β
gets a learned <missing> vector and (``mask_missing_keys``) is excluded from attention as a key;
hidden (pretraining) tokens get a learned <mask> vector.
"""

from __future__ import annotations

import torch
from torch import nn

from cape_pipeline.models.backbones.blocks import TokenTransformer, special_values
from cape_pipeline.models.backbones.configs import MethylGPTConfig
from cape_pipeline.models.backbones.tokens import TokenBatch

__all__ = ["MethylGPT"]


class MethylGPT(TokenTransformer):
    """MethylGPT-style encoder for β values in [0, 1] with missing values.

    Takes the arguments of :class:`~cape_pipeline.models.backbones.blocks.TokenTransformer`, with a
    :class:`~cape_pipeline.models.backbones.configs.MethylGPTConfig` as ``config`` (``None``: its defaults).
    """

    config: MethylGPTConfig
    config_class = MethylGPTConfig

    def embed_identity(self, idx: torch.Tensor) -> torch.Tensor:
        """CpG-site tokens: LayerNorm(Embedding(j)), (B, T) → (B, T, D)."""
        return self.site_norm(self.site_embed(idx))

    def embed_values(self, tokens: TokenBatch, hide: torch.Tensor | None) -> torch.Tensor:
        """Continuous β embedding (B, T, D) with <missing>/<mask> vectors substituted."""
        v = torch.nan_to_num(tokens.values, nan=0.0)[..., None]  # (B, T, 1)
        h = self.value_mlp(v)  # (B, T, D)
        return special_values(h, tokens.missing, hide, self.missing_embed, self.mask_embed)

    def build_embeddings(self) -> None:
        """β-value MLP, <missing>/<mask> vectors and (with the identity) the CpG-site tokens."""
        config, n_features = self.config, self.n_features
        self.missing_key_padding = config.mask_missing_keys
        d = config.d_model
        self.value_mlp = nn.Sequential(nn.Linear(1, config.value_hidden), nn.GELU(), nn.Linear(config.value_hidden, d))
        self.missing_embed = nn.Parameter(torch.randn(d) * 0.02)
        self.mask_embed = nn.Parameter(torch.randn(d) * 0.02)
        if self.use_identity:
            self.site_embed = nn.Embedding(n_features, d)
            self.site_norm = nn.LayerNorm(d)
