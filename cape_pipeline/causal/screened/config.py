"""The options of the screened algorithm of Step I, their defaults and their checks:
:class:`ScreenedConfig` (``DiscoverConfig.screened``)."""

from __future__ import annotations

from dataclasses import dataclass

from cape_pipeline._config import check_fields, is_int
from cape_pipeline.causal.fitting import DEFAULT_MIN_STEPS, gradient_checks

__all__ = ["ScreenedConfig"]


@dataclass(frozen=True)
class ScreenedConfig:
    """Options of the screened algorithm (:func:`~cape_pipeline.causal.screened.fit_screened`):
    A sparse on screened candidate parents, for M in the thousands; validated on creation.

    Two correlation rounds pick ``3·n_candidates`` candidates per feature, a first phase fits
    without the acyclicity term, the second runs the spectral augmented Lagrangian on the
    phase-1 support ``|A| > τ`` until it is a DAG and then refits that DAG's weights; posterior
    ``"mean"``, exact sparse ‖A‖₁; O(N·M²) once for the screen in row blocks, then O(N·M·k) per
    epoch (``benchmarks/discover/screened/RESULTS.md``). The SEM-VAE and its defaults are the
    low-rank algorithm's.

    Attributes
    ----------
    n_candidates
        k, candidate parents per feature and screening round (20).
    threshold
        τ on ``|A|`` (0.2): the phase-1 support and the output keep ``|A| > τ``, cycles broken.
    lambda_sparse
        λs (Eq. 9), weight of the exact sparse ``‖A‖₁`` per batch of ``batch_size`` rows (1).
    epochs
        AdamW epochs of the two phases together (half each). ``None`` (default): as for the low
        rank, 100 raised for small N to at least ``min_steps`` AdamW steps (see
        :func:`~cape_pipeline.causal.api.resolve_epochs`); the value used is
        ``params["effective_epochs"]``.
    min_steps
        With ``epochs=None``: the epochs are raised to at least this many AdamW steps (5000).
    batch_size
        Rows per AdamW step (128).
    lr
        AdamW learning rate (3e-3).
    max_outer
        Augmented-Lagrangian outer steps of each phase (20).
    rho_max
        Upper bound on the penalty ρ (1e16).
    rho_init
        Initial penalty ρ of the augmented Lagrangian of phase 2 (1).
    hidden
        Width of the entrywise MLPs f, f⁻¹ (64).
    power_iters
        Power-iteration steps per evaluation of the sparse spectral h (10, warm-started).
    weight_decay
        AdamW decoupled weight decay of both phases (1e-2).

    Raises
    ------
    CapeConfigError
        A value out of range or of the wrong type, naming the option and what was expected.
    """

    n_candidates: int = 20
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
        check_fields(self, {"n_candidates": (lambda v: is_int(v, 1), "an integer >= 1"), **gradient_checks()})
