"""Dataset loaders named in ``data_catalog.yaml``.

Bundled loaders work offline: :func:`pbmc68k_reduced` and :func:`krumsiek11` (shipped inside
scanpy), :func:`sachs` (shipped in this package) and :func:`synthetic_mlp` (simulated with
gcastle). The others read a local copy of a public dataset and raise
:class:`~cape_pipeline.errors.CapeFileError` with its public source when it is absent.
"""

from __future__ import annotations

import os
import warnings
from importlib import resources
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from cape_pipeline._utils import seeded_global_rngs
from cape_pipeline.datasets._counts import (
    simulated_counts,
    simulated_grn_counts,
    simulated_hill_counts,
)
from cape_pipeline.datasets._interventions import (
    parse_condition,
    simulate_methylation_age,
    simulate_perturbation_data,
)
from cape_pipeline.datasets._simulate import TRUE_DAG_KEY, sdcd_sem
from cape_pipeline.errors import CapeConfigError, CapeFileError

__all__ = [
    "pbmc68k_reduced",
    "krumsiek11",
    "sachs",
    "synthetic_mlp",
    "synthetic_sem",
    "sdcd_sem",
    "simulated_counts",
    "simulated_grn_counts",
    "simulated_hill_counts",
    "simulate_perturbation_data",
    "simulate_methylation_age",
    "parse_condition",
    "norman",
    "hpancreas",
    "altumage",
    "cellxgene",
    "TRUE_DAG_KEY",
]



def pbmc68k_reduced() -> ad.AnnData:
    """700 PBMCs × 765 genes with 10 ``bulk_labels`` cell types, shipped inside scanpy.

    ``.X`` holds scaled values (with negatives) and ``.raw`` the log-normalized values;
    :func:`cape_pipeline.pp.preprocess` recognizes this and uses ``.raw`` without normalizing
    twice. Source: Zheng et al. (2017), via ``scanpy.datasets.pbmc68k_reduced``.
    """
    import scanpy as sc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        adata = sc.datasets.pbmc68k_reduced()
    adata.uns["cape_dataset"] = "pbmc68k_reduced"
    return adata


def krumsiek11() -> ad.AnnData:
    """640 simulated cells × 11 genes of the myeloid GRN (Krumsiek et al. 2011), from scanpy."""
    import scanpy as sc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        adata = sc.datasets.krumsiek11()
    adata.obs_names_make_unique()
    adata.uns["cape_dataset"] = "krumsiek11"
    return adata


def _sachs_dir() -> Path:
    return Path(str(resources.files("cape_pipeline") / "data" / "sachs"))


def sachs() -> ad.AnnData:
    """Sachs et al. (2005) flow cytometry: 7466 cells × 11 proteins, raw intensities (float32).

    ``varp["true_dag"]`` holds the 18-edge consensus graph as a sparse 0/1 matrix
    (``[m, n] = 1`` ⇔ m → n). Shipped as package data (copied from cdt 0.6.0, Apache-2.0;
    see ``cape_pipeline/data/sachs/NOTICE.md``).
    """
    d = _sachs_dir()
    x = pd.read_csv(d / "sachs_data.csv")
    edges = pd.read_csv(d / "sachs_consensus_graph.csv")
    names = pd.Index(x.columns.astype(str))
    adata = ad.AnnData(
        X=x.to_numpy(dtype=np.float32),
        obs=pd.DataFrame(index=[f"cell{i}" for i in range(len(x))]),
        var=pd.DataFrame(index=names),
    )
    src = names.get_indexer(edges["Cause"].astype(str))
    tgt = names.get_indexer(edges["Effect"].astype(str))
    if (src < 0).any() or (tgt < 0).any():  # package data is fixed; this guards a bad edit
        raise CapeFileError(f"{d / 'sachs_consensus_graph.csv'}: names do not match the data columns")
    m = names.size
    adata.varp[TRUE_DAG_KEY] = sp.csr_matrix((np.ones(len(edges)), (src, tgt)), shape=(m, m))
    adata.uns["cape_dataset"] = "sachs"
    return adata


