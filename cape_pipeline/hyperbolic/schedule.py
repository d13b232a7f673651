"""Schedule of Step II: the automatic batch size and the plateau stopping rule."""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "auto_batch_size",
    "has_plateaued",
    "plateau_action",
    "DECAY_TOL_FACTOR",
    "plateau_window",
    "MAX_STEPS_PER_EPOCH",
    "WINDOW_MIN_EPOCHS",
    "WINDOW_MIN_STEPS",
]

#: :func:`auto_batch_size` makes an epoch at most this many optimizer steps.
MAX_STEPS_PER_EPOCH = 20

#: The learning rate decays when the loss falls by less than this many times ``tol`` per window.
DECAY_TOL_FACTOR = 10.0

#: The stopping rule's window holds at least this many optimizer steps ...
WINDOW_MIN_STEPS = 200
#: ... and at least this many epochs.
WINDOW_MIN_EPOCHS = 10


def auto_batch_size(n: int) -> int:
    """Default anchors per step for n trained features: ``max(32, ceil(n / 20))``."""
    return max(32, math.ceil(int(n) / MAX_STEPS_PER_EPOCH))


def plateau_window(steps_per_epoch: int, window: int | None = None) -> int:
    """Epochs per window of the stopping rule: ``window``, or by default enough epochs for
    :data:`WINDOW_MIN_STEPS` optimizer steps and at least :data:`WINDOW_MIN_EPOCHS`."""
    if window is not None:
        return int(window)
    return max(WINDOW_MIN_EPOCHS, math.ceil(WINDOW_MIN_STEPS / max(1, steps_per_epoch)))


def has_plateaued(history: list[float], window: int, tol: float) -> bool:
    """The stopping rule of :func:`~cape_pipeline.hyperbolic.embed`: relative plateau of the loss over two windows.

    With ``prev`` the mean loss of epochs ``[-2w, -w)`` and ``last`` the mean of the last ``w``,
    training has converged when ``prev − last ≤ tol · |prev|``: the loss fell by less than the
    fraction ``tol`` from one window to the next (or rose). Needs ``2w`` epochs; ``tol = 0``
    never stops. There is deliberately no absolute floor: on small graphs whose positives can
    all be separated the loss keeps shrinking by a constant fraction while edge reconstruction
    still improves (a tree: ``benchmarks/embed/README.md``), so such fits run to ``max_epochs``.
    """
    if tol <= 0 or len(history) < 2 * window:
        return False
    prev = float(np.mean(history[-2 * window : -window]))
    last = float(np.mean(history[-window:]))
    return prev - last <= tol * abs(prev)


def plateau_action(
    history: list[float], window: int, tol: float, lr_decay: float, since_decay: int, *, anneal: bool
) -> str:
    """What the schedule of :func:`~cape_pipeline.hyperbolic.embed` does after an epoch.

    With ``prev`` and ``last`` the mean losses of the two last windows of ``window`` epochs
    (as in :func:`has_plateaued`) and ``drop = (prev − last) / |prev|``:

    - ``"stop"`` when ``drop ≤ tol`` (the plateau: converged);
    - ``"decay"`` when ``anneal`` (``embed`` sets it from half of ``max_epochs`` on),
      ``lr_decay < 1`` and ``tol < drop ≤ DECAY_TOL_FACTOR · tol``: the loss still falls, but
      slowly, and at this rate it would not plateau within the epochs left. On graphs whose
      positives are already separated this is the points drifting at a constant step size while
      reconstruction no longer improves. Every learning rate is multiplied by ``lr_decay``
      (reduce-on-plateau, as ``torch.optim.lr_scheduler.ReduceLROnPlateau``); the next decision
      waits until ``window`` epochs have run at the new rate (``since_decay`` counts the epochs
      since the last decay). Fits that plateau within the first half of ``max_epochs`` never
      decay;
    - ``"go"`` otherwise. A fast fall (e.g. a tree whose loss shrinks by a constant fraction while
      reconstruction still improves) keeps its rate.

    Needs ``2 · window`` epochs of ``history``; before that, and with ``tol = 0``, ``"go"``.
    """
    if tol <= 0 or len(history) < 2 * window or since_decay < window:
        return "go"
    if has_plateaued(history, window, tol):
        return "stop"
    if anneal and lr_decay < 1.0 and has_plateaued(history, window, DECAY_TOL_FACTOR * tol):
        return "decay"
    return "go"
