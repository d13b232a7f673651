"""Perturbation labels as interventions: which feature was perturbed in which cell.

Perturb-seq and CROP-seq data carry, per cell, the genes whose guide it received. The field's
convention (GEARS, scPerturb) is a ``condition`` column: ``"ctrl"`` for control cells,
``"g3+ctrl"`` for a single perturbation of ``g3``, ``"g3+g7"`` for a double; other screens write
``"control"`` or ``"non-targeting"``. :func:`intervention_targets` reads such a column into an
``(N, M)`` boolean matrix of (cell, perturbed feature); Step I's regression support leaves a
perturbed feature's own conditional out of the likelihood in the cells where it was perturbed
(a perfect intervention, as DCDI / DCD-FG / SDCD define the interventional likelihood), and
:func:`~cape_pipeline.causal.metrics.interventional_score` checks a graph against held-out
perturbations (CausalBench's statistical evaluation).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from cape_pipeline._keys import (
    CONTROL_LABELS,
    condition_labels,
    find_condition_column,
    parse_condition,
)
from cape_pipeline.errors import CapeDataError

__all__ = ["CONTROL_LABELS", "Interventions", "find_condition_column", "intervention_targets", "parse_condition"]

log = logging.getLogger(__name__)


@dataclass
class Interventions:
    """Targets of the cells' perturbations, aligned to the data's features.

    Attributes
    ----------
    targets
        ``(N, M)`` bool CSR: ``targets[i, j]`` ⇔ feature j was perturbed in cell i.
    column
        The ``obs`` column read.
    n_control
        Cells whose label names no target.
    unknown
        Target names that are not among the features (their cells keep their other targets),
        with their cell counts.
    n_label_targets
        ``(N,)`` int64: how many targets each cell's label names, features or not (0: a control).
    """

    targets: sp.csr_array
    column: str
    n_control: int
    unknown: dict[str, int] = field(default_factory=dict)
    n_label_targets: np.ndarray | None = None

    @property
    def n_perturbed_features(self) -> int:
        """Features perturbed in at least one cell."""
        return int((np.asarray(self.targets.sum(axis=0)).ravel() > 0).sum())

    def summary(self) -> dict[str, Any]:
        """The record Step I keeps in ``params``."""
        return {
            "intervention_column": self.column, "n_control_cells": int(self.n_control),
            "n_perturbed_cells": int(self.targets.shape[0] - self.n_control),
            "n_perturbed_features": self.n_perturbed_features,
            "unknown_targets": dict(sorted(self.unknown.items())[:20]),
        }


def intervention_targets(
    obs: Any,
    var_names: Any,
    column: str,
    *,
    sep: str = "+",
    controls: Iterable[str] = CONTROL_LABELS,
) -> Interventions:
    """Read a condition column into an ``(N, M)`` matrix of perturbed features.

    Parameters
    ----------
    obs
        The cells' ``pandas.DataFrame`` (``adata.obs``), N rows.
    var_names
        The M feature names, in the data's order.
    column
        The ``obs`` column with the condition labels (e.g. ``"condition"``).
    sep
        Separator of several targets in one label (``"+"``, GEARS).
    controls
        Labels of control cells (case-insensitive); a label made only of these is a control.

    Returns
    -------
    Interventions

    Raises
    ------
    CapeDataError
        The column is missing, has missing or empty labels, or names no control cell; no label names a
        feature of the data (the message gives examples of both).
    """
    if column not in obs.columns:
        raise CapeDataError(f"obs[{column!r}]: no such column; the perturbation labels are expected there "
                            f"(columns: {list(obs.columns)[:10]})")
    labels = condition_labels(obs, column, "")
    uniq, inv = np.unique(labels, return_inverse=True)
    parsed = [parse_condition(u, sep, controls) for u in uniq]  # one parse per distinct label
    counts = np.bincount(inv, minlength=uniq.size)
    n_control = int(counts[[not t for t in parsed]].sum())
    if n_control == 0:
        raise CapeDataError(
            f"obs[{column!r}]: no control cells (expected a label among {list(controls)[:4]}, e.g. 'ctrl'); "
            f"labels seen: {list(uniq[:5])}"
        )
    names = np.asarray(var_names, dtype=str)
    index = {n: j for j, n in enumerate(names)}
    pairs = [(i, index.get(t), t) for i, targets in enumerate(parsed) for t in targets]
    unknown: dict[str, int] = {}
    for i, j, t in pairs:
        if j is None:
            unknown[t] = unknown.get(t, 0) + int(counts[i])
    known = [(i, j) for i, j, _ in pairs if j is not None]
    if not known:
        raise CapeDataError(
            f"obs[{column!r}]: no perturbation target is a feature of the data (targets such as "
            f"{sorted(unknown)[:5]}; features such as {list(names[:5])})"
        )
    if unknown:
        log.warning("obs[%r]: %d perturbation target(s) are not among the features and are ignored, e.g. %s",
                    column, len(unknown), sorted(unknown)[:5])
    # (cells × labels) one-hot times (labels × features) targets: no pass over the cells per label
    n = len(labels)
    cell_label = sp.csr_array((np.ones(n), (np.arange(n), inv)), shape=(n, uniq.size))
    li, fj = np.asarray(known, dtype=np.int64).T
    label_target = sp.csr_array((np.ones(li.size), (li, fj)), shape=(uniq.size, names.size))
    targets = sp.csr_array((cell_label @ label_target) > 0)
    n_label_targets = np.asarray([len(t) for t in parsed], dtype=np.int64)[inv]
    return Interventions(targets=targets, column=column, n_control=n_control, unknown=unknown,
                         n_label_targets=n_label_targets)
