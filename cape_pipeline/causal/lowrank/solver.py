"""Augmented-Lagrangian fit of the low-rank SEM-VAE (paper 000, Eqs. 9–10).

Minimises, by minibatch AdamW, the subproblem (Eq. 10)

    L = −ELBO + λs ‖A‖₁ + (ρ/2) h(A)² + α h(A)

and between subproblems updates ``α ← α + ρ h`` and ``ρ ← 10 ρ`` while h did not fall below a
quarter of its previous value; it stops at ``h < h_tol`` (1e-8), ``ρ > rho_max`` (1e16), or
when the epoch budget is spent. Scaling: the ELBO terms are per-row averages summed over the
features (the NOTEARS least-squares scale, 0.5‖X(I − A)‖²/n for a linear f), and the penalty
terms are divided by the batch size, i.e. the whole objective is that of the batch *sum*
divided by the batch size — so the paper's λs = 1 is a per-batch (128 rows) weight, the same
for every dataset (λs = 1 per *row*, 128 times stronger, empties the graph on synth10).

Held penalty: with ``SolverConfig.dag_threshold = τ`` (the API's default) ρ and α are only
updated while the τ-thresholded graph ``|A| > τ`` still has a cycle. The plain rule keeps
raising ρ because the spectral h of a matrix whose small entries close cycles vanishes only
when *all* entries do, which drives every ``|A_ij|`` below τ and leaves no edge; holding ρ
once the output is a DAG keeps the edges (synth10: benchmarks/discover/lowrank/RESULTS.md).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from cape_pipeline._progress import progress_task
from cape_pipeline._utils import resolve_device, shuffled_batches
from cape_pipeline.causal.acyclicity import h_majorant, h_spectral
from cape_pipeline.causal.fitting import augmented_lagrangian_step
from cape_pipeline.causal.lowrank.config import ACYCLICITY, L1_MODES, SolverConfig
from cape_pipeline.causal.lowrank.model import LowRankSEMVAE
from cape_pipeline.causal.sem import batch_shard
from cape_pipeline.distributed import data_parallel, shard, weighted_backward, world
from cape_pipeline.errors import CapeFitError

__all__ = ["FitResult", "SolverConfig", "fit_low_rank_vae"]

logger = logging.getLogger(__name__)


@dataclass
class FitResult:
    """Output of :func:`fit_low_rank_vae`.

    Attributes
    ----------
    u, v
        ``(M, r)`` float64 numpy factors; the weighted adjacency is ``A = u @ v.T``.
    history
        One dict per outer step: ``recon``, ``kl``, ``neg_elbo``, ``l1``, ``h``, ``rho``,
        ``alpha``, ``epochs``, ``seconds``.
    model
        The trained :class:`LowRankSEMVAE` (on its device).
    """

    u: np.ndarray
    v: np.ndarray
    history: list[dict[str, Any]] = field(default_factory=list)
    model: LowRankSEMVAE | None = None


def _h(model: LowRankSEMVAE, kind: str, state: dict[str, torch.Tensor], iters: int) -> torch.Tensor:
    if kind == "majorant":
        return h_majorant(model.u, model.v)
    return h_spectral(model.u, model.v, n_iter=iters, state=state)


def _l1(model: LowRankSEMVAE, kind: str, config: SolverConfig, gen: torch.Generator) -> torch.Tensor:
    if kind == "surrogate":
        return model.l1_surrogate()
    if kind == "exact":
        return model.l1_exact()
    return model.l1_sampled(config.l1_pairs, generator=gen)


def thresholded_is_dag(model: LowRankSEMVAE, tau: float, max_edges_per_row: int | None = None) -> bool:
    """Whether the graph ``|A| > τ`` of the current factors has no directed cycle.

    The thresholded graph is formed in row blocks as a sparse matrix on the factors' device
    (:func:`~cape_pipeline.causal.postprocess.threshold_low_rank`, O(M² r) time, O(M·b)
    memory), once per outer step; it is acyclic iff every strongly connected component is a
    single node.
    """
    from cape_pipeline.causal.postprocess import is_acyclic, threshold_low_rank

    return is_acyclic(threshold_low_rank(model.u, model.v, tau, max_edges_per_row=max_edges_per_row))


def fit_low_rank_vae(
    x: torch.Tensor,
    config: SolverConfig,
    *,
    device: str | torch.device = "auto",
    progress: bool = False,
    callback: Any = None,
) -> FitResult:
    """Fit ``A = U Vᵀ`` to standardized data by the augmented Lagrangian (Eqs. 9–10).

    Parameters
    ----------
    x
        ``(N, M)`` float tensor, each column standardized (mean 0, sd 1), no NaN.
    config
        Solver settings.
    device
        ``"auto"``, ``"cpu"``, ``"cuda"``...
    progress
        Show a rich progress bar (outer step, epoch, current h).
    callback
        Optional ``callback(model, record)`` called after every outer step with the model and
        that step's history record (diagnostics; its return value is ignored).

    Returns
    -------
    FitResult
        Factors, per-outer-step history and the model.

    Raises
    ------
    ValueError
        If ``config.acyclicity`` is unknown (callers validate user input earlier).
    CapeFitError
        If the loss, h(A) or the parameters become NaN/inf (a diverged fit is never returned);
        the message names ``lr`` to lower.
    """
    if config.acyclicity not in ACYCLICITY:
        raise ValueError(f"acyclicity must be one of {ACYCLICITY}, got {config.acyclicity!r}")
    if config.l1 not in L1_MODES:
        raise ValueError(f"l1 must be one of {L1_MODES}, got {config.l1!r}")
    if config.dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {config.dtype!r}")
    dtype = getattr(torch, config.dtype)
    dev = resolve_device(device)
    n, m = x.shape
    x = x.to(dev, dtype)
    rank, size = world()  # under torchrun: data-parallel minibatches (cape_pipeline.distributed)
    gen_init = torch.Generator().manual_seed(config.seed)
    model = LowRankSEMVAE(
        m,
        config.rank,
        hidden=config.hidden,
        init_scale=config.init_scale,
        posterior=config.posterior,
        generator=gen_init,
    ).to(dev, dtype)
    gen_cpu = torch.Generator().manual_seed(config.seed + 1)
    gen_dev = torch.Generator(device=dev).manual_seed(config.seed + 2)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    ddp = data_parallel(list(model.parameters())) if size > 1 else None
    bs = min(config.batch_size, n)
    inner_epochs = max(1, math.ceil(config.epochs / config.max_outer))
    l1_kind = config.l1
    if l1_kind == "auto":
        l1_kind = "exact" if m <= config.l1_exact_max else "sampled"
    rho, alpha = config.rho_init, config.alpha_init
    h_last = math.inf
    state: dict[str, torch.Tensor] = {}
    history: list[dict[str, Any]] = []
    epochs_done = 0

    with progress_task("discover low-rank", config.epochs, unit="epochs", show=progress) as bar:
        outer = 0
        while epochs_done < config.epochs and outer < config.max_outer:
            t0 = time.perf_counter()
            sums = np.zeros(4)
            n_seen = 0
            for _ in range(inner_epochs):
                if epochs_done >= config.epochs:
                    break
                # batch statistics need two rows (one per rank)
                for idx in shuffled_batches(n, bs, gen_cpu, device=dev, min_size=max(2, size)):
                    rows = shard(idx.numel(), rank, size).to(dev) if size > 1 else None

                    def batch_loss(rows=rows, idx=idx, rho=rho, alpha=alpha):
                        with batch_shard(rows, idx.numel()):
                            terms = model(x[idx] if rows is None else x[idx[rows]], generator=gen_dev)
                        l1 = _l1(model, l1_kind, config, gen_dev)
                        h = _h(model, config.acyclicity, state, config.power_iters)
                        loss = terms.neg_elbo + (config.lambda_sparse * l1 + 0.5 * rho * h * h + alpha * h) / bs
                        return loss, terms, l1, h

                    opt.zero_grad(set_to_none=True)
                    if ddp is None:
                        loss, terms, l1, h = batch_loss()
                        loss.backward()
                    else:  # data parallel: this rank's rows through DDP, gradients of the global mean
                        loss, terms, l1, h = ddp(batch_loss)
                        weighted_backward(loss, float(rows.numel()))
                    opt.step()
                    sums += np.array(
                        [terms.recon.item(), terms.kl.item(), l1.item(), h.item()], dtype=float
                    )
                    n_seen += 1
                epochs_done += 1
                bar.update(advance=1, state=f"outer {outer + 1}/{config.max_outer} h={h.item():.3g} ρ={rho:.0e}")
            with torch.no_grad():
                h_now = float(_h(model, config.acyclicity, state, 5 * config.power_iters))
            means = sums / max(n_seen, 1)
            rec = {
                "outer": outer,
                "recon": means[0],
                "kl": means[1],
                "neg_elbo": means[0] + means[1],
                "l1": means[2],
                "h": h_now,
                "rho": rho,
                "alpha": alpha,
                "epochs": epochs_done,
                "seconds": time.perf_counter() - t0,
            }
            history.append(rec)
            logger.debug("outer step %s", rec)
            if callback is not None:
                callback(model, rec)
            outer += 1
            finite_params = all(bool(torch.isfinite(p).all()) for p in model.parameters())
            if not (math.isfinite(h_now) and np.isfinite(means).all() and finite_params):
                raise CapeFitError(
                    f"discover: the fit diverged at outer step {outer} (−ELBO {means[0] + means[1]:.3g}, "
                    f"h(A) {h_now:.3g}, lr={config.lr:g}): the loss or the parameters became NaN/inf. "
                    f"Lower `lr` (e.g. --set discover.low_rank.lr={config.lr / 10:g}); nothing was stored."
                )
            if config.dag_threshold is not None:
                rec["thresholded_dag"] = thresholded_is_dag(
                    model, config.dag_threshold, config.dag_max_edges_per_row
                )
                if rec["thresholded_dag"]:
                    # the output graph is already acyclic: hold ρ and α (see SolverConfig)
                    h_last = h_now
                    continue
            rho, alpha, h_last = augmented_lagrangian_step(rho, alpha, h_now, h_last)
            if h_now < config.h_tol or rho > config.rho_max:
                break

    u = model.u.detach().cpu().double().numpy()
    v = model.v.detach().cpu().double().numpy()
    return FitResult(u=u, v=v, history=history, model=model)


def fit_algorithm(x: np.ndarray, cfg: Any, inputs: Any) -> Any:
    """Algorithm ``"low-rank"`` (the paper's model) behind Step I's common signature
    (:func:`~cape_pipeline.causal.algorithms.fit_algorithm`): :func:`fit_low_rank_vae`, then
    ``|A| > τ`` formed from the factors in row blocks and cycles broken. The augmented-Lagrangian
    penalty is held once the τ-thresholded output (with its per-row cap) is a DAG."""
    from cape_pipeline.causal.algorithms import AlgorithmFit
    from cape_pipeline.causal.postprocess import break_cycles, threshold_low_rank

    solver = SolverConfig.from_config(cfg, seed=inputs.seed, rank=inputs.rank, epochs=inputs.epochs,
                                      dag_max_edges_per_row=inputs.max_per_row)
    res = fit_low_rank_vae(torch.from_numpy(x.astype(np.float32)), solver, device=inputs.device, progress=inputs.progress)
    # on the factors' device (a GPU makes this O(M² r) pass cheap); same values as res.u/v
    fu, fv = (res.model.u, res.model.v) if res.model is not None else (res.u, res.v)
    adj = threshold_low_rank(fu, fv, float(cfg.threshold), max_edges_per_row=inputs.max_per_row)
    adj, n_dropped = break_cycles(adj)
    scores = None
    if inputs.dense_scores:
        scores = res.u @ res.v.T
        np.fill_diagonal(scores, 0.0)
    params = {"device": str(res.model.u.device) if res.model is not None else str(inputs.device)}
    return AlgorithmFit(adjacency=adj, history=res.history, scores=scores, n_cycle_edges_dropped=n_dropped, params=params)
