"""Staged runner with a content-keyed, atomically written per-stage cache."""

from __future__ import annotations

from cape_pipeline.pipeline.cache import ArtifactCache, stage_key
from cape_pipeline.pipeline.runner import RunResult, StageRecord, run_pipeline
from cape_pipeline.pipeline.stages import STAGE_ORDER, STAGES, Stage

__all__ = ["run_pipeline", "RunResult", "StageRecord", "ArtifactCache", "stage_key", "STAGES", "STAGE_ORDER", "Stage"]
