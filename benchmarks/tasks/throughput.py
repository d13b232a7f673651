"""Rotary overhead: training-step throughput (cells/s) of the scGPT-style backbone with pe=cape
vs pe=none on pbmc68k_reduced, at several widths D (angles: d = D/2 columns, random in the
range of real CAPE angles, since the cost does not depend on their values).

Run from the repository root:
    OMP_NUM_THREADS=1 python benchmarks/tasks/throughput.py > benchmarks/tasks/THROUGHPUT.md
"""

from __future__ import annotations

import os
import platform
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from _data import BENCH_DATA  # noqa: E402

from cape_pipeline.models import build_backbone  # noqa: E402


def step_throughput(adata, d_model: int, reps: int = 30, batch: int = 32, tokens: int = 128) -> dict[str, float]:
    """Median cells/s of one training step (tokenize, forward, backward, AdamW), cape and none
    interleaved so both see the same machine load."""
    x = adata.X.toarray() if hasattr(adata.X, "toarray") else np.asarray(adata.X)
    xb = torch.as_tensor(x[:batch], dtype=torch.float32)
    angles = np.random.default_rng(0).uniform(-0.25, 0.25, size=(adata.n_vars, d_model // 2))
    model_cfg = {"d_model": d_model, "n_heads": 4, "n_layers": 2, "max_tokens": tokens}
    models, opts, times = {}, {}, {"cape": [], "none": []}
    for pe in times:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            models[pe] = build_backbone("scgpt", model_cfg, n_features=adata.n_vars, pe=pe, angles=angles)
        opts[pe] = torch.optim.AdamW(models[pe].parameters(), lr=1e-4)
    for r in range(reps + 3):
        for pe, m in models.items():
            t = time.perf_counter()
            loss = m(m.tokenize(xb)).pow(2).mean()
            opts[pe].zero_grad()
            loss.backward()
            opts[pe].step()
            if r >= 3:
                times[pe].append(time.perf_counter() - t)
    return {pe: batch / float(np.median(v)) for pe, v in times.items()}


def main() -> None:
    adata = BENCH_DATA["pbmc68k_reduced"]()
    print("# Rotary overhead: cape vs none training throughput\n")
    print(f"Command: `OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')} python benchmarks/tasks/throughput.py`  ")
    print(f"Data: pbmc68k_reduced, {adata.n_obs} x {adata.n_vars}, first 32 cells, 128 tokens per cell (+<cls>)  ")
    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"torch threads {torch.get_num_threads()}, load average before {tuple(round(v, 2) for v in os.getloadavg())}  ")
    print("Seed 0 for model init; median over 30 interleaved training steps (3 warm-up).\n")
    print("| D | d = D/2 | cape cells/s | none cells/s | rotary overhead |")
    print("|---|---|---|---|---|")
    for d_model in (32, 64, 128):
        tp = step_throughput(adata, d_model)
        print(f"| {d_model} | {d_model // 2} | {tp['cape']:.0f} | {tp['none']:.0f} | {100 * (tp['none'] / tp['cape'] - 1):.1f} % |",
              flush=True)
    print(f"\nLoad average after: {tuple(round(v, 2) for v in os.getloadavg())}. Target: overhead ≤ 10 %.")


if __name__ == "__main__":
    main()
