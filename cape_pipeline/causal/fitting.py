"""What the gradient fits of Step I share: their settings (:class:`SolverConfig`) and the
augmented-Lagrangian update of the acyclicity penalty (:func:`augmented_lagrangian_step`).

The low-rank support's augmented Lagrangian
(:func:`~cape_pipeline.causal.lowrank.solver.fit_low_rank_vae`) and the screened support's two phases
(:func:`~cape_pipeline.causal.screened.fit_screened`) take a :class:`SolverConfig` and
update their penalty with :func:`augmented_lagrangian_step`. Their epochs, and the learned
support's, show on Step I's one progress mechanism
(:func:`~cape_pipeline._progress.progress_task`).
"""

from __future__ import annotations

from dataclasses import dataclass

from cape_pipeline.causal.config import DEFAULT_EPOCHS, DiscoverConfig
from cape_pipeline.causal.sem import POSTERIORS

__all__ = ["SolverConfig", "augmented_lagrangian_step"]

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
        Spectral radius of ``|U||V|ᵀ`` at initialisation (see
        :class:`~cape_pipeline.causal.lowrank.model.LowRankSEMVAE`).
    seed
        Seed of the local generators (initialisation, shuffling, reparameterisation noise).
    l1
        How ``‖A‖₁`` of Eq. 9 is evaluated: ``"exact"`` (blockwise, O(M² r) per step),
        ``"sampled"`` (unbiased estimate from ``l1_pairs`` random pairs, O(S r)),
        ``"surrogate"`` (the factor bound ``Σ_k ‖U_k‖₁‖V_k‖₁ ≥ ‖A‖₁``, O(M r)), or ``"auto"``:
        exact for ``M ≤ l1_exact_max``, else sampled.
    l1_exact_max, l1_pairs
        Switch point of ``"auto"`` (500: above it the exact form's O(M² r) per step becomes a
        sizeable part of a step next to the ELBO, where the sampled estimate's O(S r) stays
        small) and S of the sampled estimate.
    posterior
        ``"sampled"`` (reparameterised Z, learned σ) or ``"mean"`` (decoder on μ, KL ½‖μ‖², as
        in the DAG-GNN reference code); see
        :class:`~cape_pipeline.causal.lowrank.model.LowRankSEMVAE`.
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


def augmented_lagrangian_step(
    rho: float, alpha: float, h_now: float, h_last: float, *, rho_cap: float | None = None
) -> tuple[float, float, float]:
    """One outer update of the augmented Lagrangian ``½ ρ h² + α h`` (paper 000, Eq. 10, after
    NOTEARS): ``α ← α + ρ h``, and ``ρ ← 10 ρ`` where ``h`` fell by less than a factor 4 since the
    last update.

    Parameters
    ----------
    rho, alpha
        The current penalty weight ρ > 0 and multiplier α.
    h_now, h_last
        The acyclicity ``h(A)`` now and at the last update (``math.inf`` before the first).
    rho_cap
        Upper bound on ρ (None: none; the caller stops where ρ exceeds its own limit).

    Returns
    -------
    rho, alpha, h_last
        The updated ρ and α, and ``h_now`` as the next update's ``h_last``.
    """
    alpha += rho * h_now
    if h_now > 0.25 * h_last:
        rho = rho * 10.0 if rho_cap is None else min(rho * 10.0, rho_cap)
    return rho, alpha, h_now
