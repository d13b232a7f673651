"""The backbones by name: :data:`BACKBONES` and :func:`build_backbone`."""

from __future__ import annotations

import numpy as np
import torch

from cape_pipeline.models.backbones.blocks import TokenTransformer
from cape_pipeline.models.backbones.configs import BackboneConfig, config_for
from cape_pipeline.models.backbones.methylgpt import MethylGPT
from cape_pipeline.models.backbones.scbert import ScBERT
from cape_pipeline.models.backbones.scgpt import ScGPT
from cape_pipeline.models.positions import FeaturePositions

BACKBONES: dict[str, type[TokenTransformer]] = {"scgpt": ScGPT, "scbert": ScBERT, "methylgpt": MethylGPT}
"""Backbone name → module class."""


def build_backbone(
    name: str,
    config: BackboneConfig | dict | str | None = None,
    *,
    n_features: int,
    pe: str,
    attention: str = "dot",
    angles: np.ndarray | torch.Tensor | FeaturePositions | None = None,
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
        See :class:`~cape_pipeline.models.backbones.blocks.TokenTransformer`.

    Raises
    ------
    CapeConfigError, CapeDataError
        Unknown names, bad config, bad angles.
    """
    cfg = config_for(name, config)
    return BACKBONES[name](
        cfg, n_features=n_features, pe=pe, attention=attention, angles=angles, static_table=static_table
    )