GRAPHS = ("scale-free", "er")
SEMS = ("mlp", "linear")


def synthetic_sem(
    n_nodes: int = 20,
    n_edges: int | None = None,
    n_obs: int = 2000,
    seed: int = 0,
    noise_scale: float = 1.0,
    *,
    graph: str = "scale-free",
    sem: str = "mlp",
) -> ad.AnnData:
    """Simulate data from a structural equation model over a random DAG (gcastle ``IIDSimulation``).

    Parameters
    ----------
    n_nodes
        Number of features M (>= 2).
    n_edges
        Target edge count; default ``2 * n_nodes``. ``castle.datasets.DAG.scale_free``
        (Barabási–Albert) or ``DAG.erdos_renyi`` yields about this many (the realized count is
        in ``uns["cape_dataset_params"]["n_true_edges"]``).
    n_obs
        Number of samples N (>= 2).
    seed
        Seed for the graph and the SEM; the global RNG state is restored afterwards.
    noise_scale
        Standard deviation of the additive Gaussian noise.
    graph
        ``"scale-free"`` (hubs) or ``"er"`` (Erdős–Rényi, no hubs).
    sem
        ``"mlp"`` (gcastle ``method="nonlinear", sem_type="mlp"``: each node a random one-hidden-
        layer sigmoid MLP of its parents plus noise — SDCD's "MLP-Gaussian") or ``"linear"``
        (linear-Gaussian, edge weights ±U(0.5, 2)).

    Returns
    -------
    AnnData
        ``X`` (N, M) float32; ``var_names`` ``x0..x{M-1}``; ``varp["true_dag"]`` sparse 0/1
        (M, M) with ``[m, n] = 1`` ⇔ m → n.

    Raises
    ------
    CapeConfigError
        If ``n_nodes < 2``, ``n_obs < 2``, ``n_edges < 1``, or ``graph`` / ``sem`` is unknown.
    """
    from castle.datasets import DAG, IIDSimulation

    name = "synthetic-mlp" if (graph, sem) == ("scale-free", "mlp") else "synthetic-sem"
    if graph not in GRAPHS:
        raise CapeConfigError(f"{name}: graph must be one of {', '.join(GRAPHS)}, got {graph!r}")
    if sem not in SEMS:
        raise CapeConfigError(f"{name}: sem must be one of {', '.join(SEMS)}, got {sem!r}")
    if n_nodes < 2:
        raise CapeConfigError(f"{name}: n_nodes must be >= 2, got {n_nodes}")
    if n_obs < 2:
        raise CapeConfigError(f"{name}: n_obs must be >= 2, got {n_obs}")
    n_edges = 2 * n_nodes if n_edges is None else int(n_edges)
    if n_edges < 1:
        raise CapeConfigError(f"{name}: n_edges must be >= 1, got {n_edges}")
    import logging

    castle_logger = logging.getLogger()
    level = castle_logger.level
    make = DAG.scale_free if graph == "scale-free" else DAG.erdos_renyi
    kind = {"mlp": ("nonlinear", "mlp"), "linear": ("linear", "gauss")}[sem]
    with seeded_global_rngs(seed):
        try:
            castle_logger.setLevel(max(level, logging.WARNING))  # gcastle logs INFO on the root
            w = make(n_nodes=n_nodes, n_edges=n_edges, weight_range=(0.5, 2.0), seed=seed)
            sim = IIDSimulation(W=w, n=n_obs, method=kind[0], sem_type=kind[1], noise_scale=noise_scale)
        finally:
            castle_logger.setLevel(level)
    b = (np.asarray(sim.B) != 0).astype(np.float64)
    names = [f"x{i}" for i in range(n_nodes)]
    adata = ad.AnnData(
        X=np.asarray(sim.X, dtype=np.float32),
        obs=pd.DataFrame(index=[f"s{i}" for i in range(n_obs)]),
        var=pd.DataFrame(index=names),
    )
    adata.varp[TRUE_DAG_KEY] = sp.csr_matrix(b)
    adata.uns["cape_dataset"] = name
    adata.uns["cape_dataset_params"] = {
        "n_nodes": n_nodes,
        "n_edges": n_edges,
        "n_obs": n_obs,
        "seed": seed,
        "noise_scale": noise_scale,
        "n_true_edges": int(b.sum()),
        **({} if name == "synthetic-mlp" else {"graph": graph, "sem": sem}),
    }
    return adata


