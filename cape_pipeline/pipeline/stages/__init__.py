"""The stages of the pipeline, one module each: a plain function (inputs, config) → output, plus
how its output is saved, loaded and exported. Caching lives in :mod:`cape_pipeline.pipeline.runner`.

Order: ingest, preprocess (:mod:`.data`), discover, embed, encode, train, evaluate.
"""

from __future__ import annotations

from cape_pipeline._keys import STAGE_ORDER
from cape_pipeline.pipeline.stages import data, discover, embed, encode, evaluate, train
from cape_pipeline.pipeline.stages._base import (
    Stage,
    StageContext,
    config_params,
    data_fingerprint,
    export_artifact,
    load_adata,
    save_adata,
)
from cape_pipeline.pipeline.stages.data import IngestConfig
from cape_pipeline.pipeline.stages.discover import DiscoverConfig
from cape_pipeline.pipeline.stages.embed import EmbedConfig
from cape_pipeline.pipeline.stages.encode import EncodeConfig, EncodeOutput
from cape_pipeline.pipeline.stages.evaluate import EvaluateConfig
from cape_pipeline.pipeline.stages.train import TrainConfig, TrainOutput

STAGES: dict[str, Stage] = {
    s.name: s
    for s in (
        data.INGEST_STAGE,
        data.PREPROCESS_STAGE,
        discover.STAGE,
        embed.STAGE,
        encode.STAGE,
        train.STAGE,
        evaluate.STAGE,
    )
}
"""Every stage by name, in :data:`STAGE_ORDER`."""

__all__ = [
    "STAGES",
    "STAGE_ORDER",
    "DiscoverConfig",
    "EmbedConfig",
    "EncodeConfig",
    "EncodeOutput",
    "EvaluateConfig",
    "IngestConfig",
    "Stage",
    "StageContext",
    "TrainConfig",
    "TrainOutput",
    "config_params",
    "data_fingerprint",
    "export_artifact",
    "load_adata",
    "save_adata",
]
