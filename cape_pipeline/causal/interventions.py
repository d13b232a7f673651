"""Perturbation labels as interventions: which feature was perturbed in which cell.

Perturb-seq and CROP-seq data carry, per cell, the genes whose guide it received. The field's
convention (GEARS, scPerturb) is a ``condition`` column: ``"ctrl"`` for control cells,
``"g3+ctrl"`` for a single perturbation of ``g3``, ``"g3+g7"`` for a double; other screens write
``"control"``, ``"non-targeting"`` or ``"NTC"``, and ``"g3_g7"`` (scPerturb) for a double.
:func:`intervention_targets` reads such a column into an ``(N, M)`` boolean matrix of (cell,
perturbed feature) and a mask of the cells Step I may use; Step I's regression algorithm
leaves a perturbed feature's own conditional out of the likelihood in the cells where it was
perturbed (a perfect intervention, as DCDI / DCD-FG / SDCD define the interventional
likelihood), and :func:`~cape_pipeline.causal.metrics.interventional_score`
checks a graph against held-out perturbations (CausalBench's statistical evaluation).

Each distinct label is one of :data:`LABEL_KINDS`:

``control``
    Only control names (:data:`~cape_pipeline._keys.CONTROL_LABELS`): observational cells.
``perturbed``
    Every target is a feature: an intervention on those features.
``unmeasured_target``
    Every target is a gene that is not a feature (a guide for an unmeasured gene): left out.
``mixed``
    Some targets are features, some are not: left out, for the same reason.
``unassigned``
    No assigned perturbation (:data:`~cape_pipeline._keys.UNASSIGNED_LABELS`: missing, empty,
    ``unassigned``, ``multiple``, ``doublet``, …, or a target so named): left out.

A cell perturbed at a gene that is not modelled is not an observational cell (its unmeasured
target may act on measured genes, so their conditionals are not the observational ones) nor an
intervention on a modelled feature; it is left out of Step I, as CausalBench's training regimes
drop cells whose perturbation they do not use rather than read them as observational
(Chevalley et al. 2023, ``DatasetSplitter.get_partial_interventional``). A cell without an
assigned perturbation may carry any guide, so it is neither a control nor a perturbed cell.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from cape_pipeline._keys import (
    CONDITION_COLUMNS,
    CONTROL_LABELS,
    UNASSIGNED_LABELS,
    find_condition_column,
    holds_control,
    names_features,
    parse_condition,
    parse_targets,
)
from cape_pipeline.errors import CapeDataError

__all__ = [
    "CONTROL_LABELS",
    "LABEL_KINDS",
    "UNASSIGNED_LABELS",
    "Interventions",
    "find_condition_column",
    "intervention_targets",
    "parse_condition",
    "parse_targets",
    "unread_label_columns",
]

log = logging.getLogger(__name__)

LABEL_KINDS = ("control", "perturbed", "unmeasured_target", "mixed", "unassigned")
"""The kinds of a perturbation label (module docstring); Step I uses the cells of the first two."""
_MISSING = "<missing>"  # how a missing label (NaN, None) is named in the counts and the log


@dataclass
class Interventions:
    """Targets of the cells' perturbations, aligned to the data's features.

    Attributes
    ----------
    targets
        ``(N, M)`` bool CSR: ``targets[i, j]`` ⇔ feature j was perturbed in cell i (empty rows
        for the cells left out).
    column
        The ``obs`` column read.
    n_control
        Cells whose label names only controls.
    unknown
        Target names that are not among the features (their cells are left out: kinds
        ``unmeasured_target`` and ``mixed``), with their cell counts.
    n_label_targets
        ``(N,)`` int64: how many targets each cell's label names, features or not (0: a control;
        -1: no assigned perturbation).
    keep_cells
        ``(N,)`` bool: the cells Step I uses (kinds ``control`` and ``perturbed``); None: all.
    kinds
        Cells per label kind, every one of :data:`LABEL_KINDS`.
    unassigned
        Labels of the cells with no assigned perturbation (``"<missing>"`` for NaN / None), with
        their cell counts.
    n_perturbed_labels
        Distinct labels of kind ``perturbed``.
    """

    targets: sp.csr_array
    column: str
    n_control: int
    unknown: dict[str, int] = field(default_factory=dict)
    n_label_targets: np.ndarray | None = None
    keep_cells: np.ndarray | None = None
    kinds: dict[str, int] = field(default_factory=dict)
    unassigned: dict[str, int] = field(default_factory=dict)
    n_perturbed_labels: int = 0

    @property
    def n_perturbed_features(self) -> int:
        """Features perturbed in at least one cell."""
        return int((np.asarray(self.targets.sum(axis=0)).ravel() > 0).sum())

    @property
    def n_left_out(self) -> int:
        """Cells Step I leaves out (no assigned perturbation, or a target that is not a feature)."""
        return 0 if self.keep_cells is None else int((~self.keep_cells).sum())

    @property
    def control_cells(self) -> np.ndarray:
        """``(N,)`` bool: the control cells (never a cell left out)."""
        if self.n_label_targets is None:
            ctrl = np.diff(self.targets.tocsr().indptr) == 0
        else:
            ctrl = np.asarray(self.n_label_targets) == 0
        return ctrl if self.keep_cells is None else ctrl & self.keep_cells

    @property
    def single_targets(self) -> tuple[np.ndarray, np.ndarray]:
        """``(cells, target)``, each ``(S,)`` int64: the cells Step I uses where exactly one
        feature was perturbed, and that feature's index."""
        t = self.targets.tocsr()
        keep = np.diff(t.indptr) == 1
        if self.keep_cells is not None:
            keep &= self.keep_cells
        cells = np.flatnonzero(keep)
        return cells, t.indices[t.indptr[cells]].astype(np.int64)

    def summary(self) -> dict[str, Any]:
        """The record Step I keeps in ``params``: the counts above, the left-out labels first."""
        kinds = {k: int(self.kinds.get(k, 0)) for k in LABEL_KINDS}
        return {
            "intervention_column": self.column, "n_control_cells": int(self.n_control),
            "n_perturbed_cells": int(self.targets.shape[0] - self.n_control - self.n_left_out),
            "n_perturbed_features": self.n_perturbed_features,
            "unknown_targets": dict(sorted(self.unknown.items())[:20]),
            "label_kinds": kinds, "n_left_out_cells": self.n_left_out,
            "unassigned_labels": dict(sorted(self.unassigned.items(), key=lambda kv: (-kv[1], kv[0]))[:20]),
        }

    def log_line(self) -> str:
        """One sentence of the counts per kind (logged at INFO by :func:`intervention_targets`)."""
        k = self.kinds
        out = (f"perturbation labels in obs[{self.column!r}]: {k.get('control', 0):,} control cells, "
               f"{k.get('perturbed', 0):,} perturbed cells ({self.n_perturbed_labels:,} labels, "
               f"{self.n_perturbed_features:,} features)")
        if k.get("unassigned"):
            top = sorted(self.unassigned.items(), key=lambda kv: (-kv[1], kv[0]))
            out += (f"; {k['unassigned']:,} cells with no assigned perturbation left out: "
                    + ", ".join(f"{c:,} {lab!r}" for lab, c in top[:6]) + (", …" if len(top) > 6 else ""))
        if k.get("unmeasured_target") or k.get("mixed"):
            top = sorted(self.unknown.items(), key=lambda kv: (-kv[1], kv[0]))
            out += (f"; {k.get('unmeasured_target', 0):,} cells target only genes that are not features and "
                    f"{k.get('mixed', 0):,} cells target such a gene beside a feature, left out (neither controls "
                    "nor interventions on a feature): " + ", ".join(f"{t!r} {c:,}" for t, c in top[:6])
                    + (", …" if len(top) > 6 else ""))
        return out


