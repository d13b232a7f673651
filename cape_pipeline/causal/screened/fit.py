"""The screened algorithm's fit: the SEM-VAE with A on screened candidate parents
(:class:`ScreenedSEMVAE`), its two phases (:func:`fit_screened`), and the algorithm behind Step I's
common signature (:func:`fit_algorithm`).
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from cape_pipeline._utils import shuffled_batches
from cape_pipeline.causal.acyclicity import h_spectral_sparse
from cape_pipeline.causal.screen import screen_parents
from cape_pipeline.causal.sem import ElboTerms, EntrywiseMLP, standardize_batch

__all__ = ["ScreenedFit", "ScreenedSEMVAE", "fit_screened", "h_spectral_sparse", "screen_parents"]

logger = logging.getLogger(__name__)


def _csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, m: int) -> torch.Tensor:
    """``(m, m)`` torch CSR tensor; torch's beta-state warnings about CSR are silenced here only."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
        return torch.sparse_csr_tensor(crow, col, values, (m, m))


class _SparseProduct(torch.autograd.Function):
    """``out = fx @ A`` for the screened sparse A, with both products sparse.

    A is held transposed as CSR by child, ``Aᵀ[c, P[c, j]] = W[c, j]`` (row pointers
    ``0, k, 2k, …``), so ``out = (Aᵀ fxᵀ)ᵀ`` is one sparse × dense product, O(B·M·k); the
    backward pass is ``grad_fx = grad Aᵀ`` (the same product with A as CSR by parent, through
    a fixed permutation of the entries) and ``grad_W = (gradᵀ fx)`` sampled on the support
    (``torch.sparse.sampled_addmm``), also O(B·M·k). Far faster on a CPU than the gather
    ``fx[:, P]`` with autograd, which forms a ``(B, M, k)`` tensor.
    """

    @staticmethod
    def forward(ctx, fx, w, parents, crow_child, crow_parent, by_parent, child_of):  # noqa: D102
        m, k = w.shape
        at = _csr(crow_child, parents.reshape(-1), w.reshape(-1), m)
        out = (at @ fx.T.contiguous()).T
        ctx.save_for_backward(fx, w, parents, crow_child, crow_parent, by_parent, child_of)
        return out

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        fx, w, parents, crow_child, crow_parent, by_parent, child_of = ctx.saved_tensors
        m, k = w.shape
        grad_fx = grad_w = None
        g_t = grad.T.contiguous()  # (M, B)
        if ctx.needs_input_grad[0]:
            a = _csr(crow_parent, child_of[by_parent], w.reshape(-1)[by_parent], m)
            grad_fx = (a @ g_t).T
        if ctx.needs_input_grad[1]:
            pattern = _csr(crow_child, parents.reshape(-1), torch.zeros_like(w).reshape(-1), m)
            grad_w = torch.sparse.sampled_addmm(pattern, g_t, fx, beta=0.0).values().view(m, k)
        return grad_fx, grad_w, None, None, None, None, None


