"""Step II: embed a causal DAG on the hyperboloid H^d (paper 000, Sec. 3.4, Eqs. 11–21).

The objective (Eq. 15) is, per anchor feature m,

    L_con(p_m) = − Σ_{n ∈ N_k^+(m)} w_mn · log( e^{−d_mn} / (e^{−d_mn} + Σ_{n' ∈ N_k^-(m)} e^{−d_mn'}) )   (Eq. 16)
    Ω(p_m)     = π_m · d_l(p_m, p_o)                                                                   (Eq. 17)

averaged over anchors, ``L = mean_m [L_con(p_m) + λ_g Ω(p_m)]``. Positives are nodes joined to m by
a directed path of length ≤ k in either direction, weighted by the strongest such path (max
product of |A| along it; |A_mn| for a direct edge). π is PageRank on the reversed graph (Eq. 18).
Points are ``geoopt.ManifoldParameter`` on ``geoopt.Lorentz`` in float64, optimized with Riemannian
SGD (Eqs. 19–21) or Riemannian Adam.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from cape_pipeline._utils import shuffled_batches
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeFitError
from cape_pipeline.hyperbolic import lorentz
from cape_pipeline.hyperbolic.config import (
    DEFAULT_CURVATURE,
    DEFAULT_LR,
    EmbedConfig,
    check_options,
)
from cape_pipeline.hyperbolic.graph import causal_pagerank, k_hop_positives
from cape_pipeline.hyperbolic.loss import _batch_loss, _Pairs
from cape_pipeline.hyperbolic.result import HyperbolicEmbedding
from cape_pipeline.hyperbolic.schedule import (
    MAX_STEPS_PER_EPOCH,
    WINDOW_MIN_EPOCHS,
    WINDOW_MIN_STEPS,
    auto_batch_size,
    has_plateaued,
    plateau_action,
    plateau_window,
)

__all__ = [
    "EmbedConfig",
    "HyperbolicEmbedding",
    "check_options",
    "embed",
    "k_hop_positives",
    "causal_pagerank",
    "auto_batch_size",
    "has_plateaued",
    "plateau_window",
    "DEFAULT_CURVATURE",
    "DEFAULT_LR",
    "EUCLIDEAN_MAX_NORM",
    "MAX_RADIUS",
    "MAX_STEPS_PER_EPOCH",
    "RADIUS_CLIP",
    "RSGD_MAX_STEP",
    "WINDOW_MIN_EPOCHS",
    "WINDOW_MIN_STEPS",
]

log = logging.getLogger(__name__)

#: Euclidean points are read as tangent vectors at the origin and clipped to this norm before
#: ``expmap0`` so that the Poincaré image stays strictly inside the unit ball in float64.
EUCLIDEAN_MAX_NORM = 30.0

#: RSGD moves no point farther than this (hyperbolic distance) in one step: each point's
#: Riemannian gradient is clipped to norm ``RSGD_MAX_STEP / lr`` (a hub collects the gradient of
#: every anchor it is a positive of; unclipped, one step can overflow cosh).
RSGD_MAX_STEP = 1.0

#: Points are kept within this hyperbolic distance of the origin (unit hyperboloid) after every
#: step: ‖e‖ ≤ tanh(6) = 1 − 1.2e-5, Nickel & Kiela's (2017) boundary ε = 1e-5. Farther out,
#: x⁰ = cosh r exceeds 1e5 and the Minkowski products of nearby points lose their digits to
#: cancellation, until the loss turns NaN.
RADIUS_CLIP = 12.0

#: Overflow guard: a hyperbolic point farther than this from the origin stops training with a
#: :class:`~cape_pipeline.errors.CapeFitError` (beyond ~37, ‖e‖ = tanh(r/2) rounds to 1 in float64).
MAX_RADIUS = 30.0

_INIT_SCALE = 1e-3


def _clip_riemannian(points: torch.Tensor, manifold: Any, max_norm: float) -> None:
    """Scale each point's gradient so its Riemannian gradient has norm ≤ ``max_norm`` (in place).

    geoopt turns the Euclidean gradient u into the Riemannian one linearly (egrad2rgrad), so
    scaling a row of u scales that point's Riemannian gradient by the same factor.
    """
    g = points.grad
    if g is None:
        return
    with torch.no_grad():
        rg = manifold.egrad2rgrad(points, g.clone())  # geoopt flips the time sign in place
        norm = torch.sqrt(torch.clamp_min(lorentz.minkowski_inner(rg, rg), 0.0))
        factor = torch.clamp(max_norm / torch.clamp_min(norm, 1e-300), max=1.0)
        g.mul_(factor.unsqueeze(-1))


def _clip_radius(points: torch.Tensor, radius: float) -> None:
    """Pull points farther than ``radius`` from the origin back onto that sphere (in place),
    along their geodesic from the origin; the hyperboloid analogue of Nickel & Kiela's projection
    of Poincaré points to ``‖e‖ ≤ 1 − ε``."""
    with torch.no_grad():
        far = points[:, 0] > math.cosh(radius)
        if bool(far.any()):
            u = lorentz.logmap0(points[far])
            u = u * (radius / torch.linalg.vector_norm(u, dim=-1, keepdim=True))
            points[far] = lorentz.expmap0(u)


def _diverged(what: str, lr: float, optimizer: str, epoch: int) -> CapeFitError:
    return CapeFitError(
        f"embed: {what} at epoch {epoch} ({optimizer}, lr={lr:g}); the optimization diverged. "
        f"Lower `lr` (e.g. --set embed.lr={lr / 10:g}) or raise `burn_in`."
    )

def embed(
    graph: CausalGraph,
    config: EmbedConfig | None = None,
    *,
    evaluate: bool = True,
    progress: bool = False,
    **options: Any,
) -> HyperbolicEmbedding:
    """Embed a causal DAG on the hyperboloid by regularized graph contrastive learning.

    Minimizes Eq. 15, ``mean_m [L_con(p_m) + λ_g π_m d_l(p_m, p_o)]`` (Eqs. 16–17), over points
    ``p_m ∈ H^d`` (Eq. 11, curvature −1) with Riemannian Adam or Riemannian SGD (Eqs. 19–21) from
    ``geoopt``, in float64, until the loss stops falling.

    **Epochs and stopping.** An epoch is one pass over all trained anchors in a fresh random
    order, in batches of ``batch_size`` (the paper's definition). The first ``burn_in`` epochs
    use ``lr · burn_in_factor`` (the burn-in of Nickel & Kiela 2017, who use 10 epochs at lr/10
    so that the initial, random directions settle before points move outward). After that,
    training stops at the first epoch where :func:`has_plateaued` holds — the mean loss of the
    last ``window`` epochs is less than a fraction ``tol`` below the mean of the ``window``
    before — or at ``max_epochs``. ``params["converged"]`` records which. ``window=None`` uses
    :func:`plateau_window` (≥ 10 epochs and ≥ 200 optimizer steps per window). From half of
    ``max_epochs`` on, a loss that still falls, but by less than ten times ``tol`` per window,
    multiplies every learning rate by ``lr_decay``
    (:func:`~cape_pipeline.hyperbolic.schedule.plateau_action`; the epochs are in
    ``params["lr_decays_at"]``), so that a slow drift of already separated points ends in a
    plateau within ``max_epochs``; fits that plateau earlier are not touched. A graph with
    no edge (fewer than two features with one) has nothing to train: every point stays at the
    origin, ``params["trained"]`` and ``params["converged"]`` are False, and a
    :class:`~cape_pipeline.errors.CapeWarning` says so and names the discover threshold.

    **Negatives.** ``negatives=K`` draws K nodes uniformly per step, shared by the batch's
    anchors (for each anchor, the anchor itself and its positives are dropped from them), and
    estimates the sum over all |N^-(m)| negatives of Eq. 16 as ``|N^-(m)| / K_valid`` times
    the sampled sum. A step then costs one (B × K) distance matrix, O(B·K·d) as a matrix
    product, instead of O(B·M·d) (with shared samples K = 512 is the default: on large graphs
    more negatives per step reconstruct the edges better for a little more time per step;
    ``benchmarks/embed/README.md``). When K ≥ n − 1 for n trained nodes, all negatives are used (exact
    Eq. 16). ``None``: always all.

    **Isolated features.** A feature with no edge in the DAG has no positive pair, so Eq. 16
    says nothing about where it belongs: as a negative it is only pushed away from the others,
    and its PageRank equals a leaf's. With ``isolated="origin"`` (default) such features are
    not trained, not used as negatives, and placed exactly at the origin p_o, so their Poincaré
    point and rotary angles are 0: no causal information, no rotation (their attention scores are
    those of the model without CAPE). The connected features are embedded among themselves and
    cannot be crowded by hundreds of unconstrained points. ``"embed"`` trains them as the paper's
    text literally implies. ``benchmarks/embed/README.md`` measures both downstream.

    **Step scale.** Each step minimizes the *sum* over the batch's anchors of the summand of
    Eq. 15; the 1/M of Eq. 15 is a constant absorbed in η (irrelevant for Adam).
    ``loss_history`` reports the per-anchor mean, i.e. the value of Eq. 15.

    Parameters
    ----------
    graph
        Causal DAG over M features; ``graph.adjacency[m, n] ≠ 0`` ⇔ m → n with weight A_mn.
    config
        The options (:class:`~cape_pipeline.hyperbolic.EmbedConfig`, whose ``Attributes``
        document each one); ``None`` = all defaults.
    evaluate
        Compute :func:`cape_pipeline.hyperbolic.quality.embedding_quality` into
        ``params["quality"]`` (reconstruction mAP, mean rank, distortion, Spearman ρ).
    progress
        Show a ``rich`` progress bar.
    **options
        Fields of :class:`~cape_pipeline.hyperbolic.EmbedConfig` (``dim``, ``k_hop``, ``lr``,
        ``seed``, ``device``, …), replacing those of ``config``.

    Returns
    -------
    HyperbolicEmbedding
        ``hyperboloid`` (M, d+1), ``poincare`` (M, d), ``pagerank`` (M,), ``loss_history``
        (one float per epoch run), ``params`` (arguments plus ``epochs_run``, ``steps``,
        ``converged``, ``n_isolated``, ``runtime_s``, ``quality``).

    Raises
    ------
    TypeError
        If ``graph`` is not a :class:`~cape_pipeline.causal.graph.CausalGraph`.
    CapeConfigError
        If an option is unknown (the message lists the known ones) or out of range.
    CapeFitError
        If the loss or a point becomes NaN/inf, or a point runs past distance
        :data:`MAX_RADIUS` from the origin (Poincaré coordinates would round onto the
        boundary); the message names ``lr`` to lower.

    Examples
    --------
    >>> from cape_pipeline.causal.graph import CausalGraph
    >>> g = CausalGraph.from_edges([("a", "b"), ("a", "c"), ("b", "d")])
    >>> emb = embed(g, dim=2, max_epochs=5)
    >>> emb.hyperboloid.shape, emb.poincare.shape
    ((4, 3), (4, 2))
    """
    if not isinstance(graph, CausalGraph):
        raise TypeError(f"graph: expected a CausalGraph, got {type(graph).__name__}")
    cfg = EmbedConfig.from_options(config, **options)
    dim, k_hop, lambda_g, restart = cfg.dim, cfg.k_hop, cfg.lambda_g, cfg.restart
    max_epochs, batch_size, lr, optimizer = cfg.max_epochs, cfg.batch_size, cfg.lr, cfg.optimizer
    geometry, curvature, learn_curvature = cfg.geometry, cfg.curvature, cfg.learn_curvature
    negatives, burn_in, burn_in_factor = cfg.negatives, cfg.burn_in, cfg.burn_in_factor
    tol, window, isolated, seed = cfg.tol, cfg.window, cfg.isolated, cfg.seed
    lr_decay = cfg.lr_decay
    import geoopt

    t0 = time.perf_counter()
    m = graph.n_features
    hyperbolic = geometry == "hyperbolic"
    opt_name = optimizer if hyperbolic else "adam"
    lr_value = float(lr) if lr is not None else DEFAULT_LR[opt_name]
    device = torch.device(cfg.device)
    dtype = torch.float64

    positives = k_hop_positives(graph.adjacency, k_hop)
    pr = causal_pagerank(graph, restart=restart)
    adj = sp.csr_array(graph.adjacency)
    degree = graph.degree()
    nodes = np.flatnonzero(degree > 0) if isolated == "origin" else np.arange(m)
    n = int(nodes.size)
    sub = sp.csr_array(positives[nodes][:, nodes])
    pairs = _Pairs.build(sub, device)
    pr_t = torch.as_tensor(pr[nodes], dtype=dtype, device=device)
    exact = negatives is None or negatives >= n - 1
    # distances are arcosh(−⟨p, q⟩_l) · s with s = 1/√κ; learned as log s when learn_curvature
    log_scale = torch.tensor(-0.5 * math.log(curvature) if hyperbolic else 0.0, dtype=dtype, device=device)
    learn_kappa = hyperbolic and bool(learn_curvature)
    n_neg_samples = None if exact else int(negatives)

    gen = torch.Generator().manual_seed(int(seed))
    u0 = _INIT_SCALE * torch.randn((n, dim), generator=gen, dtype=dtype)
    if hyperbolic:
        manifold = geoopt.Lorentz().to(dtype)
        points = geoopt.ManifoldParameter(lorentz.expmap0(u0).to(device), manifold=manifold)
        opt_cls = geoopt.optim.RiemannianAdam if optimizer == "radam" else geoopt.optim.RiemannianSGD
        opt: torch.optim.Optimizer = opt_cls([points], lr=lr_value, stabilize=10)
    else:
        points = torch.nn.Parameter(u0.to(device))
        opt = torch.optim.Adam([points], lr=lr_value)
    # (optimizer, its learning rate after burn-in): the points', then log(1/√κ)'s when learned
    optimizers: list[tuple[torch.optim.Optimizer, float]] = [(opt, lr_value)]
    if learn_kappa:
        log_scale = torch.nn.Parameter(log_scale)
        optimizers.append((torch.optim.Adam([log_scale], lr=DEFAULT_LR["adam"]), DEFAULT_LR["adam"]))
    clip_rsgd = hyperbolic and optimizer == "rsgd"
    bsz = max(1, min(auto_batch_size(n) if batch_size is None else int(batch_size), n))
    steps_per_epoch = max(1, math.ceil(n / bsz))
    win = plateau_window(steps_per_epoch, window)
    history: list[float] = []
    converged = False
    lr_scale, since_decay, decays = 1.0, 0, []
    steps = 0
    train = n >= 2 and pairs.indices.numel() > 0

    bar = None
    if progress and train:
        from rich.progress import Progress

        from cape_pipeline._progress import progress as _make_progress

        bar = _make_progress(
            lambda: Progress(*Progress.get_default_columns(), "{task.fields[info]}", transient=True), unit="epochs"
        )
        bar.start()
        task = bar.add_task(f"embed ({geometry}, M={m}, d={dim})", total=max_epochs, info="")
    try:
        for epoch in range(max_epochs if train else 0):
            factor = burn_in_factor if epoch < burn_in else lr_scale
            cur_lr = lr_value * factor
            for o, base_lr in optimizers:
                for group in o.param_groups:
                    group["lr"] = base_lr * factor
            total = torch.zeros((), dtype=dtype, device=device)
            for anchors in shuffled_batches(n, bsz, gen, device=device):
                for o, _ in optimizers:
                    o.zero_grad(set_to_none=True)
                loss = _batch_loss(
                    points, anchors, pairs, pr_t,
                    lambda_g=lambda_g, negatives=n_neg_samples, hyperbolic=hyperbolic, generator=gen,
                    scale=log_scale.exp(),
                )
                loss.backward()
                if clip_rsgd:
                    _clip_riemannian(points, manifold, RSGD_MAX_STEP / cur_lr)
                for o, _ in optimizers:
                    o.step()
                if hyperbolic:
                    _clip_radius(points, RADIUS_CLIP)
                total = total + loss.detach()
            steps += steps_per_epoch
            mean_loss = float(total) / n
            with torch.no_grad():
                finite = bool(torch.isfinite(points).all()) and bool(torch.isfinite(log_scale))
                radius = float(lorentz.dist0(points).max()) if (hyperbolic and finite) else 0.0
            if not (math.isfinite(mean_loss) and finite):
                raise _diverged("the loss or a point became NaN/inf", cur_lr, opt_name, epoch)
            if radius > MAX_RADIUS:
                raise _diverged(
                    f"a point reached hyperbolic distance {radius:.3g} > {MAX_RADIUS:g} from the origin",
                    cur_lr, opt_name, epoch,
                )
            history.append(mean_loss)
            if bar is not None:
                bar.update(task, advance=1, info=f"loss {mean_loss:.4g}")
            since_decay += 1
            if epoch + 1 - burn_in >= 2 * win:
                action = plateau_action(
                    history[burn_in:], win, tol, lr_decay, since_decay, anneal=2 * (epoch + 1) >= max_epochs
                )
                if action == "stop":
                    converged = True
                    break
                if action == "decay":
                    lr_scale *= lr_decay
                    since_decay = 0
                    decays.append(epoch + 1)
    finally:
        if bar is not None:
            bar.stop()
    if not train:
        import warnings

        from cape_pipeline.errors import CapeWarning

        warnings.warn(
            f"embed: the graph has {int(adj.nnz)} edge(s) among {m} features, so there is nothing to train: "
            "every feature sits at the origin and every CAPE angle is 0 (CAPE cannot differ from no PE). "
            "Step I kept too few edges; lower the discover algorithm's edge threshold (tl.discover(learned="
            "{'threshold': ...}), --set discover.learned.threshold=..., or regression.min_effect)",
            CapeWarning,
            stacklevel=2,
        )
    elif not converged and tol > 0:
        log.warning(
            "embed: the loss still fell by more than tol=%g per %d-epoch window at max_epochs=%d "
            "(learning rate decayed %d times to %.3g); the embedding is used as it is, raise max_epochs "
            "to train on", tol, win, max_epochs, len(decays), lr_value * lr_scale,
        )

    with torch.no_grad():
        raw = points.detach().to("cpu", dtype)
        euclid = None
        if hyperbolic:
            hyp_nodes = lorentz.project(raw)
        else:
            norm = torch.linalg.vector_norm(raw, dim=-1, keepdim=True)
            clip = torch.clamp(EUCLIDEAN_MAX_NORM / torch.clamp_min(norm, 1e-300), max=1.0)
            hyp_nodes = lorentz.expmap0(raw * clip)
            euclid = np.zeros((m, dim), dtype=np.float64)
            euclid[nodes] = raw.numpy()
        hyp = lorentz.expmap0(torch.zeros((m, dim), dtype=dtype))  # isolated: the origin
        hyp[torch.as_tensor(nodes, dtype=torch.long)] = hyp_nodes
        poin = lorentz.to_poincare(hyp)

    params: dict[str, Any] = {
        "method": "cape_contrastive",
        "dim": int(dim),
        "k_hop": int(k_hop),
        "lambda_g": float(lambda_g),
        "restart": float(restart),
        "max_epochs": int(max_epochs),
        "batch_size": None if batch_size is None else int(batch_size),
        "batch_size_used": int(bsz),
        "lr": lr_value,
        "optimizer": opt_name,
        "geometry": geometry,
        "curvature": float(torch.exp(-2.0 * log_scale.detach())) if hyperbolic else None,
        "curvature_init": float(curvature) if hyperbolic else None,
        "learn_curvature": bool(learn_kappa),
        "negatives": None if negatives is None else int(negatives),
        "negatives_exact": bool(exact),
        "burn_in": int(burn_in),
        "burn_in_factor": float(burn_in_factor),
        "tol": float(tol),
        "lr_decay": float(lr_decay),
        "lr_decays_at": [int(e) for e in decays],
        "lr_final": lr_value * lr_scale,
        "window": int(win),
        "isolated": isolated,
        "seed": int(seed),
        "device": str(device),
        "n_trained": n,
        "n_isolated": int((degree == 0).sum()),
        "steps_per_epoch": int(steps_per_epoch),
        "epochs_run": len(history),
        "steps": int(steps),
        "converged": bool(converged),
        "trained": bool(train),
        "n_positive_pairs": int(positives.nnz // 2),
        "train_s": round(time.perf_counter() - t0, 3),
    }
    emb = HyperbolicEmbedding(
        hyperboloid=hyp.numpy(),
        poincare=poin.numpy(),
        pagerank=pr,
        feature_names=graph.feature_names.copy(),
        loss_history=history,
        params=params,
        geometry=geometry,
        graph=graph,
        euclidean=euclid,
    )
    if evaluate:
        from cape_pipeline.hyperbolic.quality import embedding_quality

        params["quality"] = embedding_quality(emb, seed=seed)
    params["runtime_s"] = round(time.perf_counter() - t0, 3)
    return emb

