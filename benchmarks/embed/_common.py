"""Shared helpers for the Step II benchmarks: graphs, metrics, machine description."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import pandas as pd
import torch

from cape_pipeline.causal.graph import CausalGraph

ROOT = Path(__file__).resolve().parents[2]


def scale_free(m: int, seed: int) -> CausalGraph:
    """True DAG of a gcastle scale-free simulation, M nodes, 2M edges, |w| in [0.5, 2]."""
    from castle.datasets import DAG

    w = DAG.scale_free(n_nodes=m, n_edges=2 * m, weight_range=(0.5, 2.0), seed=seed)
    return CausalGraph.from_adjacency(w, [f"g{i}" for i in range(m)], params={"source": f"gcastle scale_free M={m} seed={seed}"})


def sachs() -> CausalGraph:
    df = pd.read_csv(ROOT / "cape_pipeline/data/sachs/sachs_consensus_graph.csv")
    return CausalGraph.from_edges(list(zip(df["Cause"], df["Effect"], strict=True)), params={"source": "Sachs consensus"})


def tree(branching: int = 3, depth: int = 4) -> CausalGraph:
    """Balanced tree, edges parent → child (121 nodes for 3, 4; 1093 for 3, 6)."""
    edges, frontier, nid = [], [0], 1
    for _ in range(depth):
        nxt = []
        for u in frontier:
            for _ in range(branching):
                edges.append((f"n{u}", f"n{nid}"))
                nxt.append(nid)
                nid += 1
        frontier = nxt
    return CausalGraph.from_edges(edges, params={"source": f"balanced tree b={branching} depth={depth}"})


def synthetic_truth(n_nodes: int = 20) -> CausalGraph:
    """True DAG of the bundled `synthetic-mlp` dataset (gcastle scale-free, seed of the catalog)."""
    from cape_pipeline.datasets import synthetic_mlp

    adata = synthetic_mlp(n_nodes=n_nodes)
    return CausalGraph.from_adjacency(adata.varp["true_dag"],
                                      list(adata.var_names), params={"source": f"synthetic-mlp true DAG M={n_nodes}"})


GRAPHS = {
    "tree121": lambda: tree(3, 4),
    "tree1093": lambda: tree(3, 6),
    "sachs": lambda: sachs(),
    "synthetic20": lambda: synthetic_truth(20),
    "sf100": lambda: scale_free(100, 1),
    "sf500": lambda: scale_free(500, 1),
    "sf2000": lambda: scale_free(2000, 1),
    "sf5000": lambda: scale_free(5000, 1),
}


def machine() -> str:
    load = os.getloadavg()
    return (
        f"{platform.node()} | {platform.processor() or platform.machine()} | {os.cpu_count()} CPU cores | "
        f"Python {sys.version.split()[0]} | torch {torch.__version__} (threads={torch.get_num_threads()}) | "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
