"""Fig. 3 of paper 000 redrawn with this package's code (``cape reproduce fig3``).

:func:`reproduce_fig3` re-runs paper 000, Sec. 5.1, Fig. 3: a 10-node Barabási–Albert DAG, data
from gcastle's ``IIDSimulation`` (MLP SEM, Gaussian noise, N = 5000), the DAG learned by Step I
(:func:`~cape_pipeline.causal.discover`) and embedded by Step II
(:func:`~cape_pipeline.hyperbolic.embed`, d = 3) in the Poincaré ball.
"""

from __future__ import annotations

import logging
import os
import shlex
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cape_pipeline._utils import atomic_path, write_json_atomic
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.paper.common import (
    finite_or_none,
    jsonable,
    machine_info,
    new_figure,
    output_dir,
    save_png,
    versions,
)
from cape_pipeline.pl import plot_dag, plot_poincare

__all__ = ["FIG3_FILES", "FIG3_N_EDGES", "FIG3_N_NODES", "reproduce_fig3"]

logger = logging.getLogger(__name__)

#: Fig. 3 of paper 000: ten features
FIG3_N_NODES = 10
#: edge target of ``castle.datasets.DAG.scale_free`` (Barabási–Albert with m = round(20 / 10) = 2,
#: 16 edges at M = 10); the paper does not state its edge count, this is the package's
#: ``synthetic_mlp`` default of 2M
FIG3_N_EDGES = 2 * FIG3_N_NODES
#: files written by :func:`reproduce_fig3`, by role
FIG3_FILES = {
    "dags": "fig3a_dags.png",
    "adjacency": "fig3b_adjacency.png",
    "poincare": "fig3c_poincare.png",
    "coordinates": "fig3_coordinates.csv",
    "summary": "fig3.json",
    "true_dag": "true_dag.parquet",
    "learned_dag": "learned_dag.parquet",
}


def _by_index(graph: CausalGraph) -> CausalGraph:
    """``graph`` with feature ``j`` named ``"j"``: the node labels of Fig. 3 (the ``ID`` of its table)."""
    return replace(graph, feature_names=np.arange(graph.n_features).astype(str))


def _plot_dags(true: CausalGraph, learned: CausalGraph, path: Path) -> None:
    """Fig. 3a: true and learned DAG on the same circle; learned edges colored by status against the truth."""
    fig = new_figure((11, 5.5))
    ax_t, ax_l = fig.subplots(1, 2)
    true, learned = _by_index(true), _by_index(learned)
    plot_dag(true, layout="circle", labels=True, ax=ax_t)
    ax_t.set_title(f"(a) true DAG ({true.n_edges} edges)", fontsize=10)
    plot_dag(learned, layout="circle", labels=True, truth=true, ax=ax_l)
    ax_l.set_title(f"(a) learned DAG, CAPE Step I ({learned.n_edges} edges)", fontsize=10)
    save_png(fig, path)


