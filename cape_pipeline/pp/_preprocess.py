"""Implementation of :func:`cape_pipeline.pp.preprocess`."""

from __future__ import annotations

import logging
import warnings
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from cape_pipeline._keys import LIBRARY_SIZE
from cape_pipeline._lazy import is_lazy
from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.pp._counts import recover_counts

log = logging.getLogger(__name__)

InputState = Literal["counts", "normalized", "log-normalized", "scaled"]

_LOG_MAX = 30.0
"""Largest value seen in log1p-transformed expression (log1p(1e13)); above it data is linear."""


@dataclass(frozen=True)
class PreprocessConfig:
    """Parameters of :func:`preprocess` (paper 000 Supp. F.1 defaults).

    Attributes
    ----------
    modality
        ``None`` takes the modality recorded at ingest (``uns["cape_ingest"]["modality"]``).
    min_genes
        scRNA QC: drop cells with fewer detected features. ``None`` = 200 for raw counts, 0 for
        input that is already normalized (its QC happened upstream).
    min_cells
        scRNA: drop features detected in fewer cells (removes empty features).
    target_sum
        scRNA library size after ``normalize_total`` (counts per cell).
    n_top_genes
        Keep the top-n highly variable genes (scanpy's ``n_top_genes``, ``seurat`` flavor) for
        scRNA; for the other modalities the top-n features (proteins, CpGs) by variance. All
        are kept when there are fewer. Earlier name: ``n_top_features`` (still accepted, with a
        ``FutureWarning``).
    transform
        Proteomics only: ``log1p`` (default), ``arcsinh`` (cytometry, cofactor 5) or ``none``.
    use_raw
        ``auto`` uses ``adata.raw`` when ``X`` holds scaled values (negatives) and ``.raw`` holds
        counts or log-normalized values; ``always``/``never`` force it.
    counts_layer
        scRNA: the layer holding the raw counts (``adata.layers[counts_layer]``, e.g. ``"counts"``
        of a scanpy-processed file whose ``X`` holds log values; CLI ``--counts-layer``). The
        output is computed from it as from counts in ``X``: ``normalize_total`` and ``log1p``
        give the new ``X`` (the file's ``X`` is not used), its row sums are the library sizes
        (``obs["cape_library_size"]``, Step I's covariate) and Step I's counting-noise
        correction reads the counts back from it. The cells are taken as given (``min_genes``
        defaults to 0: QC happened upstream). ``None``: counts are found where ``X`` (or
        ``.raw``) holds them.
    recover_counts
        scRNA without ``counts_layer``: where ``X`` (or ``.raw``; a backed file: ``X``) holds
        log-normalized values (``log1p`` of library-normalized counts, natural log or log2), read
        the counts back from them (:func:`cape_pipeline.pp.recover_counts`: each cell's values
        over its smallest are whole numbers) and go on as from counts, with the cells taken as
        given; recorded as ``counts_source`` ``"X (recovered from log-normalized values)"``.
        Values that do not invert to whole numbers stay log-normalized. ``False``: never.
    """

    renamed: ClassVar[dict[str, str]] = {"n_top_features": "n_top_genes"}
    """Earlier field names still accepted by :func:`preprocess` and ``--set`` (old → new)."""

    modality: str | None = None
    min_genes: int | None = None
    min_cells: int = 3
    target_sum: float = 1e4
    n_top_genes: int = 2000
    transform: Literal["log1p", "arcsinh", "none"] = "log1p"
    use_raw: Literal["auto", "always", "never"] = "auto"
    counts_layer: str | None = None
    recover_counts: bool = True

    def __post_init__(self) -> None:
        if self.min_genes is not None and self.min_genes < 0:
            raise CapeConfigError(f"preprocess.min_genes: expected >= 0, got {self.min_genes}")
        if self.min_cells < 0:
            raise CapeConfigError(f"preprocess.min_cells: expected >= 0, got {self.min_cells}")
        if not self.target_sum > 0:
            raise CapeConfigError(f"preprocess.target_sum: expected > 0, got {self.target_sum}")
        if self.n_top_genes < 1:
            raise CapeConfigError(f"preprocess.n_top_genes: expected >= 1, got {self.n_top_genes}")
        if self.transform not in ("log1p", "arcsinh", "none"):
            raise CapeConfigError(f"preprocess.transform: expected log1p, arcsinh or none, got {self.transform!r}")
        if not isinstance(self.recover_counts, bool):
            raise CapeConfigError(f"preprocess.recover_counts: expected true or false, got {self.recover_counts!r}")
        if self.use_raw not in ("auto", "always", "never"):
            raise CapeConfigError(f"preprocess.use_raw: expected auto, always or never, got {self.use_raw!r}")
        if self.counts_layer is not None and self.use_raw == "always":
            raise CapeConfigError("preprocess.counts_layer: the counts come from that layer; leave use_raw='always' out")


