"""AnnData-facing tools in the scanpy manner: ``tl.discover``, ``tl.embed``, ``tl.encode``.

Each takes ``adata`` first and keyword-only options, writes its result onto the matching axis
(``varp`` for the feature graph, ``varm`` for per-feature vectors, ``uns["cape"]`` for
parameters), and returns ``None`` — or, with ``copy=True``, a new AnnData.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anndata as ad
import numpy as np
import scipy.sparse as sp

from cape_pipeline import _keys
from cape_pipeline.errors import CapeConfigError, CapeDataError

if TYPE_CHECKING:
    from cape_pipeline.causal.config import DiscoverConfig
    from cape_pipeline.hyperbolic.config import EmbedConfig

__all__ = ["discover", "embed", "encode"]


def _uns(adata: ad.AnnData) -> dict[str, Any]:
    if _keys.UNS not in adata.uns or not isinstance(adata.uns[_keys.UNS], dict):
        adata.uns[_keys.UNS] = {}
    return adata.uns[_keys.UNS]


def _plain(params: dict[str, Any]) -> dict[str, Any]:
    """JSON-like copy of a params dict that h5ad can store (no None, str keys)."""
    out: dict[str, Any] = {}
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, dict):
            out[str(k)] = _plain(v)
        elif isinstance(v, (str, int, float, bool, np.integer, np.floating)):
            out[str(k)] = v
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float)) for x in v):
            out[str(k)] = list(v)
        else:
            out[str(k)] = str(v)
    return out


def _show_progress(progress: bool | None) -> bool:
    """``progress``, or by default as scanpy would speak: in a terminal or notebook, or when
    ``scanpy.settings.verbosity`` is ``info`` (2) or more."""
    if progress is not None:
        return bool(progress)
    from cape_pipeline._progress import interactive

    try:
        import scanpy as sc

        verbose = int(sc.settings.verbosity) >= 2
    except Exception:  # noqa: BLE001 - scanpy missing or an odd verbosity object: stay quiet
        verbose = False
    return verbose or interactive()


def _options(cls: type, given: dict[str, Any], advanced: dict[str, Any]) -> dict[str, Any]:
    """The options to pass on: those of ``given`` that differ from the default of ``cls``'s field
    of that name (so that a ``config`` keeps its value where the keyword is left alone), then
    ``advanced``."""
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    return {**{k: v for k, v in given.items() if v != defaults[k]}, **advanced}


def discover(
    adata: ad.AnnData,
    *,
    method: str = "cape",
    algorithm: str = "auto",
    regulators: str | Sequence[str] | None = None,
    min_effect: float = 0.003,
    fdr: float = 0.05,
    n_splits: int = 8,
    covariates: str = "auto",
    interventions: str = "auto",
    device: str = "auto",
    seed: int = 0,
    config: DiscoverConfig | None = None,
    key_added: str = _keys.DAG,
    copy: bool = False,
    progress: bool | None = None,
    **advanced: Any,
) -> ad.AnnData | None:
    """Learn the causal DAG among ``adata``'s features (Step I) and store it.

    The default ``algorithm="auto"`` regresses every gene on its screened candidate parents for
    single-cell data (an edge where its partial R² exceeds ``min_effect`` at false-discovery
    rate ``fdr``), fits per-feature networks for other data above 20 features, and the paper's
    low-rank model up to 20 features (``algorithm="low-rank"`` asks for it by name).
    ``regulators``, ``min_effect``, ``fdr``, ``n_splits`` and ``interventions`` are options of
    the regression algorithm (``DiscoverConfig.regression``); another algorithm's options go in
    its config, e.g. ``learned={"epochs": 50}``.

    Parameters
    ----------
    adata
        ``(n_obs, n_vars)`` AnnData, preprocessed (see :func:`cape_pipeline.pp.preprocess`).
    method
        ``"cape"`` (CAPE's Step I), or a baseline: ``"correlation"``, ``"partial-correlation"``
        (both undirected, not a DAG), ``"notears"``, ``"dag-gnn"``, ``"notears-low-rank"``,
        ``"dagma"``, ``"dagma-mlp"``.
    algorithm
        ``"auto"`` (chosen from the data, as above), ``"regression"``, ``"learned"``,
        ``"low-rank"`` or ``"screened"``.
    regulators
        The only features that may be parents (``None``: every feature): ``"human"`` or
        ``"mouse"`` (bundled transcription-factor lists), ``"var:COLUMN"`` (a boolean ``var``
        column), a file with one name per line, or a list of names.
    min_effect
        The partial R² an edge must exceed: the share of its child's variance it explains
        beyond the other candidate parents.
    fdr
        Benjamini–Hochberg false-discovery rate of the edge test.
    n_splits
        Random halvings of the cells the fit is repeated on; an edge is kept where at least
        half of them keep it (1: one fit, in 1/8 of the time).
    covariates
        Cell-level covariates regressed out first: ``"auto"`` (the log library size where
        preprocess recorded it), ``"none"``, ``"states"``, ``"library"`` or
        ``"states+library"``.
    interventions
        The ``obs`` column of perturbation labels, ``"auto"`` (a condition column with
        controls, when there is one) or ``"none"``.
    device
        ``"auto"`` (CUDA when available), ``"cpu"`` or ``"cuda"``.
    seed
        Seed of the random splits and of the local torch generators.
    config
        A :class:`~cape_pipeline.causal.DiscoverConfig` holding every option (default: its
        defaults); keywords given here with a value other than their default replace its fields.
    key_added
        ``varp`` key for the adjacency.
    copy
        Work on and return a copy.
    progress
        Show progress (a bar in a terminal or notebook, else a line every 30 s); ``None``
        (default): in a terminal or notebook, or when ``scanpy.settings.verbosity >= 2``.
    **advanced
        Any other field of :class:`~cape_pipeline.causal.DiscoverConfig` (``max_edges_per_row``,
        ``n_states``, an algorithm's config such as ``low_rank={"rank": 10, "epochs": 50}``;
        ``cape params discover`` lists them), and a baseline method's own options.

    Returns
    -------
    None or AnnData
        Writes ``varp[key_added]`` — (n_vars, n_vars) ``scipy.sparse.csr_matrix`` float64,
        ``[i, j]`` = weight of edge i → j — and ``uns["cape"]["discover"]`` (parameters,
        ``n_edges``, ``n_cycle_edges_dropped``, ``key_added``).

    Raises
    ------
    CapeDataError, CapeConfigError
        As :func:`cape_pipeline.causal.api.discover`; an unknown keyword names the closest option.
    """
    from cape_pipeline.causal.api import discover as _discover
    from cape_pipeline.causal.config import DiscoverConfig
    from cape_pipeline.causal.options import FLAT_OPTIONS
    from cape_pipeline.causal.regression import RegressionConfig

    given = {"method": method, "algorithm": algorithm, "covariates": covariates, "device": device, "seed": seed}
    options = _options(DiscoverConfig, given, {})
    regression = _options(RegressionConfig, {"regulators": regulators, "min_effect": min_effect, "fdr": fdr,
                                             "n_splits": n_splits, "interventions": interventions}, {})
    if regression and method == "cape":
        given_reg = advanced.pop("regression", {})
        options["regression"] = (dataclasses.replace(given_reg, **regression) if dataclasses.is_dataclass(given_reg)
                                 else {**given_reg, **regression})
    elif regression:  # a baseline: these are its options, as any other keyword
        options.update(regression)
    options.update(advanced)
    if method == "cape":
        from cape_pipeline._config import did_you_mean

        fields = [f.name for f in dataclasses.fields(DiscoverConfig)] + list(FLAT_OPTIONS)
        unknown = sorted(set(advanced) - set(fields))
        if unknown:
            hint = "".join(did_you_mean(u, fields) for u in unknown)
            raise CapeConfigError(f"tl.discover: unknown option(s) {', '.join(map(repr, unknown))}{hint}; "
                                  "`cape params discover` lists them")
    adata = adata.copy() if copy else adata
    graph = _discover(adata, config, progress=_show_progress(progress), **options)
    adata.varp[key_added] = sp.csr_matrix(graph.adjacency)
    _uns(adata)["discover"] = _plain(
        {**graph.params, "n_edges": graph.n_edges, "n_cycle_edges_dropped": graph.n_cycle_edges_dropped, "key_added": key_added}
    )
    return adata if copy else None


def _graph_from(adata: ad.AnnData, graph_key: str) -> Any:
    from cape_pipeline.causal.graph import CausalGraph

    return CausalGraph.from_anndata(adata, graph_key)


def embed(
    adata: ad.AnnData,
    *,
    dim: int = 32,
    max_epochs: int = 1000,
    device: str = "cpu",
    seed: int = 0,
    config: EmbedConfig | None = None,
    graph_key: str = _keys.DAG,
    key_added: str = _keys.HYPERBOLOID,
    copy: bool = False,
    progress: bool | None = None,
    **advanced: Any,
) -> ad.AnnData | None:
    """Embed the stored feature DAG on the hyperboloid (Step II) and store the points.

    Cost: seconds for a few thousand features with edges; about 1.5 min at 5,000 features
    and ``dim=64`` on one core.

    Parameters
    ----------
    adata
        AnnData with a DAG in ``varp[graph_key]`` (from :func:`discover`).
    dim
        Dimension d of the hyperboloid (points in R^{d+1}); a transformer of width D takes
        ``dim = D / 2``.
    max_epochs
        Most epochs; training stops earlier once the loss stops falling.
    device
        Torch device for the points (float64 on every device): ``"cpu"``, ``"cuda"``,
        ``"cuda:0"``, … or ``"auto"``.
    seed
        Seed of the local torch generator (initial points, anchor order, negative samples).
    config
        A :class:`~cape_pipeline.hyperbolic.EmbedConfig` holding every option (default: its
        defaults); keywords given here with a value other than their default replace its fields.
    graph_key
        ``varp`` key of the adjacency.
    key_added
        ``varm`` key for the hyperboloid points.
    copy
        Work on and return a copy.
    progress
        As in :func:`discover`.
    **advanced
        Any other field of :class:`~cape_pipeline.hyperbolic.EmbedConfig` (``k_hop``,
        ``lambda_g``, ``geometry``, ``tol``, …; ``cape params embed`` lists them).

    Returns
    -------
    None or AnnData
        Writes ``varm[key_added]`` (n_vars, d + 1) float64 Lorentz points,
        ``varm["cape_poincare"]`` (n_vars, d) float64, ``var["cape_pagerank"]`` float64 and
        ``uns["cape"]["embed"]`` (parameters, final loss, the loss per epoch in ``loss_history``
        for :func:`cape_pipeline.pl.plot_loss`).

    Raises
    ------
    CapeDataError
        If ``varp[graph_key]`` is absent.
    CapeConfigError
        An unknown keyword (naming the closest option) or an invalid value.
    """
    from cape_pipeline.hyperbolic import EmbedConfig
    from cape_pipeline.hyperbolic import embed as _embed

    given = {"dim": dim, "max_epochs": max_epochs, "device": device, "seed": seed}
    options = _options(EmbedConfig, given, advanced)
    if options.get("device") == "auto":
        from cape_pipeline._utils import resolve_device

        options["device"] = str(resolve_device("auto"))
    adata = adata.copy() if copy else adata
    emb = _embed(_graph_from(adata, graph_key), config, progress=_show_progress(progress), **options)
    adata.varm[key_added] = np.asarray(emb.hyperboloid, dtype=np.float64)
    adata.varm[_keys.POINCARE] = np.asarray(emb.poincare, dtype=np.float64)
    adata.var[_keys.PAGERANK] = np.asarray(emb.pagerank, dtype=np.float64)
    final = float(emb.loss_history[-1]) if len(emb.loss_history) else float("nan")
    _uns(adata)["embed"] = _plain({**emb.params, "geometry": emb.geometry, "final_loss": final, "key_added": key_added,
                                   "loss_history": [float(v) for v in emb.loss_history]})
    return adata if copy else None


def encode(
    adata: ad.AnnData,
    encodings: Any = None,
    *,
    scale: float | None = None,
    frequencies: str = "single",
    frequency_range: float = 100.0,
    missing: str = "error",
    key_added: str = _keys.ANGLES,
    copy: bool = False,
) -> ad.AnnData | None:
    """Store CAPE rotary angles for ``adata``'s features (Step III, φ = c·e, Sec. 3.5 below Eq. 25).

    Parameters
    ----------
    adata
        ``(n_obs, n_vars)`` AnnData.
    encodings
        ``None``: compute φ from ``varm["cape_poincare"]`` (written by :func:`embed`).
        A :class:`~cape_pipeline.encodings.CapeEncodings` or a path to an encodings directory
        (``cape run ... --out DIR``): align its angles to ``adata.var_names`` by name.
    scale
        c in φ = c·e (radians per unit of Poincaré coordinate); used when ``encodings`` is None.
        ``None`` = :data:`cape_pipeline.encodings.DEFAULT_SCALE` (π/4, the default of
        :class:`~cape_pipeline.encodings.EncodeConfig`).
    frequencies, frequency_range
        The angle map when ``encodings`` is None: ``"single"`` (the paper's φ = c·e) or
        ``"geometric"`` (φ_i = c·ω_i·e_i, ω_i = ``frequency_range`` ^ (i/(d−1))); see
        :class:`~cape_pipeline.encodings.EncodeConfig`.
    missing
        With ``encodings``: ``"error"`` raises on features of ``adata`` that the encodings lack,
        ``"zero"`` gives them angle 0 (no rotation).
    key_added
        ``varm`` key for the angles.
    copy
        Work on and return a copy.

    Returns
    -------
    None or AnnData
        Writes ``varm[key_added]`` (n_vars, d) float64 angles in radians and
        ``uns["cape"]["encode"]`` (scale, d, source, missing policy).

    Raises
    ------
    CapeDataError
        Missing ``varm["cape_poincare"]``; features absent from the encodings with
        ``missing="error"``.
    CapeFileError
        An encodings directory that is missing or invalid.
    """
    adata = adata.copy() if copy else adata
    if encodings is None:
        if _keys.POINCARE not in adata.varm:
            raise CapeDataError(
                f"adata.varm[{_keys.POINCARE!r}] not found: run cape_pipeline.tl.embed(adata) first, "
                "or pass encodings= (a CapeEncodings or an encodings directory)"
            )
        from cape_pipeline.encodings import EncodeConfig
        from cape_pipeline.encodings.config import angles_from_poincare

        cfg = EncodeConfig.from_options(**({} if scale is None else {"scale": scale}), frequencies=frequencies,
                                        frequency_range=frequency_range)
        angles, freq = angles_from_poincare(adata.varm[_keys.POINCARE], cfg)
        info: dict[str, Any] = {"scale": cfg.scale, "source": f"varm['{_keys.POINCARE}']",
                                "frequencies": None if freq is None else freq.tolist()}
    else:
        from cape_pipeline.encodings import load_encodings

        enc = load_encodings(encodings) if isinstance(encodings, (str, os.PathLike)) else encodings
        angles = np.asarray(enc.align(adata.var_names, missing=missing), dtype=np.float64)
        info = {"scale": float(enc.scale), "source": str(encodings) if isinstance(encodings, (str, os.PathLike)) else "CapeEncodings", "missing": missing,
                "frequencies": None if enc.frequencies is None else enc.frequencies.tolist()}
    adata.varm[key_added] = angles
    _uns(adata)["encode"] = _plain({**info, "d": int(angles.shape[1]), "key_added": key_added})
    return adata if copy else None