def synthetic_mlp(
    n_nodes: int = 20,
    n_edges: int | None = None,
    n_obs: int = 2000,
    seed: int = 0,
    noise_scale: float = 1.0,
) -> ad.AnnData:
    """Nonlinear MLP SEM over a scale-free DAG: :func:`synthetic_sem` with its defaults.

    Same parameters, return value and errors as :func:`synthetic_sem` with
    ``graph="scale-free", sem="mlp"`` (gcastle ``IIDSimulation``).
    """
    return synthetic_sem(n_nodes, n_edges, n_obs, seed, noise_scale, graph="scale-free", sem="mlp")


def _local_copy(name: str, env: str, path: str | os.PathLike[str] | None, source: str) -> Path:
    p = path if path is not None else os.environ.get(env)
    if p is None:
        raise CapeFileError(
            f"{name}: not bundled and no local copy given; download it from {source} and pass "
            f"path=... (CLI: --set ingest.path=FILE) or set {env}=FILE"
        )
    p = Path(p).expanduser()
    if not p.is_file():
        raise CapeFileError(f"{name}: local copy {p} does not exist (from path= or ${env})")
    return p


def _read_local_h5ad(name: str, env: str, path: str | os.PathLike[str] | None, source: str) -> ad.AnnData:
    from cape_pipeline.io import read

    adata = read(_local_copy(name, env, path, source))
    adata.uns["cape_dataset"] = name
    return adata


def norman(path: str | os.PathLike[str] | None = None) -> ad.AnnData:
    """Norman et al. (2019) Perturb-seq as processed by GEARS, from a local ``.h5ad`` copy.

    Raises
    ------
    CapeFileError
        If neither ``path`` nor ``$CAPE_NORMAN_H5AD`` points to an existing file.
    """
    return _read_local_h5ad(
        "norman", "CAPE_NORMAN_H5AD", path, "https://dataverse.harvard.edu/api/access/datafile/6154020"
    )


def hpancreas(path: str | os.PathLike[str] | None = None) -> ad.AnnData:
    """Human pancreas annotation benchmark (TOSICA / scGPT) from a local ``.h5ad`` copy.

    Raises
    ------
    CapeFileError
        If neither ``path`` nor ``$CAPE_HPANCREAS_H5AD`` points to an existing file.
    """
    return _read_local_h5ad(
        "hpancreas", "CAPE_HPANCREAS_H5AD", path, "https://github.com/JackieHanLab/TOSICA"
    )


def cellxgene(path: str | os.PathLike[str] | None = None) -> ad.AnnData:
    """A CELLxGENE Discover dataset from a local ``.h5ad`` download.

    Raises
    ------
    CapeFileError
        If neither ``path`` nor ``$CAPE_CELLXGENE_H5AD`` points to an existing file.
    """
    return _read_local_h5ad(
        "cellxgene", "CAPE_CELLXGENE_H5AD", path, "https://cellxgene.cziscience.com/datasets"
    )


def altumage(path: str | os.PathLike[str] | None = None, age_column: str = "age") -> ad.AnnData:
    """AltumAge methylation β values with donor age from a local ``.parquet`` copy.

    Rows are samples, CpG columns hold β ∈ [0, 1] (missing allowed), ``age_column`` the age in
    years (moved to ``obs``).

    Raises
    ------
    CapeFileError
        If neither ``path`` nor ``$CAPE_ALTUMAGE_PARQUET`` points to an existing file.
    """
    from cape_pipeline.io import read

    p = _local_copy("altumage", "CAPE_ALTUMAGE_PARQUET", path, "https://github.com/rsinghlab/AltumAge")
    adata = read(p, label_columns=[age_column], modality="methylation")
    adata.uns["cape_dataset"] = "altumage"
    return adata
