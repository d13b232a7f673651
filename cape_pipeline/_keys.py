"""Default AnnData keys written by :mod:`cape_pipeline.tl` (one place, as scanpy's ``_keys``), the
perturbation-label conventions read from ``obs`` (by preprocess, Step I and the perturbation task),
and the pipeline's stage order (read by the stages, the CLI and ``workflows/Snakefile``; importing
this module imports nothing heavy)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

DAG = "cape_dag"
"""``varp``: (n_vars, n_vars) sparse float64, ``[i, j]`` = weight of edge i → j (Step I)."""
HYPERBOLOID = "cape_hyperboloid"
"""``varm``: (n_vars, d + 1) float64 points on the hyperboloid (Step II, Eq. 11)."""
POINCARE = "cape_poincare"
"""``varm``: (n_vars, d) float64 Poincaré-ball coordinates e (Eq. A.22)."""
PAGERANK = "cape_pagerank"
"""``var``: (n_vars,) float64 causal PageRank π (Eq. 18)."""
ANGLES = "cape_angles"
"""``varm``: (n_vars, d) float64 rotary angles φ = c·e in radians (Sec. 3.5, the map stated below Eq. 25)."""
LIBRARY_SIZE = "cape_library_size"
"""``obs``: (n_obs,) float64 total counts per cell before normalization, written by
:func:`cape_pipeline.pp.preprocess` when the input held counts; Step I's library-size covariate."""
UNS = "cape"
"""``uns``: parameters and diagnostics of each step, under ``"discover"``, ``"embed"``, ``"encode"``."""

STAGE_ORDER = ("ingest", "preprocess", "discover", "embed", "encode", "train", "evaluate")
"""The pipeline's stages in the order they run (``cape run --until``, one ``cape STAGE`` command each,
one Snakemake rule each)."""

CONTROL_LABELS = (
    "ctrl", "control", "non-targeting", "nontargeting", "non_targeting", "unperturbed", "NT", "NTC",
    "safe-targeting", "safe_targeting", "intergenic", "NegCtrl", "negative_control",
)
"""Labels of control cells in a perturbation column (compared case-insensitively): GEARS' ``ctrl``,
scPerturb's ``control``, and the spellings of other screens' non-targeting guides (``NT`` in
Papalexi et al. 2021 / Seurat's mixscape, ``NTC``, safe-targeting guides that cut a neutral site,
intergenic guides as in Dixit et al. 2016, Norman et al. 2019's ``NegCtrl``)."""
UNASSIGNED_LABELS = (
    "", "nan", "none", "na", "n/a", "null", "unassigned", "multiple", "multiplet", "unknown", "doublet",
    "ambiguous", "undetermined", "no_guide", "no guide",
)
"""Labels of cells with no assigned perturbation (compared case-insensitively after stripping;
missing values count as ``""``): no guide detected, several guides (a multiplet), or a call the
guide assignment could not make. Step I leaves these cells out; they are neither controls nor
perturbed cells."""
CONDITION_COLUMNS = ("condition", "perturbation", "guide_target", "target_gene", "gene")
"""``obs`` columns looked at first, in order, for perturbation labels when none is named."""
TARGET_SEPARATORS = ("_", ",", ";", "|")
"""Separators of several targets in one label tried, in order, where GEARS' ``+`` does not split a
label into features (scPerturb writes ``"geneA_geneB"``; other screens a comma, semicolon or bar)."""


def parse_condition(label: Any, sep: str = "+", controls: Iterable[str] = CONTROL_LABELS) -> list[str]:
    """The perturbed genes of one condition label (GEARS' convention): ``"g3+ctrl"`` → ``["g3"]``,
    ``"g3+g7"`` → ``["g3", "g7"]``, ``"ctrl"`` / ``"non-targeting"`` → ``[]``."""
    ctrl = {c.lower() for c in controls}
    return [t.strip() for t in str(label).split(sep) if t.strip() and t.strip().lower() not in ctrl]


