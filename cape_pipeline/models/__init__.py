"""Bundled transformer backbones, the positional-encoding zoo and their heads (Supp. F.2).

Torch modules only (no AnnData), grouped by role:

- :mod:`~cape_pipeline.models.pe` — the positional encodings (CAPE's and the peers'), chosen by
  name (:data:`PE_NAMES`, :func:`build_pe`);
- :mod:`~cape_pipeline.models.attention` — the attentions: :class:`RotaryMultiheadAttention`
  (``dot``, CAPE's rotary injection), the cone and Riemannian peers, a registry;
- :mod:`~cape_pipeline.models.backbones` — :class:`ScGPT`, :class:`ScBERT`, :class:`MethylGPT`
  on one :class:`TokenTransformer`, their configs, tokens and heads (:func:`build_backbone`);
- :mod:`~cape_pipeline.models.scgpt_import` — reading released scGPT checkpoints;
- :mod:`~cape_pipeline.models.positions` (what a PE or attention reads of Steps I–III) and
  :mod:`~cape_pipeline.models.loops` (the generic training loops).

The AnnData-facing side lives in :mod:`cape_pipeline.tasks`, and with it a trained model
(:class:`cape_pipeline.tasks.TrainedModel`, read back with :func:`cape_pipeline.tasks.load`):
this package imports neither AnnData nor preprocessing.
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
from cape_pipeline.models.backbones.blocks import Block, TokenTransformer
from cape_pipeline.models.backbones.configs import (
    BACKBONE_CONFIGS,
    PRESETS,
    BackboneConfig,
    MethylGPTConfig,
    ScBERTConfig,
    ScGPTConfig,
    config_for,
    preset,
)
from cape_pipeline.models.backbones.heads import ClassifierHead, RegressionHead, ValueDecoder, pool
from cape_pipeline.models.backbones.methylgpt import MethylGPT
from cape_pipeline.models.backbones.scbert import ScBERT
from cape_pipeline.models.backbones.scgpt import ScGPT
from cape_pipeline.models.backbones.tokens import TokenBatch
from cape_pipeline.models.pe import (
    ANGLE_PES,
    PE_ALIASES,
    PE_NAMES,
    ROTARY_PES,
    build_pe,
    coexpression_embedding,
    resolve_pe,
)
from cape_pipeline.models.scgpt_import.checkpoint import (
    SCGPT_CHECKPOINT_PES,
    ScGPTCheckpointModel,
    from_scgpt,
)

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
    "PE_ALIASES",
    "resolve_pe",
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
