"""Step time of every attention and PE option relative to the dot product, measured side by side.

One training step (forward + backward + AdamW) of the benchmark's scGPT-style backbone (D 32,
2 layers, 4 heads) on a batch of 32 cells × T tokens, each option built with the same positions
(CAPE angles, hyperboloid points and spanning forest of pbmc68k_reduced's Step I graph, from
``benchmarks/tasks/cache``). The options are timed in interleaved rounds (round-robin, so load
changes hit them alike); the median over rounds is reported, and its ratio to ``cape`` (dot
product).

Usage: python benchmarks/peers/step_time.py [--tokens 256] [--rounds 7] > benchmarks/peers/step_time.txt
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tasks"))
from run import load_angles  # noqa: E402

from cape_pipeline.models import build_backbone  # noqa: E402
from cape_pipeline.models.backbones.heads import ValueDecoder  # noqa: E402
from cape_pipeline.tasks.arms import Arm  # noqa: E402

ARMS = ["cape", "none", "learned-small-norm", "rank-value", "ape-tree", "cape@riemann", "cape@cone-umbral",
        "cape@cone-penumbral"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    torch.set_num_threads(1)
    print("command: python " + " ".join(sys.argv))
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__}, 1 thread; "
          f"load average at start {os.getloadavg()}")
    z = np.load(HERE.parent / "tasks" / "cache" / "angles_pbmc68k_reduced_discover_d16.npz")
    names = pd.Index(z["var_names"])
    pos, _ = load_angles("pbmc68k_reduced", names, ("discover",), 32)
    m = len(names)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(a.batch, m, generator=g) * 3
    x[torch.rand(a.batch, m, generator=g) < 1 - a.tokens / m] = 0.0  # about T expressed genes per cell
    steps = {}
    for arm in ARMS:
        parsed = Arm.parse(arm)
        torch.manual_seed(0)
        model = build_backbone("scgpt", {"d_model": 32, "n_heads": 4, "n_layers": 2, "max_tokens": a.tokens},
                               n_features=m, pe=parsed.pe, attention=parsed.attention, angles=pos)
        model.fit_data(x.numpy())
        dec = ValueDecoder(32)
        opt = torch.optim.AdamW([*model.parameters(), *dec.parameters()], lr=1e-3)

        def step(model=model, dec=dec, opt=opt) -> None:
            tok = model.tokenize(x)
            loss = ((dec(model(tok)[:, 1:]) - tok.values) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

        step()  # warm-up
        steps[arm] = step
    times: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for _ in range(a.rounds):
        for arm in ARMS:
            t0 = time.perf_counter()
            steps[arm]()
            times[arm].append(time.perf_counter() - t0)
    ref = float(np.median(times["cape"]))
    print(f"\nbatch {a.batch} cells x {a.tokens} tokens, {a.rounds} interleaved rounds; load average at end {os.getloadavg()}\n")
    print("| option | median s per step | × dot (`cape`) |")
    print("|---|---|---|")
    for arm in ARMS:
        med = float(np.median(times[arm]))
        print(f"| `{arm}` | {med:.3f} | {med / ref:.2f} |")


if __name__ == "__main__":
    main()
