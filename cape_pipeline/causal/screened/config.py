"""The options of the screened algorithm of Step I, their defaults and their checks:
:class:`ScreenedConfig` (``DiscoverConfig.screened``)."""

from __future__ import annotations

from dataclasses import dataclass

from cape_pipeline._config import check_fields, is_int
from cape_pipeline.causal.fitting import AugmentedLagrangianConfig, gradient_checks

__all__ = ["ScreenedConfig"]


@dataclass(frozen=True)
class ScreenedConfig(AugmentedLagrangianConfig):
    """Options of the screened algorithm (:func:`~cape_pipeline.causal.screened.fit_screened`):
    A sparse on screened candidate parents, for M in the thousands; validated on creation.

    Two correlation rounds pick ``3·n_candidates`` candidates per feature, a first phase fits
    without the acyclicity term, the second runs the spectral augmented Lagrangian on the
    phase-1 support ``|A| > τ`` until it is a DAG and then refits that DAG's weights; posterior
    ``"mean"``, exact sparse ‖A‖₁; O(N·M²) once for the screen in row blocks, then O(N·M·k) per
    epoch (``benchmarks/discover/screened/RESULTS.md``). The SEM-VAE and its defaults are the
    low-rank algorithm's: the options the two share (``threshold``, ``lambda_sparse``,
    ``epochs``, ``min_steps``, ``batch_size``, ``lr``, ``max_outer``, ``rho_max``, ``rho_init``,
    ``hidden``, ``power_iters``, ``weight_decay``) are
    :class:`~cape_pipeline.causal.fitting.AugmentedLagrangianConfig`'s, documented there.

    Attributes
    ----------
    n_candidates
        k, candidate parents per feature and screening round (20).

    Raises
    ------
    CapeConfigError
        A value out of range or of the wrong type, naming the option and what was expected.
    """

    n_candidates: int = 20

    def __post_init__(self) -> None:
        check_fields(self, {"n_candidates": (lambda v: is_int(v, 1), "an integer >= 1"), **gradient_checks()})
