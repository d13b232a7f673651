"""Step I's default on one file with two versions of the package, side by side on the same load.

Each ``--tree`` is a checkout of the repository (e.g. ``git worktree add /tmp/old fb43054``); the
script runs ``cape_pipeline.pp.preprocess`` and ``cape_pipeline.causal.discover`` (every default,
CPU) on ``FILE`` in a fresh process per tree, one after another, and appends a row per tree to
``step1_versions.jsonl``: the tree's commit, Step I's seconds and its stages' (sums over the
splits), the edges, and the load.

Usage (from the repository root)::

    git worktree add /tmp/old fb43054
    python benchmarks/scale/step1_versions.py FILE.h5ad --trees /tmp/old .
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _record import append, provenance  # noqa: E402

_CHILD = """
import collections, json, sys, time, warnings
warnings.simplefilter("ignore")
import anndata as ad
import cape_pipeline as cp
from cape_pipeline.causal import discover
a = ad.read_h5ad(sys.argv[1])
cp.pp.preprocess(a, min_genes=10)
t = time.perf_counter()
g = discover(a, device="cpu")
sec = time.perf_counter() - t
st = collections.Counter()
for h in g.history:
    st[h["stage"]] += h.get("seconds", 0.0)
print(json.dumps({"package": cp.__file__, "shape": list(a.shape), "discover_s": round(sec, 1), "n_edges": int(g.adjacency.nnz),
                  "stage_seconds": {k: round(v, 1) for k, v in st.items()}}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--trees", nargs="+", type=Path, required=True)
    a = ap.parse_args()
    for tree in a.trees:
        tree = tree.resolve()
        load = os.getloadavg()
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=tree).stdout.strip()
        # run in the tree: ``python -c`` puts the working directory first on sys.path
        out = subprocess.run([sys.executable, "-c", _CHILD, str(a.file.resolve())], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree, check=True).stdout
        rec = {"file": a.file.name, "tree_commit": commit, **json.loads(out.strip().splitlines()[-1]),
               **provenance(load)}
        append(HERE / "step1_versions.jsonl", rec)
        print(rec, flush=True)


if __name__ == "__main__":
    main()