class ScreenedSEMVAE(nn.Module):
    """SEM-VAE of paper 000 (Eqs. 5–8) with A supported on screened candidate parents.

    Parameters
    ----------
    parents
        ``(M, k)`` int64 candidate-parent table from :func:`screen_parents`; repeated entries
        in a row are masked (their weight is fixed at 0).
    hidden
        Width of the entrywise MLPs f and f⁻¹ (64; Supp. F.4).
    init_std
        Standard deviation of the initial weights.
    generator
        Generator for the initial values.

    Attributes
    ----------
    w
        ``(M, k)`` edge weights, ``A[parents[c, j], c] = w[c, j]``.
    """

    def __init__(
        self,
        parents: torch.Tensor,
        *,
        hidden: int = 64,
        init_std: float = 1e-3,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        m, k = parents.shape
        parents, _ = torch.sort(parents.to(torch.long), dim=1)  # CSR wants sorted columns
        dup = torch.zeros_like(parents, dtype=torch.bool)
        dup[:, 1:] = parents[:, 1:] == parents[:, :-1]
        self.register_buffer("parents", parents)
        self.register_buffer("mask", (~dup).to(torch.float32))
        # CSR structure of Aᵀ (rows = child) and of A (rows = parent), fixed for the fit
        flat = parents.reshape(-1)
        child_of = torch.arange(m).repeat_interleave(k)
        by_parent = torch.argsort(flat * m + child_of)
        counts = torch.bincount(flat, minlength=m)
        self.register_buffer("crow_child", torch.arange(0, m * k + 1, k))
        self.register_buffer("crow_parent", torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)]))
        self.register_buffer("by_parent", by_parent)
        self.register_buffer("child_of", child_of)
        self.w = nn.Parameter(torch.randn(m, k, generator=generator) * init_std)
        self.f = EntrywiseMLP(hidden, generator=generator)
        self.f_inv = EntrywiseMLP(hidden, generator=generator)

    @property
    def n_features(self) -> int:
        """M."""
        return int(self.w.shape[0])

    def weights(self) -> torch.Tensor:
        """``(M, k)`` effective weights (repeated candidates masked to 0)."""
        return self.w * self.mask

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        """``f(X)`` standardized per feature over the batch, as ``LowRankSEMVAE.transform``."""
        return standardize_batch(self.f(x))

    def predict(self, fx: torch.Tensor) -> torch.Tensor:
        """``f(X) A``: ``(B, M)`` → ``(B, M)``, a sparse product over the candidate parents, O(B·M·k)."""
        return _SparseProduct.apply(
            fx,
            self.weights(),
            self.parents,
            self.crow_child,
            self.crow_parent,
            self.by_parent,
            self.child_of,
        )

    def forward(self, x: torch.Tensor) -> ElboTerms:
        """Negative-ELBO terms of Eq. 8 (mean posterior) for a standardized batch ``(B, M)``."""
        fx = self.transform(x)
        mu = fx - self.predict(fx)
        kl = 0.5 * mu.pow(2).sum(dim=1).mean()
        recon = 0.5 * (x - self.f_inv(fx)).pow(2).sum(dim=1).mean()
        return ElboTerms(recon=recon, kl=kl)

    def l1(self) -> torch.Tensor:
        """Exact ``‖A‖₁`` (Eq. 9), O(M·k)."""
        return self.weights().abs().sum()

    def acyclicity(self, state: dict[str, torch.Tensor], n_iter: int) -> torch.Tensor:
        """``ρ(A ∘ A)`` by :func:`h_spectral_sparse`."""
        return h_spectral_sparse(self.weights(), self.parents, n_iter=n_iter, state=state)

    def edges(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(parent, child, weight)`` of every candidate entry (E = M·k, masked ones weight 0)."""
        return self.parents.reshape(-1), self.child_of, self.weights().detach().reshape(-1)

    def restrict_support(self, tau: float) -> None:
        """Fix every weight with ``|w| ≤ τ`` at 0 for the rest of the fit (masks it out)."""
        with torch.no_grad():
            self.mask.mul_((self.weights().abs() > tau).to(self.mask.dtype))


@dataclass
class ScreenedFit:
    """Output of :func:`fit_screened`.

    Attributes
    ----------
    parents
        ``(M, K)`` int64 numpy candidate-parent table (sorted per row).
    weights
        ``(M, K)`` float64 numpy weights, ``A[parents[c, j], c] = weights[c, j]`` (masked and
        off-support entries are 0).
    history
        One dict per outer step of both phases: ``phase`` (1: sparse fit without acyclicity,
        2: augmented Lagrangian), ``recon``, ``kl``, ``neg_elbo``, ``l1``, ``h``, ``rho``,
        ``alpha``, ``epochs``, ``seconds``, ``n_support``, ``thresholded_dag``.
    model
        The trained :class:`ScreenedSEMVAE`.
    screen_seconds
        Wall time of :func:`screen_parents`.
    """

    parents: np.ndarray
    weights: np.ndarray
    history: list[dict[str, Any]] = field(default_factory=list)
    model: ScreenedSEMVAE | None = None
    screen_seconds: float = 0.0

    def adjacency(self, tau: float) -> sp.csr_array:
        """``(M, M)`` sparse ``A ∘ 𝕀(|A| > τ)`` (float64; ``[p, c]``: weight of p → c)."""
        return _edges_to_csr(self.parents, self.weights, tau)

    def scores(self) -> np.ndarray:
        """Dense ``(M, M)`` float64 A (all candidate weights; for AUPRC at small M)."""
        return _edges_to_csr(self.parents, self.weights, -np.inf).toarray()  # repeats summed


def _edges_to_csr(parents: np.ndarray, weights: np.ndarray, tau: float) -> sp.csr_array:
    m, k = parents.shape
    w = weights.reshape(-1)
    keep = np.abs(w) > tau
    child = np.repeat(np.arange(m), k)
    return sp.csr_array((w[keep], (parents.reshape(-1)[keep], child[keep])), shape=(m, m))


def _is_dag(parents: torch.Tensor, weights: torch.Tensor, tau: float) -> bool:
    from cape_pipeline.causal.postprocess import is_acyclic

    return is_acyclic(_edges_to_csr(parents.cpu().numpy(), weights.detach().cpu().double().numpy(), tau))


def fit_screened(
    x: torch.Tensor,
    config: Any,
    *,
    epochs: int,
    seed: int = 0,
    device: str | torch.device = "auto",
    progress: bool = False,
) -> ScreenedFit:
    """Fit the SEM of Eqs. 5–10 with A on screened candidate parents, in two phases.

    1. :func:`screen_parents` (k = ``config.n_candidates`` per round, ``3k`` candidates per feature).
    2. Phase 1, half of ``epochs``: minibatch AdamW on ``−ELBO + λs‖A‖₁`` (Eq. 9)
       without the acyclicity term — SDCD's first stage, which keeps the edges the data
       support whatever their direction.
    3. Phase 2, the other half: A is restricted to the phase-1 support ``|A| > τ`` and the
       augmented Lagrangian of Eq. 10 with the spectral ``h = ρ(A ∘ A)`` runs over
       ``config.max_outer`` outer steps until ``|A| > τ`` is a DAG; then A's support is frozen
       to that DAG, the acyclicity term is dropped (no cycle can form on it) and the remaining
       epochs refit the weights that the growing ρ had shrunk.

    Parameters
    ----------
    x
        ``(N, M)`` float tensor, standardized columns, no NaN.
    config
        The options, a :class:`~cape_pipeline.causal.screened.config.ScreenedConfig`: its
        ``n_candidates`` is k of :func:`screen_parents`, its ``threshold`` τ the phase-1 support
        and the DAG check of phase 2 (its ``epochs`` and ``min_steps`` are resolved by the caller).
    epochs
        The epoch budget of the two phases together (≥ 1).
    seed
        Seed of the local generators (initialisation, shuffling).
    device
        ``"auto"``, ``"cpu"``, ``"cuda"``...
    progress
        Show a rich progress bar.

    Returns
    -------
    ScreenedFit

    Raises
    ------
    CapeFitError
        If the loss or the weights become NaN/inf (message names ``lr``).

    Cost O(N·M²) for the screen (row blocks, no M × M matrix), then O(N·M·k) per epoch.
    """
    from cape_pipeline._progress import progress_task
    from cape_pipeline._utils import resolve_device
    from cape_pipeline.causal.fitting import augmented_lagrangian_step
    from cape_pipeline.errors import CapeFitError

    dev = resolve_device(device)
    n, m = x.shape
    x = x.to(dev, torch.float32)
    t0 = time.perf_counter()
    parents = screen_parents(x, int(config.n_candidates))
    threshold = float(config.threshold)
    screen_seconds = time.perf_counter() - t0
    gen_init = torch.Generator().manual_seed(seed)
    model = ScreenedSEMVAE(parents.cpu(), hidden=config.hidden, generator=gen_init).to(dev)
    gen_cpu = torch.Generator().manual_seed(seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    bs = min(config.batch_size, n)
    epochs_1 = max(1, epochs // 2)
    epochs_2 = max(1, epochs - epochs_1)
    inner_2 = max(1, math.ceil(epochs_2 / config.max_outer))
    # (phase, epochs) blocks: phase 1 logged in ~max_outer blocks too
    inner_1 = max(1, math.ceil(epochs_1 / config.max_outer))
    blocks = [(1, min(inner_1, epochs_1 - i)) for i in range(0, epochs_1, inner_1)]
    blocks += [(2, min(inner_2, epochs_2 - i)) for i in range(0, epochs_2, inner_2)]
    rho, alpha, h_last = config.rho_init, 0.0, math.inf
    frozen = False
    state: dict[str, torch.Tensor] = {}
    history: list[dict[str, Any]] = []
    epochs_done = 0
    with progress_task("discover screened", epochs, unit="epochs", show=progress) as bar:
        phase_prev = 1
        for phase, n_ep in blocks:
            if phase == 2 and phase_prev == 1:
                model.restrict_support(threshold)  # A on the phase-1 support |A| > τ
            phase_prev = phase
            t_block = time.perf_counter()
            sums = np.zeros(4)
            n_seen = 0
            for _ in range(n_ep):
                for idx in shuffled_batches(n, bs, gen_cpu, device=dev, min_size=2):
                    terms = model(x[idx])
                    l1 = model.l1()
                    pen = config.lambda_sparse * l1
                    h = torch.zeros((), device=dev)
                    if phase == 2 and not frozen:
                        h = model.acyclicity(state, config.power_iters)
                        pen = pen + 0.5 * rho * h * h + alpha * h
                    loss = terms.neg_elbo + pen / bs
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    sums += np.array([terms.recon.item(), terms.kl.item(), l1.item(), h.item()])
                    n_seen += 1
                epochs_done += 1
                bar.update(advance=1, state=f"phase {phase} h={h.item():.3g} ρ={rho:.0e}")
            with torch.no_grad():
                h_now = float(model.acyclicity(state, 5 * config.power_iters))
            means = sums / max(n_seen, 1)
            if not (math.isfinite(h_now) and np.isfinite(means).all() and bool(torch.isfinite(model.w).all())):
                raise CapeFitError(
                    f"discover: the screened fit diverged in phase {phase} (−ELBO {means[0] + means[1]:.3g}, "
                    f"h(A) {h_now:.3g}, lr={config.lr:g}): the loss or the weights became NaN/inf. "
                    f"Lower `lr` (e.g. --set discover.screened.lr={config.lr / 10:g}); nothing was stored."
                )
            is_dag = _is_dag(model.parents, model.weights(), threshold)
            history.append({
                "phase": phase, "recon": means[0], "kl": means[1], "neg_elbo": means[0] + means[1],
                "l1": means[2], "h": h_now, "rho": rho, "alpha": alpha, "epochs": epochs_done,
                "seconds": time.perf_counter() - t_block,
                "n_support": int((model.weights().abs() > threshold).sum()),
                "thresholded_dag": is_dag,
                "frozen": frozen,
            })
            logger.debug("screened fit block %s", history[-1])
            if phase == 2 and not frozen:
                if is_dag:
                    # the output graph is a DAG: freeze A's support to it and drop the penalty
                    # (no cycle can form on a DAG's edges); the remaining epochs refit the
                    # weights the large ρ had shrunk
                    frozen = True
                    model.restrict_support(threshold)
                else:
                    rho, alpha, h_last = augmented_lagrangian_step(rho, alpha, h_now, h_last, rho_cap=config.rho_max)
    with torch.no_grad():
        weights = model.weights().detach().cpu().double().numpy()
    return ScreenedFit(
        parents=model.parents.cpu().numpy(),
        weights=weights,
        history=history,
        model=model,
        screen_seconds=screen_seconds,
    )


def fit_algorithm(x: np.ndarray, cfg: Any, inputs: Any) -> Any:
    """Algorithm ``"screened"`` behind Step I's common signature
    (:func:`~cape_pipeline.causal.algorithms.fit_algorithm`): :func:`fit_screened` with the
    options of ``cfg`` (a :class:`~cape_pipeline.causal.screened.config.ScreenedConfig`), thresholded
    at τ, cycles broken."""
    from cape_pipeline.causal.algorithms import AlgorithmFit
    from cape_pipeline.causal.postprocess import break_cycles, cap_rows

    fit = fit_screened(torch.from_numpy(x.astype(np.float32)), cfg, epochs=int(inputs.epochs), seed=int(inputs.seed),
                       device=inputs.device, progress=inputs.progress)
    adj = cap_rows(fit.adjacency(float(cfg.threshold)), inputs.max_per_row)
    adj, n_dropped = break_cycles(adj)
    params = {"device": str(fit.model.w.device) if fit.model is not None else str(inputs.device),
              "n_candidate_columns": int(fit.parents.shape[1]), "screen_seconds": float(fit.screen_seconds)}
    return AlgorithmFit(adjacency=adj, history=fit.history, scores=fit.scores() if inputs.dense_scores else None,
                      n_cycle_edges_dropped=n_dropped, params=params)
