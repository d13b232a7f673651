"""Reproductions of the paper's figures with this package's code (``cape reproduce …``).

:func:`reproduce_fig3` re-runs paper 000, Sec. 5.1, Fig. 3: a 10-node Barabási–Albert DAG, data
from gcastle's ``IIDSimulation`` (MLP SEM, Gaussian noise, N = 5000), the DAG learned by Step I
(:func:`~cape_pipeline.causal.discover`) and embedded by Step II
(:func:`~cape_pipeline.hyperbolic.embed`, d = 3) in the Poincaré ball.
"""

from __future__ import annotations

import logging
import math
import os
import shlex
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from cape_pipeline._utils import atomic_path, write_json_atomic
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeConfigError, CapeFileError
from cape_pipeline.pl._utils import maybe_save

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


def _new_figure(figsize: tuple[float, float]) -> Figure:
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _circle_layout(m: int) -> dict[int, np.ndarray]:
    """Nodes 0..M−1 clockwise on a circle from the top: no edge (a chord) passes through a node."""
    angle = np.pi / 2 - 2 * np.pi * np.arange(m) / m
    return {j: np.array([np.cos(a), np.sin(a)]) for j, a in enumerate(angle)}


def _draw_dag(
    ax: Axes,
    pos: dict[int, np.ndarray],
    edges: list[tuple[int, int]],
    colors: list[str],
    *,
    styles: list[str] | None = None,
) -> None:
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(pos)
    g.add_edges_from(edges)
    nx.draw_networkx_nodes(g, pos, node_color="#cfe3f5", edgecolors="0.2", node_size=420, ax=ax)
    nx.draw_networkx_labels(g, pos, font_size=9, ax=ax)
    if edges:
        nx.draw_networkx_edges(
            g,
            pos,
            edgelist=edges,
            edge_color=colors,
            style=styles or "solid",
            width=1.6,
            arrowsize=14,
            node_size=420,
            ax=ax,
        )
    ax.set_aspect("equal")
    ax.set_axis_off()


def _plot_dags(b_true: np.ndarray, w_learned: np.ndarray, path: Path) -> None:
    """Fig. 3a: true and learned DAG on the same layout; learned edges colored by status."""
    pos = _circle_layout(b_true.shape[0])
    fig = _new_figure((11, 5.5))
    ax_t, ax_l = fig.subplots(1, 2)
    true_edges = [(int(i), int(j)) for i, j in zip(*np.nonzero(b_true), strict=True)]
    _draw_dag(ax_t, pos, true_edges, ["0.15"] * len(true_edges))
    ax_t.set_title(f"(a) true DAG ({len(true_edges)} edges)", fontsize=10)

    b_learned = w_learned != 0
    edges: list[tuple[int, int]] = []
    colors: list[str] = []
    styles: list[str] = []
    counts = {"correct": 0, "reversed": 0, "extra": 0, "missing": 0}
    for i, j in zip(*np.nonzero(b_learned), strict=True):
        status = "correct" if b_true[i, j] else "reversed" if b_true[j, i] else "extra"
        counts[status] += 1
        edges.append((int(i), int(j)))
        colors.append({"correct": "tab:green", "reversed": "tab:orange", "extra": "tab:red"}[status])
        styles.append("solid")
    for i, j in true_edges:
        if not b_learned[i, j] and not b_learned[j, i]:
            counts["missing"] += 1
            edges.append((i, j))
            colors.append("0.75")
            styles.append("dashed")
    _draw_dag(ax_l, pos, edges, colors, styles=styles)
    ax_l.set_title(f"(a) learned DAG, CAPE Step I ({int(b_learned.sum())} edges)", fontsize=10)
    handles = [
        Line2D([], [], color="tab:green", lw=2, label=f"correct ({counts['correct']})"),
        Line2D([], [], color="tab:orange", lw=2, label=f"reversed ({counts['reversed']})"),
        Line2D([], [], color="tab:red", lw=2, label=f"not in truth ({counts['extra']})"),
        Line2D([], [], color="0.75", lw=2, ls="--", label=f"missed ({counts['missing']})"),
    ]
    ax_l.legend(handles=handles, loc="lower right", fontsize=8, frameon=False)
    maybe_save(fig, path)


