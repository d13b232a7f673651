"""What the gradient fits of Step I share: the epoch budget's defaults, the checks of their common
options (:func:`gradient_checks`) and the augmented-Lagrangian update of the acyclicity penalty
(:func:`augmented_lagrangian_step`).

The low-rank algorithm's augmented Lagrangian
(:func:`~cape_pipeline.causal.lowrank.solver.fit_low_rank_vae`, settings
:class:`~cape_pipeline.causal.lowrank.config.SolverConfig`) and the screened algorithm's two phases
(:func:`~cape_pipeline.causal.screened.fit_screened`) update their penalty with
:func:`augmented_lagrangian_step`. Their epochs, and the learned algorithm's, show on Step I's one
progress mechanism (:func:`~cape_pipeline._progress.progress_task`).
"""

from __future__ import annotations

from typing import Any

from cape_pipeline._config import is_int, is_num

__all__ = ["DEFAULT_EPOCHS", "DEFAULT_MIN_STEPS", "augmented_lagrangian_step", "gradient_checks"]

#: paper 000, Supp. F.4: 100 epochs
DEFAULT_EPOCHS = 100
#: with ``epochs=None`` the budget is raised to at least this many AdamW steps
DEFAULT_MIN_STEPS = 5000


def gradient_checks() -> dict[str, tuple[Any, str]]:
    """The checks of the options the SEM-VAE fits (low-rank, screened) share, for
    :func:`~cape_pipeline._config.check_fields`: field name → (predicate, what was expected)."""
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