def _sample_values(x: Any, max_rows: int = 2000) -> np.ndarray:
    rows = x[: min(max_rows, x.shape[0])]
    vals = rows.data if sp.issparse(rows) else np.asarray(rows).ravel()
    return vals[np.isfinite(vals)]


def detect_input_state(x: Any) -> InputState:
    """Guess what an expression matrix holds, from its first 2000 rows.

    Parameters
    ----------
    x
        ``(N, M)`` dense or sparse matrix.

    Returns
    -------
    str
        ``"scaled"`` (any negative value, e.g. after ``sc.pp.scale``), ``"counts"`` (all
        non-negative integers), ``"log-normalized"`` (non-integer, max ≤ 30) or
        ``"normalized"`` (non-integer, larger values: normalized but not logged).
    """
    v = _sample_values(x)
    if v.size == 0:
        return "counts"
    if (v < 0).any():
        return "scaled"
    if np.allclose(v, np.round(v)):
        return "counts"
    return "log-normalized" if float(v.max()) <= _LOG_MAX else "normalized"


def _computed(adata: ad.AnnData) -> ad.AnnData:
    """A copy of ``adata`` with its dask ``X`` computed (small, non-scRNA tables only)."""
    out = adata.copy()
    out.X = adata.X.compute(scheduler="synchronous")
    return out


def _lazy_input_state(x: Any, max_rows: int = 2000, piece: int = 250) -> InputState:
    """:func:`detect_input_state` of the first ``max_rows`` rows of a dask ``x``, computed
    ``piece`` rows at a time (the whole sample of a wide matrix costs several times its size)."""
    states, vmax = [], 0.0
    for start in range(0, min(max_rows, x.shape[0]), piece):
        rows = x[start : min(start + piece, max_rows)].compute(scheduler="synchronous")
        states.append(detect_input_state(rows))
        v = _sample_values(rows)
        vmax = max(vmax, float(v.max()) if v.size else 0.0)
    if "scaled" in states:
        return "scaled"
    if all(s == "counts" for s in states):
        return "counts"
    return "log-normalized" if vmax <= _LOG_MAX else "normalized"


def _as_dense_or_csr(x: Any) -> Any:
    return sp.csr_matrix(x, dtype=np.float32) if sp.issparse(x) else np.asarray(x, dtype=np.float32)


def _top_variance(adata: ad.AnnData, n_top: int) -> ad.AnnData:
    if n_top >= adata.n_vars:
        return adata
    x = adata.X
    if sp.issparse(x):
        mean = np.asarray(x.mean(axis=0)).ravel()
        var = np.asarray(x.multiply(x).mean(axis=0)).ravel() - mean**2
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            var = np.nanvar(np.asarray(x, dtype=np.float64), axis=0)
    var = np.nan_to_num(var, nan=-np.inf)
    keep = np.sort(np.argsort(-var, kind="stable")[:n_top])
    return adata[:, keep].copy()


def _perturbed_genes(obs: pd.DataFrame, var_names: Any) -> np.ndarray:
    """``(len(var_names),)`` bool: the genes named as perturbation targets in a condition column
    of ``obs`` (:func:`cape_pipeline._keys.find_condition_column`), all False without one."""
    from cape_pipeline._keys import find_condition_column, parse_targets

    names = np.asarray(var_names, dtype=str)
    col = find_condition_column(obs, var_names=names)
    if col is None:
        return np.zeros(len(var_names), dtype=bool)
    features = frozenset(names)
    targets = {t for label in obs[col].astype(str).unique() for t in parse_targets(label, features)}
    return np.isin(names, sorted(targets))