def _plot_adjacency(
    b_true: np.ndarray, w_learned: np.ndarray, metrics: dict[str, Any], threshold: float, path: Path
) -> None:
    """Fig. 3b: true 0/1 adjacency and learned weighted adjacency, metrics in the titles."""
    m = b_true.shape[0]
    fig = _new_figure((11, 4.8))
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
    maybe_save(fig, path)


def _coincident_groups(e: np.ndarray, tol: float = 0.05) -> list[list[int]]:
    """Indices grouped greedily by Euclidean distance < ``tol`` to the group's first point."""
    left = list(range(len(e)))
    groups = []
    while left:
        i = left[0]
        group = [j for j in left if np.linalg.norm(e[j] - e[i]) < tol]
        groups.append(group)
        left = [j for j in left if j not in group]
    return groups


def _plot_poincare(
    e: np.ndarray, pagerank: np.ndarray, w_learned: np.ndarray, rho: float | None, path: Path
) -> None:
    """Fig. 3c: the points in the unit ball of R³, colored by PageRank, learned edges as lines."""
    fig = _new_figure((7.5, 6.5))
    ax: Any = fig.add_subplot(1, 1, 1, projection="3d")
    u, v = np.mgrid[0 : 2 * np.pi : 25j, 0 : np.pi : 13j]
    ax.plot_wireframe(
        np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.55", alpha=0.15, lw=0.6
    )
    for i, j in zip(*np.nonzero(w_learned), strict=True):
        ax.plot(*(np.stack([e[i], e[j]]).T), color="0.35", lw=1.0, alpha=0.8)
    sc = ax.scatter(e[:, 0], e[:, 1], e[:, 2], c=pagerank, cmap="viridis", s=70, depthshade=False,
                    edgecolors="k", linewidths=0.5)
    for group in _coincident_groups(e):  # one label for points that (nearly) coincide
        p = e[group[0]]
        ax.text(p[0], p[1], p[2], "  " + ",".join(map(str, group)), fontsize=9)
    fig.colorbar(sc, ax=ax, label="PageRank π (Eq. 18)", shrink=0.6, pad=0.1)
    for setter in (ax.set_xlim, ax.set_ylim, ax.set_zlim):
        setter(-1, 1)
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_zlabel("z")
    rho_txt = "n/a" if rho is None else f"{rho:.3f}"
    ax.set_title(
        f"(c) Poincaré ball P³ of the learned DAG; Spearman(‖e‖, −π) = {rho_txt}", fontsize=10
    )
    maybe_save(fig, path)


def _output_dir(out: Any) -> Path:
    """``out`` as a Path; a CapeFileError when it exists and is not a directory."""
    if (out := Path(out)).exists() and not out.is_dir():
        raise CapeFileError(f"{out}: exists and is not a directory (expected an output directory)")
    return out


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(float(x)) else None


def _jsonable(obj: Any) -> Any:
    """A strict-JSON copy: numpy scalars → Python numbers, NaN/inf → None, unknown types → str."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return _finite_or_none(obj)
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return str(obj)


def _command(out: Path, seed: int, n_samples: int, epochs: int | None) -> str:
    args = ["cape", "reproduce", "fig3", "--out", str(out), "--seed", str(seed)]
    args += ["--n-samples", str(n_samples)]
    if epochs is not None:
        args += ["--epochs", str(epochs)]
    return shlex.join(args)


def _machine() -> dict[str, Any]:
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "cuda": torch.cuda.is_available(),
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    from cape_pipeline._version import __version__

    out = {"cape_pipeline": __version__}
    for pkg in ("torch", "geoopt", "gcastle", "networkx", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:  # pragma: no cover - all are dependencies
            out[pkg] = "not installed"
    return out


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
    out = _output_dir(out)
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
    learned = discover(adata, seed=seed, epochs=epochs, progress=progress)
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
    rho, p_value = _finite_or_none(res.statistic), _finite_or_none(res.pvalue)

    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    files = {role: out / name for role, name in FIG3_FILES.items()}
    b_true = true.adjacency.toarray() != 0
    w_learned = learned.adjacency.toarray()
    _plot_dags(b_true, w_learned, files["dags"])
    _plot_adjacency(b_true, w_learned, metrics, float(learned.params["threshold"]), files["adjacency"])
    _plot_poincare(e, pagerank, w_learned, rho, files["poincare"])
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
        "machine": _machine(),
        "versions": _versions(),
        "files": {role: str(p) for role, p in files.items()},
    }
    record = _jsonable(record)
    write_json_atomic(files["summary"], record)
    return record
