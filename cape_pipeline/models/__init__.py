"""Bundled transformer backbones, the positional-encoding zoo and their heads (Supp. F.2).

Torch modules only (no AnnData): :class:`ScGPT`, :class:`ScBERT`, :class:`MethylGPT`, each with
a frozen config and ``pe=`` / ``attention=`` chosen by name. :func:`build_backbone` makes one
from a backbone name. The AnnData-facing side lives in :mod:`cape_pipeline.tasks`, and with it
a trained model (:class:`cape_pipeline.tasks.TrainedModel`, read back with
:func:`cape_pipeline.tasks.load`): this package imports neither AnnData nor preprocessing.
"""

from __future__ import annotations

from cape_pipeline.models.attention import (
    ATTENTIONS,
    DotProductAttention,
    RotaryMultiheadAttention,
    build_attention,
    register_attention,
)
from cape_pipeline.models.backbones import BACKBONES, build_backbone
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
from cape_pipeline.models.scgpt_checkpoint import (
    SCGPT_CHECKPOINT_PES,
    ScGPTCheckpointModel,
    from_scgpt,
)
from cape_pipeline.models.tokens import TokenBatch

__all__ = [
    "SCGPT_CHECKPOINT_PES",
    "ScGPTCheckpointModel",
    "from_scgpt",
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
    "ValueDecoder",
    "build_attention",
    "build_backbone",
    "build_pe",
    "coexpression_embedding",
    "config_for",
    "pool",
    "preset",
    "register_attention",
]
