"""Step I: causal structure learning over features (paper 000, Eqs. 5–10, Supp. G.4)."""

from __future__ import annotations

from cape_pipeline.causal.api import discover
from cape_pipeline.causal.config import DiscoverConfig
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.causal.interventions import intervention_targets
from cape_pipeline.causal.metrics import dag_metrics, interventional_score

__all__ = ["CausalGraph", "DiscoverConfig", "dag_metrics", "discover", "intervention_targets", "interventional_score"]
