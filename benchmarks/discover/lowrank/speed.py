"""Step I speed: CAPE vs gcastle DAG_GNN at M = 50, N = 2000, default settings each.

Both sides come from the recorded cases (``../cases.jsonl``: ``synth50__cape-spectral`` written by
``accuracy.py`` and ``synth50__dag-gnn`` written by ``run_baselines.py``; the
latter runs in the background with a wall-clock limit). Prints the wall-time ratio and SHDs,
or says which side was not run.

Usage: python benchmarks/discover/lowrank/speed.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402


def main() -> None:
    print("command:", common.command())
    print("machine:", common.machine())
    cape = common.read_cache("synth50", "cape-spectral")
    gnn = common.read_cache("synth50", "dag-gnn")
    if not cape or cape.get("status") != "ok":
        print("cape synth50: not run")
        return
    print(f"cape: {cape['seconds']:.1f} s, SHD {cape['metrics']['shd']}, F1 {cape['metrics']['f1']:.3f} "
          f"(load {cape['load_average'][0]:.1f}; params {cape.get('params', {}).get('effective_epochs', '?')} epochs)")
    if not gnn or gnn.get("status") != "ok":
        lim = (gnn or {}).get("limit_seconds")
        print(f"dag-gnn: {gnn['status'] if gnn else 'not run (time)'}" + (f" (> {lim:.0f} s)" if lim else ""))
        if lim:
            print(f"ratio lower bound: > {lim / cape['seconds']:.1f}x")
        return
    print(f"dag-gnn: {gnn['seconds']:.1f} s, SHD {gnn['metrics']['shd']}, F1 {gnn['metrics']['f1']:.3f} "
          f"(load {gnn['load_average'][0]:.1f})")
    better = "equal or better" if cape["metrics"]["shd"] <= gnn["metrics"]["shd"] else "WORSE"
    print(f"ratio: {gnn['seconds'] / cape['seconds']:.1f}x, cape SHD {better} than dag-gnn's")


if __name__ == "__main__":
    main()
