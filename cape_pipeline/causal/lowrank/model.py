"""Low-rank NOTEARS-VAE of CAPE Step I (paper 000, Eqs. 5–8): a torch module on tensors only.

The generalized SEM ``f(X) = f(X) A + Z`` (Eq. 5) with ``A = U Vᵀ`` (Supp. G.4, rank r) gives

* A has a zero diagonal: ``A = U Vᵀ − diag(d)``, ``d_m = Σ_k U_mk V_mk`` (a self-loop would
  rescale f(X) and let the KL term shrink without explaining anything);
* encoder (Eq. 6): ``μ = f(X) (I − A) = f(X) − (f(X) U) Vᵀ + f(X) ∘ d``, the mean of
  ``q(Z | X)``;
* decoder (Eq. 7): ``X̂ = f⁻¹(Z (I − A)⁻¹)`` with Woodbury: for ``d = 0``
  ``(I − U Vᵀ)⁻¹ = I + U (I_r − Vᵀ U)⁻¹ Vᵀ``; in general ``I − A = D − U Vᵀ`` with
  ``D = I + diag(d)`` and ``(D − U Vᵀ)⁻¹ = D⁻¹ + D⁻¹ U (I_r − Vᵀ D⁻¹ U)⁻¹ Vᵀ D⁻¹``.

Both cost O(B·M·r) for a batch of B rows; no ``M × M`` matrix is ever formed. ``f`` and ``f⁻¹``
are the entrywise MLPs of :class:`~cape_pipeline.causal.sem.EntrywiseMLP` (Supp. F.4).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from cape_pipeline.causal.sem import _SHARD, POSTERIORS, ElboTerms, EntrywiseMLP, standardize_batch

__all__ = ["LowRankSEMVAE"]


class LowRankSEMVAE(nn.Module):
    """VAE with a low-rank SEM adjacency ``A = U Vᵀ`` (paper 000, Eqs. 5–8, Supp. G.4).

    Parameters
    ----------
    n_features
        M, number of features (nodes).
    rank
        r, ``1 ≤ r ≤ M − 1``.
    hidden
        Width of the entrywise MLPs f and f⁻¹ (64 in Supp. F.4).
    init_scale
        Target spectral radius of the majorant ``|U||V|ᵀ`` at initialisation: factors are drawn
        ``N(0, s²)`` with ``s = sqrt(init_scale / (M r))``.
    posterior
        ``"sampled"``: one reparameterised draw ``Z = μ + σ ε`` goes to the decoder, with a
        learned per-feature σ, and the KL has its variance terms (Kingma & Welling).
        ``"mean"``: the decoder gets ``μ`` itself and the KL reduces to ``½‖μ‖²`` (unit
        variance), as in the DAG-GNN reference implementation that Eq. 8 cites ([27]; also
        gcastle's ``DAG_GNN``: ``decoder(logits)``, ``kl_gaussian_sem``). The sampled form
        adds, through ``ε (I − A)⁻¹``, a penalty of about ``σ² ‖(I − A)⁻¹‖_F²`` that shrinks
        every edge weight.
    generator
        Generator for all initial values.

    Attributes
    ----------
    u, v
        ``(M, r)`` factors of A.
    log_var
        ``(M,)`` log-variance of ``q(Z | X)`` per feature.
    """

    def __init__(
        self,
        n_features: int,
        rank: int,
        *,
        hidden: int = 64,
        init_scale: float = 0.1,
        posterior: str = "sampled",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if not 1 <= rank <= max(n_features - 1, 1):
            raise ValueError(f"rank must be in [1, {n_features - 1}], got {rank}")
        if posterior not in POSTERIORS:
            raise ValueError(f"posterior must be one of {POSTERIORS}, got {posterior!r}")
        self.posterior = posterior
        s = math.sqrt(init_scale / (n_features * rank))
        self.u = nn.Parameter(torch.randn(n_features, rank, generator=generator) * s)
        self.v = nn.Parameter(torch.randn(n_features, rank, generator=generator) * s)
        self.log_var = nn.Parameter(torch.zeros(n_features))
        self.f = EntrywiseMLP(hidden, generator=generator)
        self.f_inv = EntrywiseMLP(hidden, generator=generator)

    @property
    def n_features(self) -> int:
        """M."""
        return int(self.u.shape[0])

    @property
    def rank(self) -> int:
        """R."""
        return int(self.u.shape[1])

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        """``f(X)`` standardized per feature over the batch (mean 0, sd 1). ``(B, M)``, B ≥ 2.

        Without this, Eq. 6 has a scale degeneracy: shrinking f drives ``KL(q ‖ N(0, I))`` to
        zero while f⁻¹ scales back up, and the ELBO prefers the posterior-collapsed,
        edge-free solution (the fit finds no edge). Fixing the scale of f(X)
        makes ``½‖f(X)(I − A)‖²`` in the KL the NOTEARS least-squares loss on f(X).
        """
        return standardize_batch(self.f(x))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Mean of ``q(Z | X)``: ``μ = f(X)(I − U Vᵀ)`` (Eq. 6). ``(B, M)`` → ``(B, M)``.

        ``f(X)`` is taken from :meth:`transform` (batch-standardized).
        """
        fx = self.transform(x)
        return fx - (fx @ self.u) @ self.v.T + fx * self.diag()

    def diag(self) -> torch.Tensor:
        """``(M,)`` diagonal of ``U Vᵀ``, ``d_m = Σ_k U_mk V_mk``; it is removed from A."""
        return (self.u * self.v).sum(dim=1)

    def solve_right(self, z: torch.Tensor) -> torch.Tensor:
        """``Z (I − A)⁻¹`` for ``A = U Vᵀ − diag(d)`` by Woodbury. ``(B, M)`` → ``(B, M)``.

        With ``D = I + diag(d)``, ``I − A = D − U Vᵀ`` and
        ``(D − U Vᵀ)⁻¹ = D⁻¹ + D⁻¹ U K⁻¹ Vᵀ D⁻¹``, ``K = I_r − Vᵀ D⁻¹ U`` (r × r). With a zero
        diagonal (``d = 0``) this is ``(I − UVᵀ)⁻¹ = I + U (I_r − VᵀU)⁻¹ Vᵀ``.
        """
        r = self.rank
        dinv = 1.0 / (1.0 + self.diag())  # (M,)
        k = torch.eye(r, dtype=z.dtype, device=z.device) - self.v.T @ (dinv[:, None] * self.u)
        w = z * dinv  # (B, M)
        wu = w @ self.u  # (B, r)
        # (W U) K⁻¹ = solve(Kᵀ, (W U)ᵀ)ᵀ; solve_ex never raises: a singular K (a diverged fit, where
        # cuSOLVER stops on the NaN pivot that CPU LAPACK passes through) gives non-finite values that
        # the solvers' divergence check reports with the lr to lower
        sol, _ = torch.linalg.solve_ex(k.T, wu.T)
        return w + (sol.T @ self.v.T) * dinv

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``X̂ = f⁻¹(Z (I − A)⁻¹)`` (Eq. 7). ``(B, M)`` → ``(B, M)``."""
        return self.f_inv(self.solve_right(z))

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None) -> ElboTerms:
        """Negative-ELBO terms (Eq. 8) for a standardized batch ``x`` of shape ``(B, M)``.

        With ``posterior="sampled"`` one reparameterised sample ``Z = μ + σ ε`` with
        ``ε ~ N(0, I)`` drawn from ``generator``; with ``"mean"`` the decoder gets ``μ``.
        """
        mu = self.encode(x)
        if self.posterior == "mean":
            x_hat = self.decode(mu)
            kl = 0.5 * mu.pow(2).sum(dim=1).mean()
        else:
            log_var = self.log_var.expand_as(mu)
            shard = _SHARD.get()
            if shard is None:
                eps = torch.randn(mu.shape, generator=generator, dtype=mu.dtype, device=mu.device)
            else:  # the whole batch's noise, this rank's rows
                rows, n_batch = shard
                eps = torch.randn((n_batch, *mu.shape[1:]), generator=generator, dtype=mu.dtype, device=mu.device)
                eps = eps[rows.to(mu.device)]
            z = mu + torch.exp(0.5 * log_var) * eps
            x_hat = self.decode(z)
            kl = 0.5 * (mu.pow(2) + log_var.exp() - 1.0 - log_var).sum(dim=1).mean()
        recon = 0.5 * (x - x_hat).pow(2).sum(dim=1).mean()
        return ElboTerms(recon=recon, kl=kl)

    def l1_surrogate(self) -> torch.Tensor:
        """O(M r) upper bound of ``‖U Vᵀ‖₁``: ``‖ |U||V|ᵀ ‖₁ = Σ_k ‖U_{:k}‖₁ ‖V_{:k}‖₁``.

        Since ``|A_mn| ≤ Σ_k |U_mk||V_nk|``, this bounds the exact L1 norm of Eq. 9 from above,
        is tight when each entry's rank-one contributions share a sign, and pushes the factors
        themselves to be sparse — which also makes the majorant acyclicity tighter.
        """
        return (self.u.abs().sum(dim=0) * self.v.abs().sum(dim=0)).sum()

    def l1_exact(self, block: int = 256) -> torch.Tensor:
        """Exact ``‖A‖₁ = Σ_{m≠n} |(U Vᵀ)_mn|`` (Eq. 9), computed in row blocks.

        Each block forms ``(b, M)`` entries, so the cost is O(M² r) time and O(b M) memory;
        meant for small M (the solver uses it up to ``SolverConfig.l1_exact_max``).

        Parameters
        ----------
        block
            Rows per block.

        Returns
        -------
        torch.Tensor
            0-dim, differentiable in ``u`` and ``v``.
        """
        total = self.u.new_zeros(())
        m = self.n_features
        for start in range(0, m, block):
            a = self.u[start : start + block] @ self.v.T  # (b, M)
            total = total + a.abs().sum()
        return total - self.diag().abs().sum()

    def l1_sampled(self, n_pairs: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Unbiased Monte-Carlo estimate of ``‖A‖₁`` from ``S = n_pairs`` random (i, j) pairs.

        ``‖A‖₁ ≈ M (M − 1) / S · Σ_s |u_{i_s} · v_{j_s}|`` with ``(i_s, j_s)`` drawn uniformly
        among the off-diagonal pairs; its expectation (and that of its gradient) is the exact
        L1 norm of Eq. 9. Cost O(S r) time and memory — no ``M × M`` matrix.

        Parameters
        ----------
        n_pairs
            S, number of sampled pairs.
        generator
            Generator on the factors' device for the pair indices.

        Returns
        -------
        torch.Tensor
            0-dim estimate, differentiable in ``u`` and ``v``.
        """
        m = self.n_features
        dev = self.u.device
        i = torch.randint(0, m, (n_pairs,), generator=generator, device=dev)
        # j uniform over the M − 1 columns other than i
        j = torch.randint(0, m - 1, (n_pairs,), generator=generator, device=dev)
        j = j + (j >= i).to(j.dtype)
        vals = (self.u[i] * self.v[j]).sum(dim=1).abs()
        return vals.mean() * (m * (m - 1))