def _labels(obs: Any, column: str) -> np.ndarray:
    """``obs[column]`` as a ``(N,)`` object array of str, a missing value as :data:`_MISSING`."""
    col = obs[column]
    missing = col.isna().to_numpy()
    labels = col.astype(str).to_numpy(dtype=object)
    labels[missing] = _MISSING
    return labels


def unread_label_columns(
    obs: Any, var_names: Iterable[str], controls: Iterable[str] = CONTROL_LABELS
) -> dict[str, list[str]]:
    """The columns of :data:`~cape_pipeline._keys.CONDITION_COLUMNS` in ``obs`` whose labels name
    features of the data (``var_names``) but include no control label, each with up to 5 of its
    labels: perturbations of genes that ``interventions="auto"`` cannot read, since no cell is a
    control by :data:`CONTROL_LABELS`."""
    features = frozenset(str(v) for v in var_names)
    out: dict[str, list[str]] = {}
    for col in CONDITION_COLUMNS:
        if col in obs.columns:
            values = [str(v) for v in obs[col].unique()]
            if not holds_control(values, controls) and any(names_features(v, features, controls) for v in values):
                out[col] = values[:5]
    return out


def _kind(label: str, targets: list[str], index: dict[str, int], unassigned: frozenset[str]) -> str:
    """The :data:`LABEL_KINDS` entry of one label whose parsed targets are ``targets``."""
    if label == _MISSING or label.strip().lower() in unassigned or any(t.lower() in unassigned for t in targets):
        return "unassigned"
    if not targets:
        return "control"
    known = sum(t in index for t in targets)
    return "perturbed" if known == len(targets) else ("unmeasured_target" if known == 0 else "mixed")


