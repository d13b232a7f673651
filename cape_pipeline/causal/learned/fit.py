"""The learned algorithm's fit: the per-feature MLPs over screened candidates
(:class:`CandidateMLP`), their two stages and the greedy DAG (:func:`fit_learned`), and the
algorithm behind Step I's common signature (:func:`fit_algorithm`).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from cape_pipeline._utils import shuffled_batches
from cape_pipeline.causal.acyclicity import h_spectral_sparse
from cape_pipeline.causal.postprocess import greedy_dag, is_acyclic
from cape_pipeline.causal.screen import candidate_parents, parent_table

__all__ = ["CandidateMLP", "LearnedFit", "fit_learned", "learned_options"]

logger = logging.getLogger(__name__)


class CandidateMLP(nn.Module):
    """One small MLP per feature over its candidate parents, all evaluated as one batched product.

    ``x̂_c = b₂[c] + Σ_h v[c, h] σ(Σ_j W₁[c, j, h] x_{P[c, j]} + b₁[c, h])`` with a learned
    log-variance per feature (Gaussian NLL). The strength of candidate j of feature c is
    ``A[c, j] = ‖W₁[c, j, :]‖₂`` (SDCD's adjacency).

    Parameters
    ----------
    parents
        ``(M, K)`` int64 candidate table; entries with ``mask == 0`` are never used.
    mask
        ``(M, K)`` 0/1 float, which candidates are live (default: all, repeats masked).
    hidden
        Sigmoid units per feature (10, as SDCD).
    generator
        Generator of the initial weights.
    """

    def __init__(
        self,
        parents: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        hidden: int = 10,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        m, k = parents.shape
        parents = parents.to(torch.long)
        if mask is None:
            srt, _ = torch.sort(parents, dim=1)
            mask = torch.ones(m, k)
            # keep the first copy of each repeated candidate
            order = torch.argsort(parents, dim=1, stable=True)
            dup_sorted = torch.zeros_like(srt, dtype=torch.bool)
            dup_sorted[:, 1:] = srt[:, 1:] == srt[:, :-1]
            mask.scatter_(1, order, (~dup_sorted).float())
        self.register_buffer("parents", parents)
        self.register_buffer("mask", mask.to(torch.float32))
        scale = 1.0 / math.sqrt(max(k, 1))
        self.w1 = nn.Parameter(torch.randn(m, hidden, k, generator=generator) * scale)
        self.b1 = nn.Parameter(torch.zeros(m, hidden, 1))
        self.v = nn.Parameter(torch.randn(m, 1, hidden, generator=generator) / math.sqrt(hidden))
        self.b2 = nn.Parameter(torch.zeros(m, 1))
        self.log_var = nn.Parameter(torch.zeros(m, 1))

    def weights(self) -> torch.Tensor:
        """``(M, hidden, K)`` input-layer weights with the dead candidates zeroed."""
        return self.w1 * self.mask[:, None, :]

    def strength(self) -> torch.Tensor:
        """``(M, K)`` ``A[c, j] = ‖W₁[c, j, :]‖₂`` (0 for dead candidates), differentiable."""
        return (self.weights().pow(2).sum(dim=1) + 1e-12).sqrt() * self.mask

    def root_strength(self) -> torch.Tensor:
        """``(M, K)`` ``√A`` with a finite gradient at 0 (for ``ρ(A) = ρ(√A ∘ √A)``)."""
        return (self.weights().pow(2).sum(dim=1) + 1e-8).pow(0.25) * self.mask

    def forward(self, xt: torch.Tensor) -> torch.Tensor:
        """Per-feature Gaussian NLL, summed over features and averaged over rows.

        ``xt`` is ``(M, B)``: the batch transposed (features × rows).
        """
        xp = xt[self.parents]  # (M, K, B)
        hid = torch.sigmoid(torch.baddbmm(self.b1, self.weights(), xp))  # (M, h, B)
        pred = torch.bmm(self.v, hid)[:, 0, :] + self.b2  # (M, B)
        nll = 0.5 * ((xt - pred).pow(2) * torch.exp(-self.log_var) + self.log_var)
        return nll.sum(dim=0).mean()

    def l1(self) -> torch.Tensor:
        """``‖W₁‖₁`` over live candidates."""
        return self.weights().abs().sum()


@dataclass
class LearnedFit:
    """Output of :func:`fit_learned`.

    Attributes
    ----------
    parent, child, strength
        ``(E,)`` int64, int64, float64: every live stage-2 pair and its strength
        ``‖W₁[child, parent, :]‖₂`` (the edge confidence; before thresholding).
    adjacency
        ``(M, M)`` sparse float64 DAG: the pairs with strength > τ after greedy cycle removal,
        weight = strength.
    history
        One dict per epoch: ``stage``, ``epoch``, ``train_nll``, ``val_nll``, ``h``, ``gamma``,
        ``n_support``, ``thresholded_dag``, ``v_norm`` (mean ‖v‖ of the output layers), ``seconds``.
    n_candidates, n_screened
        Pairs after the pre-screen (M·K, repeats counted once) and after the learned screen.
    screen_seconds
        Wall time of the pre-screen.
    n_cycle_edges_dropped
        Pairs above τ skipped by the greedy insertion.
    """

    parent: np.ndarray
    child: np.ndarray
    strength: np.ndarray
    adjacency: sp.csr_array
    history: list[dict[str, Any]] = field(default_factory=list)
    n_candidates: int = 0
    n_screened: int = 0
    screen_seconds: float = 0.0
    n_cycle_edges_dropped: int = 0

    def scores(self, m: int) -> np.ndarray:
        """Dense ``(M, M)`` strengths (0 off the stage-2 support), for AUPRC at small M."""
        out = np.zeros((m, m))
        np.maximum.at(out, (self.parent, self.child), self.strength)
        return out


def learned_options(cfg: Any, seed: int = 0) -> dict[str, Any]:
    """Keyword arguments of :func:`fit_learned` from a
    :class:`~cape_pipeline.causal.learned.config.LearnedConfig` and the run's ``seed``.

    ``threshold`` τ is the learned screen's cut (``screen_threshold``) and τ/2 the output's;
    ``epochs`` caps the epochs of stages 1 and 3.
    """
    return {
        "n_candidates": int(cfg.n_candidates),
        "screen_threshold": float(cfg.threshold),
        "threshold": float(cfg.threshold) / 2,
        "power_iters": int(cfg.power_iters),
        "seed": int(seed),
        "hidden": int(cfg.hidden),
        "lr": float(cfg.lr),
        "batch_size": int(cfg.batch_size),
        "max_epochs_screen": int(cfg.epochs),
    }


def _pairs(model: CandidateMLP) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with torch.no_grad():
        s = model.strength().detach().cpu().double().numpy()
    live = model.mask.cpu().numpy() > 0
    m, k = s.shape
    child = np.repeat(np.arange(m), k).reshape(m, k)
    return model.parents.cpu().numpy()[live], child[live], s[live]


def _is_dag_at(model: CandidateMLP, tau: float) -> tuple[bool, int]:
    p, c, s = _pairs(model)
    keep = s > tau
    m = model.mask.shape[0]
    g = sp.csr_array((s[keep], (p[keep], c[keep])), shape=(m, m))
    return is_acyclic(g), int(keep.sum())


def fit_learned(
    x: torch.Tensor,
    *,
    n_candidates: int = 20,
    threshold: float = 0.1,
    screen_threshold: float = 0.2,
    hidden: int = 10,
    lambda_l1: float = 1e-2,
    weight_decay: float = 2e-4,
    output_decay: float | None = None,
    lr: float = 1e-2,
    batch_size: int = 256,
    max_epochs_screen: int = 200,
    dag_steps: int = 1600,
    gamma_max: float = 10.0,
    patience: int = 10,
    min_delta: float = 1e-4,
    min_delta_screen: float = 1e-3,
    power_iters: int = 15,
    refit: bool = True,
    seed: int = 0,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> LearnedFit:
    """Learned screen, acyclic fit and greedy DAG (:mod:`cape_pipeline.causal.learned`), for a
    standardized matrix.

    Parameters
    ----------
    x
        ``(N, M)`` float tensor, standardized columns, no NaN; N ≥ 50.
    n_candidates
        k of :func:`candidate_parents` (4k candidates per feature).
    threshold
        τ of the output graph on the strength ``‖W₁‖₂`` (0.1, SDCD's).
    screen_threshold
        Stage-1 strength a pair needs to enter stage 2 (0.2, SDCD's).
    hidden
        Sigmoid units per feature MLP (10).
    lambda_l1, weight_decay
        ``λ₁‖W₁‖₁`` (1e-2; stage 1 and 2) and L2 on all weights (2e-4), both per row of data
        (the NLL is summed over features, averaged over rows).
    output_decay
        L2 on the output weights ``v`` instead of ``weight_decay`` (None: ``weight_decay``).
    lr, batch_size
        Adam step (1e-2) and rows per step (256).
    max_epochs_screen
        Epoch cap of the learned screen (stage 1) and of the refit (stage 3); both stop earlier
        on the validation NLL (``patience`` epochs without an improvement of ``min_delta``).
    dag_steps
        Optimizer steps of stage 2 (1600, whatever N: γ ramps linearly from 0 to
        ``gamma_max`` over them and is held once the thresholded graph is a DAG; once it is, the
        stage may stop early on the validation NLL).
    gamma_max
        γ of the acyclicity penalty ``γ·ρ(A)`` at the end of the ramp (10, SDCD's).
    min_delta
        An epoch counts as an improvement when the validation NLL (nats per row, summed over
        features) falls by more than ``min_delta`` per feature (1e-4; stages 2 and 3) or
        ``min_delta_screen`` (1e-3; stage 1, whose output is only the support: at d = 1000 on
        SDCD's generator the support above ``screen_threshold`` changes by < 2 % over the
        epochs this saves, ``benchmarks/discover/learned/RESULTS.md``).
    refit
        Stage 3: refit the MLPs on the greedy DAG without the penalty (True).
    power_iters
        Power-iteration steps per evaluation of ρ (warm-started).
    seed
        Seeds the split, the initial weights and the batch order (local generators).
    device
        Torch device of the fit.
    progress
        Show a rich progress bar.

    Returns
    -------
    LearnedFit

    Raises
    ------
    CapeDataError
        Fewer than 50 rows or 2 features (names the fix: ``algorithm='low-rank'``).
    CapeFitError
        If the NLL or the weights become NaN/inf (names ``lr``).
    """
    from cape_pipeline._progress import progress_task
    from cape_pipeline.causal.algorithms import LEARNED_MIN_OBS
    from cape_pipeline.errors import CapeDataError, CapeFitError

    dev = torch.device(device)
    n, m = x.shape
    if n < LEARNED_MIN_OBS or m < 2:
        raise CapeDataError(
            f"discover: algorithm='learned' needs at least {LEARNED_MIN_OBS} rows and 2 features (20 % of "
            f"the rows are held out for early stopping), got {n} × {m}; use algorithm='low-rank'"
        )
    x = x.to(dev, torch.float32)
    v_decay = weight_decay if output_decay is None else float(output_decay)
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    cand = candidate_parents(x, n_candidates)
    screen_seconds = time.perf_counter() - t0
    perm = torch.randperm(n, generator=gen)
    n_val = max(1, min(n // 5, 5000))
    xt = x.T.contiguous()  # (M, N)
    val_idx, tr_idx = perm[:n_val].to(dev), perm[n_val:].to(dev)
    x_val = xt[:, val_idx]
    n_tr = tr_idx.numel()
    bs = min(batch_size, n_tr)
    history: list[dict[str, Any]] = []

    def evaluate(model: CandidateMLP) -> float:
        with torch.no_grad():
            tot = 0.0
            step = max(1, (1 << 22) // max(m * model.parents.shape[1], 1))
            for s in range(0, n_val, step):
                xb = x_val[:, s : s + step]
                tot += float(model(xb)) * xb.shape[1]
            return tot / n_val

    def run_stage(model: CandidateMLP, stage: int, max_epochs: int) -> CandidateMLP:
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        best, best_state, bad = math.inf, None, 0
        gamma, frozen = 0.0, False
        state: dict[str, torch.Tensor] = {}
        with progress_task(f"discover learned, stage {stage}", max_epochs, unit="epochs", show=progress) as bar:
            for epoch in range(max_epochs):
                t_ep = time.perf_counter()
                tot, nb = 0.0, 0
                if stage == 2 and not frozen:
                    # linear ramp to gamma_max over the stage, held once the graph is a DAG
                    gamma = gamma_max * (epoch + 1) / max(max_epochs, 1)
                h_val = 0.0
                for idx in shuffled_batches(n_tr, bs, gen, device=dev, stop=n_tr - 1, min_size=2):
                    xb = xt[:, tr_idx[idx]]
                    nll = model(xb)
                    loss = nll + lambda_l1 * model.l1() + weight_decay * model.w1.pow(2).sum() + v_decay * model.v.pow(2).sum()
                    if stage == 2 and gamma > 0:
                        # ρ(A) of the strengths (SDCD): h_spectral_sparse takes w with A = w ∘ w
                        h = h_spectral_sparse(model.root_strength(), model.parents, n_iter=power_iters, state=state)
                        loss = loss + gamma * h
                        h_val = float(h.detach())
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    tot += float(nll.detach())
                    nb += 1
                val = evaluate(model)
                if not (math.isfinite(val) and math.isfinite(tot)):
                    raise CapeFitError(
                        f"discover: the learned fit diverged in stage {stage} (validation NLL {val:.3g}, "
                        f"lr={lr:g}); lower `lr`; nothing was stored"
                    )
                is_dag, n_sup = _is_dag_at(model, screen_threshold if stage == 1 else threshold)
                if stage == 2 and is_dag and not frozen:
                    frozen = True
                history.append({
                    "stage": stage, "epoch": epoch + 1, "train_nll": tot / max(nb, 1), "val_nll": val,
                    "h": h_val, "gamma": gamma, "n_support": n_sup, "thresholded_dag": bool(is_dag),
                    "v_norm": float(model.v.detach().norm(dim=-1).mean()),
                    "seconds": time.perf_counter() - t_ep,
                })
                logger.debug("learned fit epoch %s", history[-1])
                bar.update(advance=1, state=f"val NLL {val:.4g} edges {n_sup}")
                # early stopping: stage 1 always; stage 2 once the thresholded graph is a DAG
                if stage != 2 or (frozen and is_dag):
                    if not math.isfinite(best) or val < best - (min_delta_screen if stage == 1 else min_delta) * m:
                        best, bad = val, 0
                        best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                    else:
                        bad += 1
                        if bad >= patience:
                            break
        if best_state is not None:
            model.load_state_dict(best_state)
        return model

    g_init = torch.Generator().manual_seed(seed + 1)
    m1 = CandidateMLP(cand.cpu(), hidden=hidden, generator=g_init).to(dev)
    n_cand = int(m1.mask.sum())
    m1 = run_stage(m1, 1, max_epochs_screen)
    p1, c1, s1 = _pairs(m1)
    kept = s1 > screen_threshold
    n_screened = int(kept.sum())
    # stage 2: fresh MLPs on the kept pairs (each row padded to the widest, padding masked)
    par2, live2 = parent_table(p1[kept], c1[kept], m)
    mask2 = live2.to(torch.float32)
    m2 = CandidateMLP(par2, mask2, hidden=hidden, generator=g_init).to(dev)
    del m1
    steps_per_epoch = max(1, math.ceil((n_tr - 1) / bs))
    m2 = run_stage(m2, 2, max(1, math.ceil(dag_steps / steps_per_epoch)))
    p, c, s = _pairs(m2)
    above = s > threshold
    keep_e = greedy_dag(p[above], c[above], s[above], m)
    n_dropped = int((~keep_e).sum())
    if refit:
        # stage 3: the DAG's pairs, refit without the penalty (which had shrunk them)
        # (warm start: the stage-2 MLPs with every pair off the DAG masked out)
        live = (m2.mask.cpu().numpy() > 0)
        dag_mask = np.zeros(live.shape, dtype=np.float32)
        rows, cols = np.nonzero(live)  # the order _pairs uses
        sel = np.flatnonzero(above)[keep_e]
        dag_mask[rows[sel], cols[sel]] = 1.0
        with torch.no_grad():
            m2.mask.copy_(torch.from_numpy(dag_mask))
        m3 = run_stage(m2, 3, max_epochs_screen)
        p, c, s = _pairs(m3)
        above = s > threshold
        keep_e = np.ones(int(above.sum()), dtype=bool)
    pa, ca, sa = p[above][keep_e], c[above][keep_e], s[above][keep_e]
    adj = sp.csr_array((sa, (pa, ca)), shape=(m, m))
    return LearnedFit(
        parent=p, child=c, strength=s, adjacency=adj, history=history,
        n_candidates=n_cand, n_screened=n_screened, screen_seconds=screen_seconds,
        n_cycle_edges_dropped=n_dropped,
    )


def fit_algorithm(x: np.ndarray, cfg: Any, inputs: Any) -> Any:
    """Algorithm ``"learned"`` behind Step I's common signature
    (:func:`~cape_pipeline.causal.algorithms.fit_algorithm`): :func:`fit_learned` on the
    standardized ``(N, M)`` ``x`` (as float32) with :func:`learned_options` of ``cfg``, a
    :class:`~cape_pipeline.causal.learned.config.LearnedConfig`."""
    from cape_pipeline._utils import resolve_device
    from cape_pipeline.causal.algorithms import AlgorithmFit
    from cape_pipeline.causal.postprocess import cap_rows

    device = resolve_device(inputs.device)
    fit = fit_learned(torch.from_numpy(x.astype(np.float32)), **learned_options(cfg, inputs.seed), device=device,
                      progress=inputs.progress)
    history = fit.history
    adj = cap_rows(fit.adjacency, inputs.max_per_row)
    params = {
        "device": str(device),
        "output_threshold": float(cfg.threshold) / 2,
        "n_candidate_pairs": int(fit.n_candidates),
        "n_screened_pairs": int(fit.n_screened),
        "screen_seconds": float(fit.screen_seconds),
        "epochs_stage1": sum(1 for h in history if h["stage"] == 1),
        "epochs_stage2": sum(1 for h in history if h["stage"] == 2),
    }
    return AlgorithmFit(adjacency=adj, history=history, scores=fit.scores(x.shape[1]) if inputs.dense_scores else None,
                      n_cycle_edges_dropped=fit.n_cycle_edges_dropped, params=params)
