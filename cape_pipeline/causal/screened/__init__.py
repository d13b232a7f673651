"""Screened sparse algorithm for Step I: the SEM of Eq. 5 with A restricted to candidate parents.

The paper's ``A = U Vᵀ`` (Supp. G.4) caps what a fit can express: at M = 1000 even the best
rank-40 matrix ranks only part of the true edges on top, fewer on graphs without hubs than on
scale-free ones (``benchmarks/discover/lowrank/RESULTS.md`` §3c). This algorithm
keeps the model of Eqs. 5–8 and changes only the parameterisation of A, after SDCD
(Nazaret et al. 2024): a first pass *screens* each feature's candidate parents, and A is a sparse
matrix supported on them,

    A[p, c] = W[c, j]  for p = P[c, j],  j < k,

with ``P`` the ``(M, k)`` candidate-parent indices and ``W`` the ``(M, k)`` weights. Every
product with A, ``(f(X) A)[:, c] = Σ_j f(X)[:, P[c, j]] W[c, j]``, is a torch CSR product,
O(B·M·k) for a batch of B rows; the acyclicity ρ(A ∘ A) is a power iteration of sparse
products, O(M·k) per iteration. No ``M × M`` matrix is ever formed (the screen forms
``X_bᵀ X`` in row blocks of size b × M).

Screening (:func:`~cape_pipeline.causal.screen.screen_parents`, re-exported here): two correlation rounds, the second on the residuals of a
ridge fit on the first round's candidates.

The VAE uses the mean-posterior reading of Eq. 8 (``posterior="mean"`` of
:class:`~cape_pipeline.causal.lowrank.model.LowRankSEMVAE`): the decoder gets ``μ = f(X)(I − A)``, so
``μ (I − A)⁻¹ = f(X)`` exactly and no inverse of a sparse ``I − A`` is needed; the ELBO is then
``½‖X − f⁻¹(f(X))‖² + ½‖f(X)(I − A)‖²``.
"""

from __future__ import annotations

from cape_pipeline.causal.screened.config import ScreenedConfig
from cape_pipeline.causal.screened.fit import (
    ScreenedFit,
    ScreenedSEMVAE,
    fit_algorithm,
    fit_screened,
    h_spectral_sparse,
    screen_parents,
)

__all__ = ["ScreenedConfig", "ScreenedFit", "ScreenedSEMVAE", "fit_screened", "fit_algorithm", "h_spectral_sparse", "screen_parents"]