def condition_labels(obs: Any, column: str, where: str) -> Any:
    """The perturbation labels of ``obs[column]`` as a ``(N,)`` str array, refusing cells without one.

    Raises
    ------
    CapeDataError
        ``where`` and the column named: cells whose label is missing (NaN) or empty (an empty
        label is missing metadata, not a control: controls are named, :data:`CONTROL_LABELS`).
    """
    import numpy as np

    from cape_pipeline.errors import CapeDataError

    col = obs[column]
    if col.isna().any():
        raise CapeDataError(f"{where}obs[{column!r}]: {int(col.isna().sum())} cells have no condition label")
    labels = col.astype(str).to_numpy()
    empty = np.char.strip(labels.astype(str)) == ""
    if empty.any():
        raise CapeDataError(
            f"{where}obs[{column!r}]: {int(empty.sum())} cells have an empty condition label; label the "
            f"controls (e.g. 'ctrl', one of {', '.join(CONTROL_LABELS)}) and the perturbed cells ('gA', 'gA+gB')"
        )
    return labels


def find_condition_column(
    obs: Any, controls: Iterable[str] = CONTROL_LABELS, var_names: Iterable[str] | None = None
) -> str | None:
    """The ``obs`` column of perturbation labels, or None.

    Without ``var_names``: the first of :data:`CONDITION_COLUMNS` in ``obs`` (a DataFrame) whose
    values include a control label (``controls``, case-insensitive). With ``var_names`` (the
    features), a column must also hold a label whose targets (:func:`parse_targets`) are all
    features: the first of :data:`CONDITION_COLUMNS` that does, then the first other text or
    categorical column, such as ``obs["sgRNA_target"]`` holding ``"NTC"`` and gene names. So a
    ``condition`` column of a stimulation or a disease (``"control"``, ``"IFN-β"``) is not read as
    perturbations of genes.
    """
    features = None if var_names is None else frozenset(str(v) for v in var_names)

    def reads(col: str) -> bool:
        values = [str(v) for v in obs[col].unique()]
        if not holds_control(values, controls):
            return False
        return features is None or any(names_features(v, features, controls) for v in values)

    for col in CONDITION_COLUMNS:
        if col in obs.columns and reads(col):
            return col
    if features is None:
        return None
    for col in obs.columns:
        if col not in CONDITION_COLUMNS and str(obs[col].dtype) in ("object", "category", "string") and reads(col):
            return col
    return None


def holds_control(labels: Iterable[str], controls: Iterable[str] = CONTROL_LABELS) -> bool:
    """Whether one of ``labels`` (strings) is a control label (stripped, case-insensitive)."""
    ctrl = {c.lower() for c in controls}
    return any(str(v).strip().lower() in ctrl for v in labels)


def names_features(label: Any, features: Any, controls: Iterable[str] = CONTROL_LABELS) -> bool:
    """Whether a condition label names at least one target and every target is in ``features``
    (:func:`parse_targets`)."""
    targets = parse_targets(label, features, controls=controls)
    return bool(targets) and all(t in features for t in targets)


def parse_targets(
    label: Any, features: Any, sep: str = "+", controls: Iterable[str] = CONTROL_LABELS
) -> list[str]:
    """The perturbed genes of one condition label, split so that they are features where a split does.

    :func:`parse_condition` with ``sep``; where that leaves a target that is not in ``features``
    (a set or dict of feature names), the first of :data:`TARGET_SEPARATORS` that splits the label
    into features and control names only (``"KLF1_SET"`` → ``["KLF1", "SET"]`` when both are
    features; a feature named ``"GENE_1"`` stays one target). Otherwise the ``sep`` split.
    """
    targets = parse_condition(label, sep, controls)
    if all(t in features for t in targets):
        return targets
    text = str(label)
    for alt in TARGET_SEPARATORS:
        if alt != sep and alt in text:
            split = parse_condition(text, alt, controls)
            if split and all(t in features for t in split):
                return split
    return targets
