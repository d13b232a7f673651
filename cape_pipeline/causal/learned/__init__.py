"""Learned screen and per-feature MLPs for Step I at hundreds to thousands of features.

``algorithm="learned"`` of :func:`~cape_pipeline.causal.api.discover`. Three stages, after the
idea of SDCD (Nazaret et al. 2024; our own code, vectorized over targets and restricted to
screened candidates so that no ``M × M`` matrix is formed):

0. **Pre-screen** (:func:`~cape_pipeline.causal.screen.candidate_parents`): the two correlation rounds of
   :func:`~cape_pipeline.causal.screen.screen_parents`, plus a third, nonlinear round: each
   feature's residual after a ridge fit on its candidates is correlated with ``tanh`` of every
   standardized feature, which finds parents whose effect has no linear part. ``K`` candidates
   per feature, O(N·M²) in row blocks.
1. **Learned screen** (:func:`fit_learned`, stage 1): every feature c gets its own
   one-hidden-layer sigmoid MLP over its K candidates (Gaussian NLL with a learned per-feature
   variance, ``λ₁‖W₁‖₁`` on the input layer, no acyclicity term); the strength of ``p → c`` is
   the group norm ``‖W₁[c, p, :]‖₂``. Trained with Adam, early-stopped on a held-out 20 % of the
   rows. Candidates with strength above ``screen_threshold`` are kept.
2. **Acyclic fit** (stage 2): a fresh set of MLPs on the kept pairs, with the spectral
   acyclicity penalty ``γ·ρ(A ∘ A)`` (``A`` the group norms; power iteration warm-started,
   gradient ``u vᵀ / uᵀv``), γ growing linearly and held once the graph thresholded at
   ``threshold`` is a DAG; early-stopped on the held-out rows once it is.
3. **Output**: the pairs above ``threshold``, made acyclic by greedy insertion in order of
   strength (an edge that would close a cycle is skipped), so the result is always a DAG.

Each kept edge carries its stage-2 strength (the adjacency weight, ≥ 0) as a confidence to rank
by. All products are batched matrix products over the ``(M, K)`` candidate table: O(B·M·K·h)
per step of B rows, O(M·K) memory per row.
"""

from __future__ import annotations

from cape_pipeline.causal.learned.config import LearnedConfig
from cape_pipeline.causal.learned.fit import (
    CandidateMLP,
    LearnedFit,
    fit_algorithm,
    fit_learned,
    learned_options,
)

__all__ = ["CandidateMLP", "LearnedConfig", "LearnedFit", "fit_learned", "fit_algorithm", "learned_options"]
