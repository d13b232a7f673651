"""Augmented-Lagrangian fit of the low-rank SEM-VAE (paper 000, Eqs. 9–10).

Minimises, by minibatch AdamW, the subproblem (Eq. 10)

    L = −ELBO + λs ‖A‖₁ + (ρ/2) h(A)² + α h(A)

and between subproblems updates ``α ← α + ρ h`` and ``ρ ← 10 ρ`` while h did not fall below a
quarter of its previous value; it stops at ``h < h_tol`` (1e-8), ``ρ > rho_max`` (1e16), or
when the epoch budget is spent. Scaling: the ELBO terms are per-row averages summed over the
features (the NOTEARS least-squares scale, 0.5‖X(I − A)‖²/n for a linear f), and the penalty
terms are divided by the batch size, i.e. the whole objective is that of the batch *sum*
divided by the batch size — so the paper's λs = 1 is a per-batch (128 rows) weight, the same
for every dataset (λs = 1 per *row* was measured to empty the graph on synth10).

Held penalty: with ``SolverConfig.dag_threshold = τ`` (the API's default) ρ and α are only
updated while the τ-thresholded graph ``|A| > τ`` still has a cycle. The plain rule keeps
raising ρ (to 1e14 on synth10) because the spectral h of a matrix whose small entries close
cycles vanishes only when *all* entries do, and every ``|A_ij|`` ended below τ (F1 0); holding
ρ once the output is a DAG gave F1 0.56 there (benchmarks/discover/lowrank/RESULTS.md).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from cape_pipeline._utils import resolve_device, shuffled_batches
from cape_pipeline.causal.acyclicity import h_majorant, h_spectral
from cape_pipeline.causal.config import ACYCLICITY, DEFAULT_EPOCHS, L1_MODES, DiscoverConfig
from cape_pipeline.causal.model import POSTERIORS, LowRankSEMVAE, batch_shard
from cape_pipeline.distributed import data_parallel, shard, weighted_backward, world
from cape_pipeline.errors import CapeFitError

__all__ = ["FitResult", "SolverConfig", "fit_low_rank_vae"]

logger = logging.getLogger(__name__)

#: the defaults of Step I, written once in :class:`~cape_pipeline.causal.config.DiscoverConfig`
_D = DiscoverConfig()


@dataclass(frozen=True)
class SolverConfig:
    """Every setting of the Step I solver (defaults: paper 000, Supp. F.4, and measurements).

    The defaults are those of :class:`~cape_pipeline.causal.config.DiscoverConfig` (written
    there once); :meth:`from_discover` builds the settings of a
    :func:`~cape_pipeline.causal.api.discover` run. Here ``epochs`` is a number (the API
    resolves ``epochs=None``) and ``dag_threshold=None`` is the plain rule of Eq. 10.

    Attributes
    ----------
    rank
        r of ``A = U Vᵀ`` (Supp. G.4: 40).
    lambda_sparse
        λs of Eq. 9 (Supp. F.4: 1), weight of ``‖A‖₁`` (see ``l1``) per batch.
    epochs
        Total epoch budget over all outer steps (Supp. F.4: 100).
    batch_size
        Rows per AdamW step (Supp. F.4: 128).
    lr
        AdamW learning rate (Supp. F.4: 3e-3).
    acyclicity
        ``"spectral"`` (ρ(A∘A), NO-BEARS) or ``"majorant"`` (tr exp of |U||V|ᵀ).
    max_outer
        Number of augmented-Lagrangian outer steps; each gets ``ceil(epochs / max_outer)``
        epochs.
    h_tol, rho_max
        Stopping rule (1e-8, 1e16).
    rho_init, alpha_init
        Initial penalty and multiplier.
    hidden
        Width of the entrywise MLPs f, f⁻¹ (64).
    power_iters
        Power-iteration steps per evaluation of the spectral h (warm-started).
    weight_decay
        AdamW decoupled weight decay.
    init_scale
        Spectral radius of ``|U||V|ᵀ`` at initialisation (see :class:`LowRankSEMVAE`).
    seed
        Seed of the local generators (initialisation, shuffling, reparameterisation noise).
    l1
        How ``‖A‖₁`` of Eq. 9 is evaluated: ``"exact"`` (blockwise, O(M² r) per step),
        ``"sampled"`` (unbiased estimate from ``l1_pairs`` random pairs, O(S r)),
        ``"surrogate"`` (the factor bound ``Σ_k ‖U_k‖₁‖V_k‖₁ ≥ ‖A‖₁``, O(M r)), or ``"auto"``:
        exact for ``M ≤ l1_exact_max``, else sampled.
    l1_exact_max, l1_pairs
        Switch point of ``"auto"`` (500: at M = 1000 the exact form costs 6.8 ms per step
        against 1.2 ms sampled and 27 ms for the ELBO, one thread) and S of the sampled
        estimate.
    posterior
        ``"sampled"`` (reparameterised Z, learned σ) or ``"mean"`` (decoder on μ, KL ½‖μ‖², as
        in the DAG-GNN reference code); see :class:`LowRankSEMVAE`.
    dag_threshold
        When set (the API passes τ), the augmented-Lagrangian penalty is only tightened
        while the τ-thresholded graph ``|A| > τ`` still has a cycle: once it is a DAG, ρ and
        α are held and the remaining epochs fit the data under that penalty (None: the
        plain rule of Eq. 10, which drives every entry towards 0 for the spectral h).
    dag_max_edges_per_row
        Per-row cap on that thresholded graph (None: every entry above τ). The API passes
        the cap of its output graph, so the check looks at the graph that is returned.
    dtype
        Floating type of the data and the parameters during the fit, ``"float32"`` (default)
        or ``"float64"`` (slower; rounding differences between two runs that sum in another
        order, e.g. on 1 or 2 data-parallel ranks, fall from ~1e-7 to ~1e-16 relative).
    """

    rank: int = _D.rank
    lambda_sparse: float = _D.lambda_sparse
    epochs: int = DEFAULT_EPOCHS
    batch_size: int = _D.batch_size
    lr: float = _D.lr
    acyclicity: str = _D.acyclicity
    max_outer: int = _D.max_outer
    h_tol: float = _D.h_tol
    rho_max: float = _D.rho_max
    rho_init: float = _D.rho_init
    alpha_init: float = 0.0
    hidden: int = _D.hidden
    power_iters: int = _D.power_iters
    weight_decay: float = _D.weight_decay
    init_scale: float = _D.init_scale
    seed: int = _D.seed
    l1: str = _D.l1
    l1_exact_max: int = _D.l1_exact_max
    l1_pairs: int = _D.l1_pairs
    dag_threshold: float | None = None
    dag_max_edges_per_row: int | None = None
    posterior: str = POSTERIORS[0]
    dtype: str = "float32"

    @classmethod
    def from_discover(
        cls, cfg: DiscoverConfig, *, rank: int, epochs: int, dag_max_edges_per_row: int | None = None
    ) -> SolverConfig:
        """The solver settings of a :class:`~cape_pipeline.causal.config.DiscoverConfig`.

        ``rank`` and ``epochs`` are the effective values (capped to M − 1, resolved from
        ``epochs=None``); ``dag_threshold`` is the config's, else τ; ``posterior`` the config's
        effective one; ``dag_max_edges_per_row`` the cap of the output graph.
        """
        return cls(
            rank=int(rank),
            lambda_sparse=float(cfg.lambda_sparse),
            epochs=int(epochs),
            batch_size=int(cfg.batch_size),
            lr=float(cfg.lr),
            acyclicity=cfg.acyclicity,
            max_outer=int(cfg.max_outer),
            seed=int(cfg.seed),
            h_tol=cfg.h_tol,
            rho_max=cfg.rho_max,
            rho_init=cfg.rho_init,
            hidden=cfg.hidden,
            power_iters=cfg.power_iters,
            weight_decay=cfg.weight_decay,
            init_scale=cfg.init_scale,
            l1=cfg.l1,
            l1_exact_max=cfg.l1_exact_max,
            l1_pairs=cfg.l1_pairs,
            dag_threshold=float(cfg.threshold) if cfg.dag_threshold is None else cfg.dag_threshold,
            dag_max_edges_per_row=dag_max_edges_per_row,
            posterior=cfg.effective_posterior,
        )


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


def progress_bar(total_epochs: int, description: str = "") -> tuple[Any, Any]:
    """A started progress display for a Step I fit (epochs) and its task id; caller stops it.

    A rich bar in a terminal, periodic log lines otherwise (:func:`cape_pipeline._progress.progress`).
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from cape_pipeline._progress import progress

    bar = progress(
        lambda: Progress(
            TextColumn("[bold]discover[/] {task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} epochs"),
            TimeElapsedColumn(),
        ),
        unit="epochs",
        prefix="discover",
    )
    bar.start()
    return bar, bar.add_task(description, total=total_epochs)


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

    bar, task = progress_bar(config.epochs) if progress else (None, None)

    try:
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
                if bar is not None:
                    bar.update(
                        task,
                        advance=1,
                        description=f"outer {outer + 1}/{config.max_outer} h={h.item():.3g} ρ={rho:.0e}",
                    )
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
                    f"Lower `lr` (e.g. --set discover.lr={config.lr / 10:g}); nothing was stored."
                )
            if config.dag_threshold is not None:
                rec["thresholded_dag"] = thresholded_is_dag(
                    model, config.dag_threshold, config.dag_max_edges_per_row
                )
                if rec["thresholded_dag"]:
                    # the output graph is already acyclic: hold ρ and α (see SolverConfig)
                    h_last = h_now
                    continue
            # augmented-Lagrangian updates (Eq. 10)
            alpha += rho * h_now
            if h_now > 0.25 * h_last:
                rho *= 10.0
            h_last = h_now
            if h_now < config.h_tol or rho > config.rho_max:
                break
    finally:
        if bar is not None:
            bar.stop()

    u = model.u.detach().cpu().double().numpy()
    v = model.v.detach().cpu().double().numpy()
    return FitResult(u=u, v=v, history=history, model=model)