def _check_features(adata: ad.AnnData, where: str) -> None:
    """Raise on all-missing or constant features (they carry no information for later stages)."""
    x = adata.X
    if sp.issparse(x):
        x = x.toarray()
    x = np.asarray(x, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        all_nan = np.isnan(x).all(axis=0)
        span = np.nanmax(np.where(all_nan, 0.0, x), axis=0) - np.nanmin(np.where(all_nan, 0.0, x), axis=0)
    names = adata.var_names
    if all_nan.any():
        bad = names[all_nan].tolist()
        raise CapeDataError(f"{where}: feature(s) {bad[:10]} ({len(bad)} in all) are entirely missing; remove them")
    const = span == 0
    if const.any():
        bad = names[const].tolist()
        raise CapeDataError(
            f"{where}: feature(s) {bad[:10]} ({len(bad)} in all) are constant; remove them or select "
            "fewer features (preprocess.n_top_genes)"
        )


def preprocess(
    adata: ad.AnnData, config: PreprocessConfig | None = None, *, copy: bool = False, **kwargs: Any
) -> ad.AnnData | None:
    """Preprocess an AnnData for causal discovery and the transformers, per modality.

    scRNA (Supp. F.1): choose ``X`` or ``.raw`` (``use_raw``), recognize counts /
    normalized / log-normalized / scaled input, then for counts: ``filter_cells(min_genes)``,
    ``filter_genes(min_cells)``, ``normalize_total(target_sum)``, ``log1p``; for normalized
    input: ``filter_genes`` and ``log1p`` only; for log-normalized or scaled input:
    ``filter_genes`` only (never normalized twice). Then the top ``n_top_genes``
    highly variable genes (scanpy ``seurat`` flavor).
    Proteomics: ``log1p``/``arcsinh``/no transform, no library-size normalization, NaN kept,
    top features by variance. Methylation: β values checked to lie in [0, 1], NaN kept, top
    CpGs by variance. Synthetic: no transform, top features by variance.

    Parameters
    ----------
    adata
        ``(N, M)`` AnnData, e.g. from :func:`cape_pipeline.read` or scanpy.
    config
        A :class:`PreprocessConfig` (default: every default); ``kwargs`` replace its fields.
    copy
        As in scanpy: ``False`` (default) changes ``adata`` in place and returns ``None``;
        ``True`` leaves it untouched and returns the result. A backed or lazy (dask) AnnData
        needs ``copy=True``.
    **kwargs
        Fields of :class:`PreprocessConfig`: ``n_top_genes`` (2000), ``min_genes`` (``None``: 200
        for raw counts, else 0), ``min_cells`` (3), ``target_sum`` (1e4), ``transform``,
        ``use_raw``, ``modality``, ….

    Returns
    -------
    AnnData or None
        ``(N', M')``, float32 ``X`` (the preprocessed values). Everything else of ``adata``
        follows the kept cells and features: ``obs`` and ``var`` columns (plus scanpy's QC and
        highly-variable columns), ``obsm``/``obsp`` (e.g. ``X_pca``, ``X_umap``), ``varm``/
        ``varp`` (e.g. ``varp["true_dag"]``), ``layers``, ``raw`` and ``uns``.
        ``uns["cape_preprocess"]`` records the input state, whether ``.raw`` was used, where the
        counts came from (``counts_source``: ``"X"``, ``".raw"``, ``"layers['NAME']"`` or None),
        each step and the shapes before and after. When ``X`` held scaled values and ``.raw`` is
        used, the features come from ``.raw``; features of ``.raw`` absent from ``X`` have no
        ``varm``/``varp``/``layers`` rows, so those are dropped then (logged), and the switch
        to ``.raw`` is logged at INFO.

    Raises
    ------
    CapeDataError
        Methylation values outside [0, 1]; negative values with ``transform="log1p"``;
        constant or entirely missing features; fewer than 2 cells or no features left after QC;
        a ``counts_layer`` that is missing (the message lists the layers) or holds no counts.
    CapeConfigError
        Invalid parameters; a keyword that is not a field of :class:`PreprocessConfig` (naming
        the closest, e.g. "did you mean 'n_top_genes'?"); ``copy=False`` on a backed or lazy
        AnnData; ``counts_layer`` on
        data that is not scRNA or is backed.
    """
    import scanpy as sc

    if not copy and (adata.isbacked or is_lazy(adata.X)):
        raise CapeConfigError(
            "preprocess: a backed or lazy (dask) AnnData cannot be changed in place; "
            "call preprocess(adata, copy=True) and keep the returned AnnData"
        )
    source = adata

    cfg = _config(config, kwargs)
    modality = cfg.modality or adata.uns.get("cape_ingest", {}).get("modality", "scrna")
    where = f"preprocess ({modality})"
    steps: list[str] = []
    shape_in = [int(adata.n_obs), int(adata.n_vars)]
    record: dict[str, Any] = {"modality": modality, "config": asdict(cfg), "used_raw": False}

    if cfg.counts_layer is not None:
        _check_counts_layer(adata, cfg.counts_layer, modality)
    if (adata.isbacked or is_lazy(adata.X)) and modality != "scrna":  # small N x M tables
        adata = adata.to_memory() if adata.isbacked else _computed(adata)
    if adata.isbacked or is_lazy(adata.X):  # scRNA larger than memory: dask passes, X never loaded
        from cape_pipeline._lazy import backed_as_dask
        from cape_pipeline.pp._lazy import preprocess_lazy_scrna

        state = _lazy_input_state(backed_as_dask(adata))
        min_genes = cfg.min_genes if cfg.min_genes is not None else (200 if state == "counts" else 0)
        work, steps, base = preprocess_lazy_scrna(
            adata,
            state=state,
            min_genes=min_genes,
            min_cells=cfg.min_cells,
            target_sum=cfg.target_sum,
            n_top=cfg.n_top_genes,
            where=where,
            recover=cfg.recover_counts,
        )
        if base is not None:
            record["counts_recovered"] = {"base": base}
            state = "counts"
        record["input_state"] = state
        record["counts_source"] = _counts_source(state, False, None, base is not None)
    elif modality == "scrna":
        state = detect_input_state(adata.X)
        use_raw = cfg.counts_layer is None and adata.raw is not None and (
            cfg.use_raw == "always"
            or (cfg.use_raw == "auto" and state == "scaled" and detect_input_state(adata.raw.X) != "scaled")
        )
        if cfg.use_raw == "always" and adata.raw is None:
            raise CapeConfigError("preprocess.use_raw='always' but the data has no .raw")
        if use_raw:
            raw = adata.raw.to_adata()
            work = _work(raw.X, adata.obs, raw.var)
            state = detect_input_state(work.X)
            record["used_raw"] = True
            steps.append("use .raw (X holds scaled values)")
            log.info("preprocess: X holds scaled values (negatives); using .raw (%s) instead", state)
        elif cfg.counts_layer is not None:
            work = _work(adata.layers[cfg.counts_layer], adata.obs, adata.var)
            state = "counts"
            steps.append(f"input: layers[{cfg.counts_layer!r}] (counts)")
        else:
            work = _work(adata.X, adata.obs, adata.var)
        recovered = None
        if state == "log-normalized" and cfg.counts_layer is None and cfg.recover_counts:
            recovered = recover_counts(work.X)
        if recovered is not None:
            work.X, record["counts_recovered"] = recovered
            steps.append(f"counts recovered from the log-normalized values (log base {recovered[1]['base']})")
            log.info("preprocess: %s holds log-normalized counts; the counts are read back from it (each cell's "
                     "values over its smallest are whole numbers) and normalized again",
                     ".raw" if use_raw else "X")
            state = "counts"
        record["input_state"] = state
        record["counts_source"] = _counts_source(state, use_raw, cfg.counts_layer, recovered is not None)
        upstream_qc = state != "counts" or cfg.counts_layer is not None or recovered is not None
        min_genes = cfg.min_genes if cfg.min_genes is not None else (0 if upstream_qc else 200)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if min_genes > 0:
                _filter(work, "cells", min_genes)
                steps.append(f"filter_cells(min_genes={min_genes})")
            if cfg.min_cells > 0:
                _filter(work, "genes", cfg.min_cells)
                steps.append(f"filter_genes(min_cells={cfg.min_cells})")
            if work.n_obs < 2 or work.n_vars < 1:
                raise CapeDataError(
                    f"{where}: {work.n_obs} cells x {work.n_vars} genes left after QC "
                    f"(min_genes={min_genes}, min_cells={cfg.min_cells}); lower these thresholds"
                )
            if state == "counts":
                # each cell's total counts (after QC, before normalization): Step I's library-size covariate
                work.obs[LIBRARY_SIZE] = np.asarray(work.X.sum(axis=1), dtype=np.float64).ravel()
                sc.pp.normalize_total(work, target_sum=cfg.target_sum)
                sc.pp.log1p(work)
                steps += [f"normalize_total(target_sum={cfg.target_sum:g})", "log1p"]
            elif state == "normalized":
                sc.pp.log1p(work)
                steps.append("log1p (input already normalized)")
            else:
                steps.append(f"no normalization (input is {state})")
            if cfg.n_top_genes < work.n_vars:
                sc.pp.highly_variable_genes(work, n_top_genes=cfg.n_top_genes, flavor="seurat")
                keep = work.var["highly_variable"].to_numpy()
                steps.append(f"highly_variable_genes(n_top_genes={cfg.n_top_genes}, flavor='seurat')")
                extra = _perturbed_genes(adata.obs, work.var_names) & ~keep
                if extra.any():  # Step I needs the perturbed genes to use their interventions
                    keep = keep | extra
                    steps.append(f"kept {int(extra.sum())} perturbed genes outside the HVGs")
                    log.info("preprocess: kept %d perturbed genes outside the HVGs", int(extra.sum()))
                work = work[:, keep].copy()
    else:
        work = _work(adata.X, adata.obs, adata.var)
        if sp.issparse(work.X):
            work.X = work.X.toarray()
        x = work.X
        record["input_state"] = "as given"
        if modality == "methylation":
            finite = x[np.isfinite(x)]
            if finite.size and (finite.min() < 0 or finite.max() > 1):
                cols = np.flatnonzero(((x < 0) | (x > 1)).any(axis=0))
                raise CapeDataError(
                    f"{where}: β values outside [0, 1] in feature(s) {work.var_names[cols[:10]].tolist()}; "
                    "expected methylation β values (M-values must be converted first)"
                )
        elif modality == "proteomics" and cfg.transform != "none":
            if cfg.transform == "log1p":
                if np.nanmin(x) < 0:
                    cols = np.flatnonzero((x < 0).any(axis=0))
                    raise CapeDataError(
                        f"{where}: negative values in feature(s) {work.var_names[cols[:10]].tolist()} "
                        "cannot take log1p; use --set preprocess.transform=arcsinh or none"
                    )
                work.X = np.log1p(x)
            else:
                work.X = np.arcsinh(x / 5.0).astype(np.float32)
            steps.append(cfg.transform)
        _check_features(work, where)
        if cfg.n_top_genes < work.n_vars:
            work = _top_variance(work, cfg.n_top_genes)
            steps.append(f"top {cfg.n_top_genes} features by variance")
    work.X = _as_dense_or_csr(work.X)
    record["steps"] = steps
    record["shape_in"] = shape_in
    record["shape_out"] = [int(work.n_obs), int(work.n_vars)]
    out = _carry_over(source, work, record)
    log.info("preprocess %s: %s -> %s (%s)", modality, shape_in, record["shape_out"], "; ".join(steps))
    if copy:
        return out
    adata._init_as_actual(
        out.X, obs=out.obs, var=out.var, uns=out.uns, obsm=out.obsm, varm=out.varm, obsp=out.obsp,
        varp=out.varp, layers=out.layers, raw=out.raw,
    )
    return None


def _filter(work: ad.AnnData, axis: str, minimum: int) -> None:
    """Scanpy's ``filter_cells(min_genes=minimum)`` (``axis="cells"``) or
    ``filter_genes(min_cells=minimum)`` on ``work`` in place, with the same ``obs["n_genes"]`` /
    ``var["n_cells"]`` column, except that the matrix is subset only where a cell or gene is
    dropped: scanpy copies it either way, and a copy of a 500,000-cell matrix that drops nothing
    costs its size again."""
    import scanpy as sc

    if axis == "cells":
        keep, number = sc.pp.filter_cells(work, min_genes=minimum, inplace=False)
        work.obs["n_genes"] = number
        if not keep.all():
            work._inplace_subset_obs(keep)
    else:
        keep, number = sc.pp.filter_genes(work, min_cells=minimum, inplace=False)
        work.var["n_cells"] = number
        if not keep.all():
            work._inplace_subset_var(keep)


def _counts_source(state: str, used_raw: bool, layer: str | None, recovered: bool = False) -> str | None:
    """Where the scRNA counts came from: ``"layers['NAME']"``, ``"X"``, ``".raw"`` (with
    `` (recovered from log-normalized values)`` where they were read back from those) or None."""
    if state != "counts":
        return None
    where = f"layers[{layer!r}]" if layer is not None else ".raw" if used_raw else "X"
    return f"{where} (recovered from log-normalized values)" if recovered else where


def _check_counts_layer(adata: ad.AnnData, layer: str, modality: str) -> None:
    """Raise unless ``adata.layers[layer]`` exists and holds counts (scRNA, in memory)."""
    if modality != "scrna":
        raise CapeConfigError(f"preprocess.counts_layer={layer!r}: counts apply to scRNA data, this is {modality!r}")
    if adata.isbacked or is_lazy(adata.X):
        raise CapeConfigError(f"preprocess.counts_layer={layer!r}: not read from a file opened backed (larger than "
                              "half the memory); read it into memory (--set ingest.backed=false) or put the counts in X")
    if layer not in adata.layers:
        have = ", ".join(map(str, adata.layers)) or "none"
        raise CapeDataError(f"preprocess.counts_layer={layer!r}: no such layer (layers: {have})")
    state = detect_input_state(adata.layers[layer])
    if state != "counts":
        raise CapeDataError(f"preprocess.counts_layer={layer!r}: the layer holds {state} values, not counts "
                            "(whole numbers >= 0); name the layer of raw counts")


def _config(config: PreprocessConfig | None, options: dict[str, Any]) -> PreprocessConfig:
    """``config`` (default: every default) with ``options`` replacing its fields; an unknown
    keyword is a :class:`CapeConfigError` naming the closest field."""
    from cape_pipeline._config import with_options

    return with_options(PreprocessConfig, config, options, "preprocess")


_POS = "_cape_pos"
"""Column of ``work.obs``/``work.var`` holding each row's position in the input (names may repeat)."""


def _work(x: Any, obs: Any, var: Any) -> ad.AnnData:
    """The matrix to preprocess, with each cell's and feature's input position recorded."""
    return ad.AnnData(
        X=_as_dense_or_csr(x),
        obs=pd.DataFrame({_POS: np.arange(len(obs))}, index=obs.index.copy()),
        var=pd.DataFrame({_POS: np.arange(len(var))}, index=var.index.copy()),
    )


def _carry_over(source: ad.AnnData, work: ad.AnnData, record: dict[str, Any]) -> ad.AnnData:
    """``work``'s X with everything else of ``source`` subset to ``work``'s cells and features.

    Never reads ``source.X`` (it may be backed or lazy). ``work.obs``/``work.var`` columns
    (scanpy's QC and highly-variable statistics) are added to ``source``'s.
    """
    cells = work.obs[_POS].to_numpy()
    genes = work.var[_POS].to_numpy()
    in_x = not bool(record.get("used_raw"))
    obs = source.obs.iloc[cells].copy()
    var = (source.var if in_x else source.raw.var).iloc[genes].copy()
    for frame, new in ((obs, work.obs), (var, work.var)):
        for col in new.columns.drop(_POS):
            frame[col] = new[col].values  # .values keeps a categorical a categorical
    memory = not (source.isbacked or is_lazy(source.X))
    obsm = {k: v[cells] for k, v in source.obsm.items()}
    obsp = {k: v[cells][:, cells] for k, v in source.obsp.items()}
    varm = {k: v[genes] for k, v in source.varm.items()} if in_x else {}
    varp = {k: v[genes][:, genes] for k, v in source.varp.items()} if in_x else {}
    layers = {k: v[cells][:, genes] for k, v in source.layers.items()} if in_x and memory else {}
    dropped = [f"varm[{k!r}]" for k in source.varm if k not in varm] + [f"varp[{k!r}]" for k in source.varp if k not in varp]
    dropped += [f"layers[{k!r}]" for k in source.layers if k not in layers]
    if dropped:
        log.info("preprocess: dropped %s (they do not follow the output's features)", ", ".join(dropped))
        record["dropped"] = dropped
    uns = dict(source.uns)
    uns["cape_ingest"] = dict(source.uns.get("cape_ingest", {}))
    uns["cape_preprocess"] = record
    raw = source.raw[cells].to_adata() if memory and source.raw is not None else None
    return ad.AnnData(X=work.X, obs=obs, var=var, uns=uns, obsm=obsm, varm=varm, obsp=obsp, varp=varp,
                      layers=layers, raw=raw)
