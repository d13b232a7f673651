"""The SEM-VAE of CAPE Step I (paper 000, Eqs. 5–8) that the low-rank and screened algorithms share.

Both algorithms fit the generalized SEM ``f(X) = f(X) A + Z`` (Eq. 5) as a VAE and differ only in
how A is parameterised (:class:`~cape_pipeline.causal.lowrank.model.LowRankSEMVAE`: ``A = U Vᵀ``;
:class:`~cape_pipeline.causal.screened.ScreenedSEMVAE`: A on screened candidate parents).
This module holds what they share, torch modules and functions on tensors only:

* :class:`EntrywiseMLP` — ``f`` and ``f⁻¹``, 1–64–1 MLPs applied to every entry (Supp. F.4),
  written in residual form ``f(x) = x + MLP(x)`` with the MLP's output layer initialised at
  zero, so training starts from the linear SEM (NOTEARS) and bends it as far as the data asks;
* :func:`standardize_batch` — ``f(X)`` standardized per feature over the batch, summed over the
  ranks inside :func:`batch_shard` (data-parallel Step I);
* :class:`ElboTerms` — the negative-ELBO pieces of Eq. 8, and :data:`POSTERIORS`, the ways
  ``q(Z | X)`` enters it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["POSTERIORS", "ElboTerms", "EntrywiseMLP", "batch_shard", "standardize_batch"]

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
    gradient. Cost O(B·M·log H + H²) instead of O(B·M·H) — far faster on a CPU than forming the
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


# the rows of a data-parallel batch this process holds (batch_shard), read by standardize_batch
# and by the low-rank model's posterior noise
_SHARD: contextvars.ContextVar[tuple[torch.Tensor, int] | None] = contextvars.ContextVar("cape_step1_shard", default=None)


@contextlib.contextmanager
def batch_shard(rows: torch.Tensor | None, n_batch: int) -> Iterator[None]:
    """Inside the block this process holds the rows ``rows`` ``(b,)`` of a batch of ``n_batch``
    rows split over the ranks of a process group (data-parallel Step I): the batch statistics of
    :func:`standardize_batch` are summed over the ranks (differentiably), and the posterior
    noise of :meth:`~cape_pipeline.causal.lowrank.model.LowRankSEMVAE.forward` is drawn for the whole
    batch, then sliced, so every rank draws the same numbers a single process would.
    ``rows=None`` (one process): nothing changes."""
    token = _SHARD.set(None if rows is None else (rows, int(n_batch)))
    try:
        yield
    finally:
        _SHARD.reset(token)


def standardize_batch(fx: torch.Tensor) -> torch.Tensor:
    """Standardize ``(B, M)`` per column over the batch: ``(fx − mean) / sqrt(var + 1e-6)``.

    Population variance, same dtype and device; used on ``f(X)`` by both Step I models (see
    :meth:`~cape_pipeline.causal.lowrank.model.LowRankSEMVAE.transform` for why the scale of f(X) must be
    fixed). Inside :func:`batch_shard` the batch is the union of every rank's rows (sums
    all-reduced).
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
