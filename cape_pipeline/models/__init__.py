"""Bundled transformer backbones, the positional-encoding zoo and their heads (Supp. F.2).

Torch modules only (no AnnData): :class:`ScGPT`, :class:`ScBERT`, :class:`MethylGPT`, each with
a frozen config and ``pe=`` / ``attention=`` chosen by name. :func:`build_backbone` makes one
from a backbone name. The AnnData-facing side lives in :mod:`cape_pipeline.tasks`; a trained
model is saved and read back with :class:`TrainedModel` / :func:`load`.
"""

from __future__ import annotations

import numpy as np
import torch

from cape_pipeline.models.attention import (
    ATTENTIONS,
    DotProductAttention,
    RotaryMultiheadAttention,
    build_attention,
    register_attention,
)
from cape_pipeline.models.blocks import Block, TokenTransformer
from cape_pipeline.models.configs import (
    BACKBONE_CONFIGS,
    PRESETS,
    BackboneConfig,
    MethylGPTConfig,
    ScBERTConfig,
    ScGPTConfig,
    config_for,
    preset,
)
from cape_pipeline.models.heads import ClassifierHead, RegressionHead, ValueDecoder, pool
from cape_pipeline.models.methylgpt import MethylGPT
from cape_pipeline.models.pe import (
    ANGLE_PES,
    PE_NAMES,
    ROTARY_PES,
    build_pe,
    coexpression_embedding,
)
from cape_pipeline.models.scbert import ScBERT
from cape_pipeline.models.scgpt import ScGPT
from cape_pipeline.models.tokens import TokenBatch
from cape_pipeline.models.trained import TrainedModel, load

__all__ = [
    "ATTENTIONS",
    "ANGLE_PES",
    "BACKBONES",
    "BACKBONE_CONFIGS",
    "BackboneConfig",
    "Block",
    "ClassifierHead",
    "DotProductAttention",
    "MethylGPT",
    "MethylGPTConfig",
    "PE_NAMES",
    "PRESETS",
    "ROTARY_PES",
    "RegressionHead",
    "RotaryMultiheadAttention",
    "ScBERT",
    "ScBERTConfig",
    "ScGPT",
    "ScGPTConfig",
    "TokenBatch",
    "TokenTransformer",
    "TrainedModel",
    "ValueDecoder",
    "build_attention",
    "build_backbone",
    "build_pe",
    "coexpression_embedding",
    "config_for",
    "pool",
    "load",
    "preset",
    "register_attention",
]

BACKBONES: dict[str, type[TokenTransformer]] = {"scgpt": ScGPT, "scbert": ScBERT, "methylgpt": MethylGPT}
"""Backbone name → module class."""


def build_backbone(
    name: str,
    config: BackboneConfig | dict | str | None = None,
    *,
    n_features: int,
    pe: str,
    attention: str = "dot",
    angles: np.ndarray | torch.Tensor | None = None,
    static_table: np.ndarray | torch.Tensor | None = None,
) -> TokenTransformer:
    """Build a backbone by name (``scgpt``, ``scbert``, ``methylgpt``).

    Parameters
    ----------
    name
        Backbone name.
    config
        Config instance, preset name, dict of overrides or ``None`` (see :func:`config_for`).
    n_features
        M.
    pe, attention, angles, static_table
        See :class:`~cape_pipeline.models.blocks.TokenTransformer`.

    Raises
    ------
    CapeConfigError, CapeDataError
        Unknown names, bad config, bad angles.
    """
    cfg = config_for(name, config)
    return BACKBONES[name](
        cfg, n_features=n_features, pe=pe, attention=attention, angles=angles, static_table=static_table
    )
