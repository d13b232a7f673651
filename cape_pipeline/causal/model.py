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
are 1–64–1 MLPs applied to every entry (Supp. F.4), written in residual form
``f(x) = x + MLP(x)`` with the MLP's output layer initialised at zero, so training starts from
the linear SEM (NOTEARS) and bends it as far as the data asks.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["POSTERIORS", "ElboTerms", "EntrywiseMLP", "LowRankSEMVAE", "standardize_batch", "batch_shard"]

#: how q(Z | X) enters the ELBO (see LowRankSEMVAE)
POSTERIORS = ("sampled", "mean")

# CUDA backward of _PiecewiseLinear: reproducible one-hot sums (False: atomic scatter_add_,
# kept only so benchmarks/discover/lowrank/cuda_repro.py can show the difference)
_DETERMINISTIC_CUDA = True
_ONE_HOT_ENTRIES = 1 << 24  # one-hot chunk size (entries) of that backward


def _bucket_sums(k: torch.Tensor, values: torch.Tensor, n_buckets: int) -> torch.Tensor:
    """Per-bucket sums ``out[c, b] = Σ_{i: k_i = b} values[c, i]``, in a fixed order.

    ``k`` is ``(K,)`` int64 in ``[0, n_buckets)``, ``values`` ``(C, K)`` float; returns
    ``(C, n_buckets)``. Computed as ``values @ one_hot(k)`` in chunks of at most
    ``_ONE_HOT_ENTRIES`` one-hot entries: on CUDA a matrix product gives the same result run
    after run, where ``scatter_add_`` adds atomically in no fixed order.
    """
    buckets = torch.arange(n_buckets, device=k.device)
    out = values.new_zeros(values.shape[0], n_buckets)
    step = max(1, _ONE_HOT_ENTRIES // n_buckets)
    for i in range(0, k.numel(), step):  # a few chunks at most; memory bound
        out += values[:, i : i + step] @ (k[i : i + step, None] == buckets).to(values.dtype)
    return out


class _PiecewiseLinear(torch.autograd.Function):
    """``y = slope[k] x + intercept[k]`` with ``k = bucketize(x, breakpoints)``, entrywise.

    The backward pass accumulates the per-bucket gradients with ``scatter_add_`` on the CPU
    (O(B·M), sequential, so deterministic), where autograd's generic advanced-indexing backward
    (a sort-based ``index_put_``) took about as long as the forward pass itself at
    B·M = 1.3·10⁵ (profiled on CPU). On CUDA, ``scatter_add_`` adds floats atomically in no
    fixed order, so two runs with the same seed drift apart; there the sums are a matrix
    product with the one-hot bucket matrix instead (``(2, B·M) @ (B·M, H + 1)``, in chunks of
    at most 2²⁴ one-hot entries), which gives the same sums run after run.
    """

    @staticmethod
    def forward(ctx, x, breakpoints, slope, intercept):  # noqa: D102
        k = torch.bucketize(x.detach(), breakpoints)
        s_k = slope.detach()[k]
        ctx.save_for_backward(x, k, s_k)
        ctx.n_buckets = slope.shape[0]
        return s_k * x + intercept.detach()[k]

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        x, k, s_k = ctx.saved_tensors
        grad_x = grad_slope = grad_intercept = None
        flat_k = k.reshape(-1)
        if ctx.needs_input_grad[0]:
            grad_x = grad * s_k
        both = torch.stack([(grad * x).reshape(-1), grad.reshape(-1)])  # (2, B·M)
        if grad.is_cuda and _DETERMINISTIC_CUDA:
            sums = _bucket_sums(flat_k, both, ctx.n_buckets)
        else:
            sums = grad.new_zeros(2, ctx.n_buckets).scatter_add_(1, flat_k.expand(2, -1), both)
        if ctx.needs_input_grad[2]:
            grad_slope = sums[0]
        if ctx.needs_input_grad[3]:
            grad_intercept = sums[1]
        return grad_x, None, grad_slope, grad_intercept


class EntrywiseMLP(nn.Module):
    """A scalar ``1 → hidden → 1`` ReLU MLP applied to every entry, in residual form.

    ``g(x) = x + Σ_h w₂ₕ relu(w₁ₕ x + b₁ₕ) + b₂`` entrywise (paper 000, Supp. F.4: 1–64–1
    MLPs), one set of weights for all features. A 1–H–1 ReLU network is a continuous piecewise
    linear function with at most H breakpoints ``tₕ = −b₁ₕ / w₁ₕ``, so it is evaluated *exactly*
    as ``slope[k] x + intercept[k]`` with ``k`` the bucket of x among the sorted breakpoints
    (``torch.bucketize``) and the ``H + 1`` slopes/intercepts computed from the weights with
    gradient. Cost O(B·M·log H + H²) instead of O(B·M·H) — measured ~50× faster on CPU than the
    ``(B, M, H)`` activation tensor — with identical values and (almost-everywhere) gradients;
    the backward pass is a hand-written scatter-add (see ``_PiecewiseLinear``).

    Parameters
    ----------
    hidden
        Hidden width H (64 in the paper).
    generator
        ``torch.Generator`` for the initialisation (keeps global RNG state untouched).
    """

    def __init__(self, hidden: int = 64, *, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(hidden, generator=generator))
        self.b1 = nn.Parameter(torch.randn(hidden, generator=generator))
        self.w2 = nn.Parameter(torch.zeros(hidden))
        self.b2 = nn.Parameter(torch.zeros(()))

    def pieces(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sorted breakpoints ``(H,)`` and per-bucket slopes, intercepts ``(H + 1,)``."""
        w1, b1 = self.w1, self.b1
        with torch.no_grad():
            big = torch.finfo(w1.dtype).max / 8
            safe = w1.abs() > 1e-12
            t = torch.where(safe, -b1 / torch.where(safe, w1, torch.ones_like(w1)), big)
            t = t.clamp(-big, big)
            tb, _ = torch.sort(t)
            # one representative point inside each of the H + 1 buckets
            reps = torch.cat([tb[:1] - 1.0, 0.5 * (tb[:-1] + tb[1:]), tb[-1:] + 1.0])
            active = (torch.outer(reps, w1) + b1 > 0).to(w1.dtype)  # (H + 1, H)
        slope = 1.0 + active @ (w1 * self.w2)
        intercept = self.b2 + active @ (b1 * self.w2)
        return tb, slope, intercept

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply entrywise: ``x`` of any shape ``(..., M)`` → same shape, same dtype."""
        tb, slope, intercept = self.pieces()
        return _PiecewiseLinear.apply(x, tb, slope, intercept)


_SHARD: contextvars.ContextVar[tuple[torch.Tensor, int] | None] = contextvars.ContextVar("cape_step1_shard", default=None)


@contextlib.contextmanager
def batch_shard(rows: torch.Tensor | None, n_batch: int) -> Iterator[None]:
    """Inside the block this process holds the rows ``rows`` ``(b,)`` of a batch of ``n_batch``
    rows split over the ranks of a process group (data-parallel Step I): the batch statistics of
    :func:`standardize_batch` are summed over the ranks (differentiably), and the posterior
    noise of :meth:`LowRankSEMVAE.forward` is drawn for the whole batch, then sliced, so every
    rank draws the same numbers a single process would. ``rows=None`` (one process): nothing
    changes."""
    token = _SHARD.set(None if rows is None else (rows, int(n_batch)))
    try:
        yield
    finally:
        _SHARD.reset(token)


def standardize_batch(fx: torch.Tensor) -> torch.Tensor:
    """Standardize ``(B, M)`` per column over the batch: ``(fx − mean) / sqrt(var + 1e-6)``.

    Population variance, same dtype and device; used on ``f(X)`` by both Step I models (see
    :meth:`LowRankSEMVAE.transform` for why the scale of f(X) must be fixed). Inside
    :func:`batch_shard` the batch is the union of every rank's rows (sums all-reduced).
    """
    shard = _SHARD.get()
    if shard is not None:
        from torch.distributed.nn.functional import all_reduce

        n = shard[1]
        sums = all_reduce(torch.stack([fx.sum(dim=0), fx.pow(2).sum(dim=0)]))  # (2, M), every rank's rows
        mean = (sums[0] / n).unsqueeze(0)
        var = (sums[1] / n).unsqueeze(0) - mean.pow(2)
        return (fx - mean) / var.clamp_min(0.0).add(1e-6).sqrt()
    mean = fx.mean(dim=0, keepdim=True)
    sd = (fx - mean).pow(2).mean(dim=0, keepdim=True).add(1e-6).sqrt()
    return (fx - mean) / sd


@dataclass
class ElboTerms:
    """Per-row averages of the negative-ELBO pieces of one batch (paper 000, Eq. 8).

    Attributes
    ----------
    recon
        ``E_q[−log p(X | Z)]`` summed over features, averaged over rows (unit-variance
        Gaussian, additive constant dropped).
    kl
        ``KL(q(Z | X) ‖ N(0, I))`` summed over features, averaged over rows.
    """

    recon: torch.Tensor
    kl: torch.Tensor

    @property
    def neg_elbo(self) -> torch.Tensor:
        """``−ELBO = recon + kl`` (0-dim tensor)."""
        return self.recon + self.kl


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
        edge-free solution (measured: recon = M/2, no edge found). Fixing the scale of f(X)
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
