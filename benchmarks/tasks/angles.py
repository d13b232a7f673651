"""Build CAPE angles for the task benchmark via the project's Steps I–III.

Usage: python benchmarks/tasks/angles.py OUT_DIR D DATASET GRAPH [DISCOVER_EPOCHS|default] [GEOMETRIES] [ENCODINGS]

GRAPH is ``discover`` (Step I, ``cape_pipeline.causal.api.discover``), ``true`` (the simulator's
known DAG; simulated data only), ``correlation`` (the w/o-CSL ablation graph), ``discover005``
(Step I with ``threshold=0.05``, defaults otherwise; the pbmc68k_reduced workflow's setting) or
``interventional`` (perturbation data: Step I, regression algorithm, on the AnnData, so it reads ``obs["condition"]`` as
interventions, without the cells of every condition that ``run.py``'s perturbation split — GEARS's,
:data:`INTERVENTIONAL_SEEDS` — holds out; what ``cape run`` does, ``pipeline/stages/discover.py``). The graph is
then embedded (``cape_pipeline.hyperbolic.embed``, d = D/2) and encoded
(``cape_pipeline.encodings.encode``, φ = (π/4)·e). Writes
OUT_DIR/angles_<DATASET>_<GRAPH>_d<D/2>.npz with ``angles`` (M, D/2), ``var_names``, the Poincaré
points ``poincare`` (M, D/2) and ``scale`` (RiemannFormer's inputs) and the graph's edges
``edge_src``/``edge_dst``/``edge_weight`` (ape-tree's spanning forest).
GEOMETRIES (comma-separated, default ``hyperbolic``) embeds the same graph once per geometry;
``euclidean`` (the w/o-hyperbolic ablation: same loss, Adam) writes ``angles_<DATASET>_<GRAPH>-euclidean_d<D/2>.npz``;
``hyperbolic-radam`` (hyperbolic, Riemannian Adam instead of the default RSGD, same lr) writes ``..._<GRAPH>-radam_d<D/2>.npz``.
ENCODINGS (comma-separated, default ``paper``) encodes each embedding once per angle variant
(:data:`ENCODINGS`): ``scale4`` (``encode.scale = π``) and ``geometric``
(``encode.frequencies = geometric``, range 100) append ``-scale4`` / ``-geometric`` to the tag.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from _data import BENCH_DATA

from cape_pipeline.causal.api import discover
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.encodings import encode
from cape_pipeline.hyperbolic import embed

ENCODINGS = {"paper": {}, "scale4": {"scale": math.pi}, "geometric": {"frequencies": "geometric", "frequency_range": 100.0}}
"""Angle variants (``encode`` options) as in ``benchmarks/cape_value/variants.py``."""
INTERVENTIONAL_SEEDS = [0, 1, 2]
"""The task seeds whose test conditions the ``interventional`` graph never sees (their union)."""
EMBED_EPOCHS = "to the plateau (embed() defaults since e77b46c, 2026-11-23; before it 300 RSGD epochs)"



def _epochs(epochs: int | None, **options) -> dict:
    """Step I's ``epochs`` (and ``options``) for whichever of the low-rank and learned algorithms
    ``algorithm="auto"`` picks (None: each algorithm's default)."""
    own = {} if epochs is None else {"epochs": epochs}
    return {"low_rank": {**own, **options}, "learned": {**own, **options}}

def main() -> None:
    out, d_model, name, graph = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    # Step I epochs: "default" (None: the paper's 100 raised to >= 5000 AdamW steps) or a number
    epochs = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] != "default" else None
    geometries = sys.argv[6].split(",") if len(sys.argv) > 6 else ["hyperbolic"]
    encodings = sys.argv[7].split(",") if len(sys.argv) > 7 else ["paper"]
    out.mkdir(parents=True, exist_ok=True)
    d = d_model // 2
    adata = BENCH_DATA[name]()
    x = adata.X.toarray() if sp.issparse(adata.X) else np.asarray(adata.X)
    if np.isnan(x).any():  # methylation: mean-impute for structure learning only
        x = np.where(np.isnan(x), np.nanmean(x, axis=0), x)
    names = list(adata.var_names)
    t0 = time.perf_counter()
    if graph == "true":
        g = CausalGraph(np.asarray(names, dtype=object), sp.csr_array(adata.varp["true_dag"].astype(np.float64)))
    elif graph == "correlation":
        g = discover(x, feature_names=names, method="correlation", seed=0)
    elif graph == "interventional":
        from cape_pipeline.pipeline.stages.discover import held_out_conditions

        split = {"label_key": "condition", "seeds": INTERVENTIONAL_SEEDS, "split": "gears", "test_fraction": 0.3,
                 "unseen_gene_fraction": 0.15, "combo_seen2_test_fraction": 0.15}  # run.py's TASK_CONFIG, task defaults
        held, _, unseen = held_out_conditions(adata, split)
        seen = ~unseen
        print(f"{name} graph=interventional: Step I leaves out {len(held)} conditions ({(~seen).sum()} cells) "
              f"held out for seeds {INTERVENTIONAL_SEEDS}", flush=True)
        g = discover(adata[seen].copy(), algorithm="regression", seed=0)  # the algorithm that reads the labels
        print(f"  params: algorithm {g.params.get('algorithm')}, order rounds {g.params.get('order_rounds_used')}, "
              f"perturbed features {g.params.get('n_perturbed_features')}", flush=True)
    elif graph == "discover005":
        g = discover(x, feature_names=names, seed=0, **_epochs(epochs, threshold=0.05))
    else:
        g = discover(x, feature_names=names, seed=0, **_epochs(epochs))
    graph_s = time.perf_counter() - t0
    coo = g.adjacency.tocoo()
    for geometry in geometries:
        t1 = time.perf_counter()
        geo, _, opt = geometry.partition("-")
        e = embed(g, dim=d, seed=0, geometry=geo, optimizer=opt or "radam")
        t2 = time.perf_counter()
        base = graph if geometry == "hyperbolic" else f"{graph}-{opt or geo}"
        for variant in encodings:
            enc = encode(e, **ENCODINGS[variant])
            a = np.asarray(enc.angles, dtype=np.float64)
            tag = base if variant == "paper" else f"{base}-{variant}"
            print(f"{name} graph={tag}: M={adata.n_vars} edges={g.n_edges} graph {graph_s:.0f}s embed {t2 - t1:.0f}s "
                  f"(embed epochs {EMBED_EPOCHS}, geometry {geometry}, discover epochs {epochs if graph.startswith('discover') else '-'}, "
                  f"encode {ENCODINGS[variant] or 'paper'}); |phi| max {np.abs(a).max():.3f} mean row norm {np.linalg.norm(a, axis=1).mean():.3f}",
                  flush=True)
            np.savez(out / f"angles_{name}_{tag}_d{d}.npz", angles=a, var_names=np.asarray(names, dtype=str),
                     n_edges=g.n_edges, graph_s=graph_s, embed_s=t2 - t1,
                     poincare=np.asarray(enc.poincare, dtype=np.float64), scale=enc.scale,
                     edge_src=coo.row, edge_dst=coo.col, edge_weight=coo.data)


if __name__ == "__main__":
    main()
