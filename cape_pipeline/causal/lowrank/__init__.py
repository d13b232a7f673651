"""Step I with the paper's model: the low-rank NOTEARS-VAE (``algorithm="low-rank"``; paper 000,
Eqs. 5–10, Supp. G.4), the default up to 20 features.

The generalized SEM ``f(X) = f(X) A + Z`` (Eq. 5) with ``A = U Vᵀ`` (U, V of shape ``(M, r)``)
is fitted as a VAE (:class:`LowRankSEMVAE`, :mod:`~cape_pipeline.causal.lowrank.model`; the
entrywise MLPs and the ELBO terms it shares with the screened algorithm are in
:mod:`cape_pipeline.causal.sem`) by the augmented Lagrangian of Eq. 10 under an acyclicity
function of the factors (:func:`fit_low_rank_vae`, :mod:`~cape_pipeline.causal.lowrank.solver`;
:func:`~cape_pipeline.causal.acyclicity.h_spectral` by default). :func:`fit_algorithm` then forms
``|A| > τ`` from the factors in row blocks and breaks the cycles that are left
(:mod:`cape_pipeline.causal.postprocess`). No ``M × M`` matrix is formed during the fit.
"""

from __future__ import annotations

from cape_pipeline.causal.lowrank.config import LowRankConfig, SolverConfig
from cape_pipeline.causal.lowrank.model import LowRankSEMVAE
from cape_pipeline.causal.lowrank.solver import FitResult, fit_algorithm, fit_low_rank_vae

__all__ = ["FitResult", "LowRankConfig", "LowRankSEMVAE", "SolverConfig", "fit_low_rank_vae", "fit_algorithm"]
