"""Step I seconds per epoch on 1 process vs 2 data-parallel processes (torchrun, gloo), one
thread each, on the scaling benchmark's linear SEM.

Usage (from the repository root):
    OMP_NUM_THREADS=1 python benchmarks/scaling/ddp_step1.py N M [BATCH]
    OMP_NUM_THREADS=1 torchrun --nproc_per_node=2 benchmarks/scaling/ddp_step1.py N M [BATCH]
Prints one JSON line (rank 0): the world size, the median seconds per epoch over 2 outer steps of
2 epochs each, and the load average.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "discover"))
import common  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from cape_pipeline.causal.api import discover  # noqa: E402
from cape_pipeline.distributed import init_from_env, world  # noqa: E402

n, m = int(sys.argv[1]), int(sys.argv[2])
bs = int(sys.argv[3]) if len(sys.argv) > 3 else 128
torch.set_num_threads(1)
init_from_env("cpu")
x = common.linear_sem(m, n, seed=0)
g = discover(x, algorithm="low-rank", low_rank={"epochs": 4, "max_outer": 2, "batch_size": bs}, seed=0, device="cpu")
rank, size = world()
if rank == 0:
    print(json.dumps({"world_size": size, "N": n, "M": m, "batch_size": bs, "seconds_per_epoch": float(np.median([h["seconds"] for h in g.history])) / 2,
                      "load_average": os.getloadavg()[0]}))