def intervention_targets(
    obs: Any,
    var_names: Any,
    column: str,
    *,
    sep: str = "+",
    controls: Iterable[str] = CONTROL_LABELS,
) -> Interventions:
    """Read a condition column into an ``(N, M)`` matrix of perturbed features and the cells to use.

    Every distinct label is classified once (:data:`LABEL_KINDS`, module docstring): the control
    and perturbed cells are kept; the cells with no assigned perturbation
    (:data:`~cape_pipeline._keys.UNASSIGNED_LABELS`, missing or empty labels among them) and those
    whose label names a gene that is not a feature are left out (``keep_cells``), counted, and
    never read as controls. The counts per kind are logged at INFO (:meth:`Interventions.log_line`).

    Parameters
    ----------
    obs
        The cells' ``pandas.DataFrame`` (``adata.obs``), N rows.
    var_names
        The M feature names, in the data's order.
    column
        The ``obs`` column with the condition labels (e.g. ``"condition"``).
    sep
        Separator of several targets in one label (``"+"``, GEARS); where it does not split a
        label into features, :data:`~cape_pipeline._keys.TARGET_SEPARATORS` are tried
        (:func:`~cape_pipeline._keys.parse_targets`).
    controls
        Labels of control cells (case-insensitive); a label made only of these is a control.

    Returns
    -------
    Interventions

    Raises
    ------
    CapeDataError
        The column is missing or names no control cell; no label's targets are all features of the
        data (the message gives examples of both).
    """
    if column not in obs.columns:
        raise CapeDataError(f"obs[{column!r}]: no such column; the perturbation labels are expected there "
                            f"(columns: {list(obs.columns)[:10]})")
    labels = _labels(obs, column)
    uniq, inv = np.unique(labels, return_inverse=True)
    inv = np.asarray(inv).ravel()
    counts = np.bincount(inv, minlength=uniq.size)
    names = np.asarray(var_names, dtype=str)
    index = {n: j for j, n in enumerate(names)}
    unassigned_set = frozenset(u.lower() for u in UNASSIGNED_LABELS)
    parsed = [[] if u == _MISSING else parse_targets(u, index, sep, controls) for u in uniq]  # one parse per label
    kind = np.asarray([_kind(str(u), t, index, unassigned_set) for u, t in zip(uniq, parsed, strict=True)])
    kinds = {k: int(counts[kind == k].sum()) for k in LABEL_KINDS}
    unassigned = {str(u): int(c) for u, c, k in zip(uniq, counts, kind, strict=True) if k == "unassigned"}
    unknown: dict[str, int] = {}
    for i in np.flatnonzero((kind == "unmeasured_target") | (kind == "mixed")):
        for t in parsed[i]:
            if t not in index:
                unknown[t] = unknown.get(t, 0) + int(counts[i])
    if kinds["control"] == 0:
        raise CapeDataError(
            f"obs[{column!r}]: no control cells (expected a label among {list(controls)[:4]}, e.g. 'ctrl'); "
            f"labels seen: {list(uniq[:5])}"
        )
    if kinds["perturbed"] == 0:
        raise CapeDataError(
            f"obs[{column!r}]: no perturbation label names only features of the data (targets such as "
            f"{sorted(unknown)[:5]}; features such as {list(names[:5])}"
            + (f"; {kinds['unassigned']} cells have no assigned perturbation" if kinds["unassigned"] else "") + ")"
        )
    pert = np.flatnonzero(kind == "perturbed")
    known = [(i, index[t]) for i in pert for t in parsed[i]]
    # (cells × labels) one-hot times (labels × features) targets: no pass over the cells per label
    n = len(labels)
    cell_label = sp.csr_array((np.ones(n), (np.arange(n), inv)), shape=(n, uniq.size))
    li, fj = np.asarray(known, dtype=np.int64).T
    label_target = sp.csr_array((np.ones(li.size), (li, fj)), shape=(uniq.size, names.size))
    targets = sp.csr_array((cell_label @ label_target) > 0)
    n_targets = np.asarray([-1 if k == "unassigned" else len(t) for k, t in zip(kind, parsed, strict=True)],
                           dtype=np.int64)
    keep = np.isin(kind, ("control", "perturbed"))[inv]
    iv = Interventions(targets=targets, column=column, n_control=kinds["control"], unknown=unknown,
                       n_label_targets=n_targets[inv], keep_cells=keep, kinds=kinds, unassigned=unassigned,
                       n_perturbed_labels=int(pert.size))
    log.info("%s", iv.log_line())
    return iv