def fit_support(x: np.ndarray, cfg: Any, inputs: Any) -> Any:
    """Support ``"low-rank"`` (the paper's model) behind Step I's common signature
    (:func:`~cape_pipeline.causal.supports.fit_support`): :func:`fit_low_rank_vae`, then
    ``|A| > τ`` formed from the factors in row blocks and cycles broken. The augmented-Lagrangian
    penalty is held once the τ-thresholded output (with its per-row cap) is a DAG."""
    from cape_pipeline.causal.postprocess import break_cycles, threshold_low_rank
    from cape_pipeline.causal.supports import SupportFit

    solver = SolverConfig.from_discover(cfg, rank=inputs.rank, epochs=inputs.epochs,
                                        dag_max_edges_per_row=inputs.max_per_row)
    res = fit_low_rank_vae(torch.from_numpy(x.astype(np.float32)), solver, device=cfg.device, progress=inputs.progress)
    # on the factors' device (a GPU makes this O(M² r) pass cheap); same values as res.u/v
    fu, fv = (res.model.u, res.model.v) if res.model is not None else (res.u, res.v)
    adj = threshold_low_rank(fu, fv, float(cfg.threshold), max_edges_per_row=inputs.max_per_row)
    adj, n_dropped = break_cycles(adj)
    scores = None
    if inputs.dense_scores:
        scores = res.u @ res.v.T
        np.fill_diagonal(scores, 0.0)
    params = {"device": str(res.model.u.device) if res.model is not None else str(cfg.device)}
    return SupportFit(adjacency=adj, history=res.history, scores=scores, n_cycle_edges_dropped=n_dropped, params=params)
