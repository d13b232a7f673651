"""The options of the learned algorithm of Step I, their defaults and their checks:
:class:`LearnedConfig` (``DiscoverConfig.learned``)."""

from __future__ import annotations

from dataclasses import dataclass

from cape_pipeline._config import check_fields, is_int, is_num

__all__ = ["LearnedConfig"]


@dataclass(frozen=True)
class LearnedConfig:
    """Options of the learned algorithm (:func:`~cape_pipeline.causal.learned.fit_learned`):
    per-feature MLPs on a learned screen with the spectral acyclicity penalty, after SDCD; the
    default of Step I for data other than single-cell above 20 features. Validated on creation.

    Attributes
    ----------
    n_candidates
        k, candidate parents per feature and correlation round of the screen (20; 4k candidates
        per feature).
    threshold
        τ (0.2): the learned screen's cut on the strength ``‖W₁‖₂``; the output keeps strength
        > τ/2 (SDCD's 0.2 and 0.1).
    hidden
        Sigmoid units per feature MLP (10).
    lr
        Adam learning rate (1e-2).
    batch_size
        Rows per Adam step (256).
    epochs
        Epoch cap of the learned screen (stage 1) and of the refit (stage 3), 200; both stop
        earlier on the validation NLL of 20 % held-out rows.
    power_iters
        Power-iteration steps per evaluation of the spectral radius ρ (10, warm-started).

    Raises
    ------
    CapeConfigError
        A value out of range or of the wrong type, naming the option and what was expected.
    """

    n_candidates: int = 20
    threshold: float = 0.2
    hidden: int = 10
    lr: float = 1e-2
    batch_size: int = 256
    epochs: int = 200
    power_iters: int = 10

    def __post_init__(self) -> None:
        check_fields(self, {
            "n_candidates": (lambda v: is_int(v, 1), "an integer >= 1"),
            "threshold": (lambda v: is_num(v, lambda f: f >= 0), "a finite number >= 0"),
            "hidden": (lambda v: is_int(v, 1), "an integer >= 1"),
            "lr": (lambda v: is_num(v, lambda f: f > 0), "a finite number > 0"),
            "batch_size": (lambda v: is_int(v, 1), "an integer >= 1"),
            "epochs": (lambda v: is_int(v, 1), "an integer >= 1"),
            "power_iters": (lambda v: is_int(v, 1), "an integer >= 1"),
        })