def _plot_adjacency(
    b_true: np.ndarray, w_learned: np.ndarray, metrics: dict[str, Any], threshold: float, path: Path
) -> None:
    """Fig. 3b: true 0/1 adjacency and learned weighted adjacency, metrics in the titles."""
    m = b_true.shape[0]
    fig = new_figure((11, 4.8))
    ax_t, ax_l = fig.subplots(1, 2)
    ax_t.imshow(b_true.astype(float), cmap="Greys", vmin=0, vmax=1)
    ax_t.set_title(f"(b) true adjacency ({int(b_true.sum())} edges)", fontsize=10)
    vmax = float(np.abs(w_learned).max()) or 1.0
    im = ax_l.imshow(w_learned, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    ti, tj = np.nonzero(b_true)
    ax_l.scatter(tj, ti, s=12, c="k", marker="o", label="true edge")
    ax_l.legend(loc="upper right", fontsize=7, frameon=True, bbox_to_anchor=(1.0, -0.08))
    ax_l.set_title(
        f"(b) learned A, |A| > τ = {threshold:g} ({metrics['nnz']} edges)\n"
        f"SHD {metrics['shd']}  ·  F1 {metrics['f1']:.3f}  ·  skeleton F1 {metrics['skeleton_f1']:.3f}",
        fontsize=10,
    )
    fig.colorbar(im, ax=ax_l, label="A[m, n] (edge m → n)", shrink=0.85)
    for ax in (ax_t, ax_l):
        ax.set_xticks(range(m))
        ax.set_yticks(range(m))
        ax.set_xlabel("n (child)")
        ax.set_ylabel("m (parent)")
    save_png(fig, path)


def _plot_poincare(emb: Any, learned: CausalGraph, rho: float | None, path: Path) -> None:
    """Fig. 3c: the points in the unit ball of R³, colored by PageRank, learned edges as lines."""
    fig = new_figure((7.5, 6.5))
    ax = fig.add_subplot(1, 1, 1, projection="3d")
    view = replace(emb, feature_names=np.arange(emb.n_features).astype(str), graph=_by_index(learned))
    plot_poincare(view, projection="3d", annotate=emb.n_features, ax=ax)
    ax.set(xlabel="x", ylabel="y", zlabel="z")  # the columns of fig3_coordinates.csv
    rho_txt = "n/a" if rho is None else f"{rho:.3f}"
    ax.set_title(f"(c) Poincaré ball P³ of the learned DAG; Spearman(‖e‖, −π) = {rho_txt}", fontsize=10)
    save_png(fig, path)


def _command(out: Path, seed: int, n_samples: int, epochs: int | None) -> str:
    args = ["cape", "reproduce", "fig3", "--out", str(out), "--seed", str(seed)]
    args += ["--n-samples", str(n_samples)]
    if epochs is not None:
        args += ["--epochs", str(epochs)]
    return shlex.join(args)


def reproduce_fig3(
    out: str | os.PathLike[str],
    *,
    n_samples: int = 5000,
    seed: int = 0,
    epochs: int | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Reproduce Fig. 3 of paper 000 (Sec. 5.1): learn a 10-node DAG and embed it in P³.

    Steps: (1) a Barabási–Albert DAG over ``M = 10`` nodes
    (``castle.datasets.DAG.scale_free``, edge target :data:`FIG3_N_EDGES`) and ``N = n_samples``
    draws of gcastle's ``IIDSimulation`` MLP SEM with unit Gaussian noise
    (:func:`cape_pipeline.datasets.synthetic_mlp`); (2) the DAG learned by Step I,
    :func:`~cape_pipeline.causal.discover` with the library defaults (τ = 0.2); (3) the learned
    DAG embedded by Step II, :func:`~cape_pipeline.hyperbolic.embed` with ``dim=3`` and its
    other defaults; Poincaré coordinates ``e = p̃ / (p⁰ + 1)`` (Eq. A.22). The check of the
    paper's claim "roots near the origin, leaves near the boundary" is the Spearman correlation
    between ``‖e_j‖`` and ``−π_j`` (π: PageRank, Eq. 18), reported as found.

    The paper's own run used its own seed; numbers here differ from its table.

    Parameters
    ----------
    out
        Output directory (created with its parents). Files of the same names are replaced,
        each written atomically.
    n_samples
        N, number of simulated observations (paper: 5000).
    seed
        Seed of the graph, the SEM (numpy's global RNG is restored afterwards), Step I and
        Step II.
    epochs
        Step I epoch budget; ``None`` (default) keeps the library's rule (at least 5000 AdamW
        steps, see :func:`~cape_pipeline.causal.api.resolve_epochs`). Tests pass a small value.
    progress
        Show rich progress bars for Steps I and II.

    Returns
    -------
    dict
        The content of ``fig3.json``: ``shd`` (int), ``f1``, ``skeleton_f1``, ``metrics`` (all
        of :func:`~cape_pipeline.causal.dag_metrics`), ``spearman_norm_vs_neg_pagerank``
        (``rho``, ``p_value`` over all 10 nodes; None when undefined, e.g. constant PageRank),
        ``spearman_norm_vs_neg_pagerank_connected`` (the same over the ``n_nodes`` nodes with at
        least one learned edge; None below 3 nodes), ``max_norm``, ``seed``,
        ``n_samples``, ``n_nodes``, ``n_true_edges``, ``n_learned_edges``,
        ``n_cycle_edges_dropped``, ``runtime_s`` (``simulate``, ``discover``, ``embed``,
        ``outputs``, ``total``; seconds), ``command`` (the equivalent ``cape`` command line),
        ``discover_params``, ``embed_params``, ``machine``, ``versions``, plus ``files``
        (role → path of every file written).

        Files in ``out``: ``fig3a_dags.png`` (true vs learned DAG, same layout),
        ``fig3b_adjacency.png`` (true 0/1 and learned weighted ``(10, 10)`` adjacency, SHD / F1
        / skeleton F1 in the title), ``fig3c_poincare.png`` (3-D unit ball, points colored by
        PageRank, learned edges as lines), ``fig3_coordinates.csv`` (10 rows: ``ID``, ``x``,
        ``y``, ``z``, ``norm`` = ‖e‖ < 1, ``pagerank``; the table of Fig. 3), ``fig3.json``, and
        ``true_dag.parquet`` / ``learned_dag.parquet`` (edge lists,
        :meth:`~cape_pipeline.causal.CausalGraph.read_parquet`).

    Raises
    ------
    CapeConfigError
        ``n_samples`` < 2, ``seed`` outside ``[0, 2³² − 1]`` or a bad ``epochs`` (named).
    CapeFileError
        ``out`` exists and is not a directory.

    Examples
    --------
    >>> import tempfile
    >>> rec = reproduce_fig3(tempfile.mkdtemp(), n_samples=300, epochs=5)  # doctest: +SKIP
    >>> rec["n_nodes"], sorted(rec["files"])[:2]  # doctest: +SKIP
    (10, ['adjacency', 'coordinates'])
    """
    from scipy.stats import ConstantInputWarning, spearmanr

    from cape_pipeline.causal import dag_metrics, discover
    from cape_pipeline.datasets import TRUE_DAG_KEY, synthetic_mlp
    from cape_pipeline.hyperbolic import embed

    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 2:
        raise CapeConfigError(f"n_samples: expected an integer >= 2, got {n_samples!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
        raise CapeConfigError(f"seed: expected an integer in [0, 2**32 - 1], got {seed!r}")
    out = output_dir(out)
    n_samples, seed = int(n_samples), int(seed)
    runtime: dict[str, float] = {}
    t_start = time.perf_counter()

    t0 = time.perf_counter()
    adata = synthetic_mlp(n_nodes=FIG3_N_NODES, n_edges=FIG3_N_EDGES, n_obs=n_samples, seed=seed)
    names = np.asarray(adata.var_names, dtype=object)
    true = CausalGraph.from_adjacency(
        adata.varp[TRUE_DAG_KEY], names, params={"source": "gcastle DAG.scale_free", "seed": seed}
    )
    runtime["simulate"] = time.perf_counter() - t0
    logger.info("simulated N=%d, M=%d, %d true edges", n_samples, FIG3_N_NODES, true.n_edges)

    t0 = time.perf_counter()
    learned = discover(adata, seed=seed, low_rank={"epochs": epochs}, progress=progress)  # auto: the low rank here
    runtime["discover"] = time.perf_counter() - t0
    metrics = dag_metrics(learned, true)
    logger.info("Step I: %d edges, SHD %d, F1 %.3f", learned.n_edges, metrics["shd"], metrics["f1"])

    t0 = time.perf_counter()
    emb = embed(learned, dim=3, seed=seed, progress=progress)
    runtime["embed"] = time.perf_counter() - t0
    e = np.asarray(emb.poincare, dtype=np.float64)
    pagerank = np.asarray(emb.pagerank, dtype=np.float64)
    if list(np.asarray(emb.feature_names).astype(str)) != list(names.astype(str)):
        raise RuntimeError("embed returned features in a different order than the learned graph")
    norms = np.linalg.norm(e, axis=1)
    b_learned = learned.binary()
    # nodes with at least one learned edge (isolated nodes carry no causal information)
    connected = (np.asarray(b_learned.sum(axis=0)).ravel() + np.asarray(b_learned.sum(axis=1)).ravel()) > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstantInputWarning)
        res = spearmanr(norms, -pagerank)
        res_c = spearmanr(norms[connected], -pagerank[connected]) if connected.sum() >= 3 else None
    rho, p_value = finite_or_none(res.statistic), finite_or_none(res.pvalue)

    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    files = {role: out / name for role, name in FIG3_FILES.items()}
    b_true = true.adjacency.toarray() != 0
    w_learned = learned.adjacency.toarray()
    _plot_dags(true, learned, files["dags"])
    _plot_adjacency(b_true, w_learned, metrics, float(learned.params["threshold"]), files["adjacency"])
    _plot_poincare(emb, learned, rho, files["poincare"])
    table = pd.DataFrame(
        {
            "ID": np.arange(learned.n_features),  # node j is feature x{j}
            "x": e[:, 0],
            "y": e[:, 1],
            "z": e[:, 2],
            "norm": norms,
            "pagerank": pagerank,
        }
    )
    with atomic_path(files["coordinates"]) as tmp:
        table.to_csv(tmp, index=False)
    true.write_parquet(files["true_dag"])
    learned.write_parquet(files["learned_dag"])
    runtime["outputs"] = time.perf_counter() - t0
    runtime["total"] = time.perf_counter() - t_start

    record: dict[str, Any] = {
        "figure": "paper 000, Sec. 5.1, Fig. 3",
        "command": _command(out, seed, n_samples, epochs),
        "seed": seed,
        "n_samples": n_samples,
        "n_nodes": FIG3_N_NODES,
        "n_edges_target": FIG3_N_EDGES,
        "n_true_edges": true.n_edges,
        "n_learned_edges": learned.n_edges,
        "n_cycle_edges_dropped": learned.n_cycle_edges_dropped,
        "shd": int(metrics["shd"]),
        "f1": float(metrics["f1"]),
        "skeleton_f1": float(metrics["skeleton_f1"]),
        "metrics": metrics,
        "spearman_norm_vs_neg_pagerank": {"rho": rho, "p_value": p_value},
        "spearman_norm_vs_neg_pagerank_connected": {
            "n_nodes": int(connected.sum()),
            "rho": None if res_c is None else res_c.statistic,
            "p_value": None if res_c is None else res_c.pvalue,
        },
        "max_norm": float(norms.max()),
        "runtime_s": {k: round(v, 3) for k, v in runtime.items()},
        "discover_params": learned.params,
        "embed_params": emb.params,
        "embed_final_loss": emb.loss_history[-1] if len(emb.loss_history) else None,
        "machine": machine_info(),
        "versions": versions(),
        "files": {role: str(p) for role, p in files.items()},
    }
    record = jsonable(record)
    write_json_atomic(files["summary"], record)
    return record
