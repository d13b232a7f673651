"""What the gradient fits of Step I share: the epoch budget's defaults, the options the SEM-VAE
fits have in common (:class:`AugmentedLagrangianConfig`, with their checks, :func:`gradient_checks`)
and the augmented-Lagrangian update of the acyclicity penalty (:func:`augmented_lagrangian_step`).

The low-rank algorithm's augmented Lagrangian
(:func:`~cape_pipeline.causal.lowrank.solver.fit_low_rank_vae`, settings
:class:`~cape_pipeline.causal.lowrank.config.SolverConfig`) and the screened algorithm's two phases
(:func:`~cape_pipeline.causal.screened.fit_screened`) update their penalty with
:func:`augmented_lagrangian_step`. Their epochs, and the learned algorithm's, show on Step I's one
progress mechanism (:func:`~cape_pipeline._progress.progress_task`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cape_pipeline._config import check_fields, is_int, is_num

__all__ = [
    "DEFAULT_EPOCHS", "DEFAULT_MIN_STEPS", "AugmentedLagrangianConfig", "augmented_lagrangian_step", "gradient_checks",
]

#: paper 000, Supp. F.4: 100 epochs
DEFAULT_EPOCHS = 100
#: with ``epochs=None`` the budget is raised to at least this many AdamW steps
DEFAULT_MIN_STEPS = 5000


def gradient_checks() -> dict[str, tuple[Any, str]]:
    """The checks of the options the SEM-VAE fits (low-rank, screened) share, the fields of
    :class:`AugmentedLagrangianConfig`, for :func:`~cape_pipeline._config.check_fields`: field
    name → (predicate, what was expected)."""
    return {
        "threshold": (lambda v: is_num(v, lambda f: f >= 0), "a finite number >= 0"),
        "lambda_sparse": (lambda v: is_num(v, lambda f: f >= 0), "a finite number >= 0"),
        "epochs": (lambda v: v is None or is_int(v, 1), "an integer >= 1 or None"),
        "min_steps": (lambda v: is_int(v, 0), "an integer >= 0"),
        "batch_size": (lambda v: is_int(v, 1), "an integer >= 1"),
        "lr": (lambda v: is_num(v, lambda f: f > 0), "a finite number > 0"),
        "max_outer": (lambda v: is_int(v, 1), "an integer >= 1"),
        "rho_init": (lambda v: is_num(v, lambda f: f > 0), "a finite number > 0"),
        "rho_max": (lambda v: is_num(v, lambda f: f > 0), "a finite number > 0"),
        "hidden": (lambda v: is_int(v, 1), "an integer >= 1"),
        "power_iters": (lambda v: is_int(v, 1), "an integer >= 1"),
        "weight_decay": (lambda v: is_num(v, lambda f: f >= 0), "a finite number >= 0"),
    }


@dataclass(frozen=True)
class AugmentedLagrangianConfig:
    """The options the SEM-VAE fits of Step I share, the NOTEARS-style augmented Lagrangian and its
    AdamW steps: the base of the low-rank algorithm's
    :class:`~cape_pipeline.causal.lowrank.config.LowRankConfig` and the screened algorithm's
    :class:`~cape_pipeline.causal.screened.config.ScreenedConfig`, which add their own options.
    Defaults: paper 000, Supp. F.4; validated on creation (:func:`gradient_checks`).

    Attributes
    ----------
    threshold
        τ on ``|A|`` (0.2): the output keeps ``|A| > τ``, cycles broken (the screened
        algorithm's second phase runs on its first phase's ``|A| > τ``).
    lambda_sparse
        λs (Eq. 9), weight of ``‖A‖₁`` per batch of ``batch_size`` rows (1): the low rank
        evaluates ``‖A‖₁`` as its ``l1`` says, the screened algorithm exactly on its sparse A.
    epochs
        AdamW epochs over all outer steps (the screened algorithm: of its two phases together,
        half each). ``None`` (default) means the paper's 100 (Supp. F.4), raised for small N to
        at least ``min_steps`` AdamW steps: ``max(100, ⌈min_steps / ⌈N / batch_size⌉⌉)`` (see
        :func:`~cape_pipeline.causal.api.resolve_epochs`; e.g. N = 600 → 1000 epochs,
        N = 2000 → 313, N ≥ 6,400 → 100); the value used is ``params["effective_epochs"]``.
    min_steps
        With ``epochs=None``: the epochs are raised to at least this many AdamW steps (5000);
        0 gives exactly 100 epochs.
    batch_size
        Rows per AdamW step (128, Supp. F.4).
    lr
        AdamW learning rate (3e-3, Supp. F.4).
    max_outer
        Augmented-Lagrangian outer steps (20; the screened algorithm: per phase), the epochs
        spread evenly over them.
    rho_max
        Upper bound on the penalty ρ (1e16): the low rank's augmented Lagrangian stops once ρ
        exceeds it.
    rho_init
        Initial penalty ρ (1; the screened algorithm: of its second phase).
    hidden
        Width of the entrywise MLPs f, f⁻¹ (64, Supp. F.4).
    power_iters
        Power-iteration steps per evaluation of the spectral h (10, warm-started; of the sparse
        A for the screened algorithm).
    weight_decay
        AdamW decoupled weight decay (1e-2; both phases of the screened algorithm).

    Raises
    ------
    CapeConfigError
        A value out of range or of the wrong type, naming the option and what was expected.
    """

    threshold: float = 0.2
    lambda_sparse: float = 1.0
    epochs: int | None = None
    min_steps: int = DEFAULT_MIN_STEPS
    batch_size: int = 128
    lr: float = 3e-3
    max_outer: int = 20
    rho_max: float = 1e16
    rho_init: float = 1.0
    hidden: int = 64
    power_iters: int = 10
    weight_decay: float = 1e-2

    def __post_init__(self) -> None:
        check_fields(self, gradient_checks())


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
