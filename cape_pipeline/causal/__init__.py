"""Step I: causal structure learning over features (paper 000, Eqs. 5–10, Supp. G.4)."""

from __future__ import annotations

from cape_pipeline.causal.graph import CausalGraph

__all__ = ["CausalGraph"]
