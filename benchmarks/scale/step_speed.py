"""Train-step speed on this CPU against the step's FLOP count.

One masked-value pretraining step (tokenize, forward, MSE on hidden tokens, backward, AdamW) of
the scGPT-style backbone with pe=cape, 2 layers, 4 heads, batch 32, every cell carrying exactly
T expressed genes (simulated), at D in {64, 128} and T in {128, 256, 512}. Variants: fp32 (the
default), bf16 autocast, torch.compile. FLOPs are counted analytically (matmuls only):
forward per token per layer 16 D^2 (q, k, v, out and the 2x MLP) + 4 (T+1) D (scores and
values); a training step is 3x the forward. Peak: the best of a 2048^3 matmul in fp32 and bf16
at the same thread count.

Run from the repository root:
    python benchmarks/scale/step_speed.py [--variants fp32,bf16,compile] [--reps 8]

Its output (less the title line) is the ``step`` block of ``RESULTS.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import time

import numpy as np
import torch

from cape_pipeline.models import build_backbone
from cape_pipeline.models.backbones.heads import ValueDecoder


def peak_gflops(dtype: torch.dtype, n: int = 2048, reps: int = 5) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(reps))
    return 2 * n**3 / best / 1e9


def _timed(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def step_flops(d: int, t: int, layers: int = 2, batch: int = 32) -> float:
    per_token = layers * (16 * d * d + 4 * (t + 1) * d)
    return 3.0 * per_token * (t + 1) * batch


def measure(d: int, t: int, variant: str, reps: int, batch: int = 32, m: int = 2000) -> float:
    rng = np.random.default_rng(0)
    x = np.zeros((batch, m), dtype=np.float32)
    for i in range(batch):
        x[i, rng.choice(m, t, replace=False)] = rng.gamma(2.0, 1.0, t)
    xb = torch.as_tensor(x)
    angles = rng.uniform(-0.3, 0.3, size=(m, d // 2))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = build_backbone("scgpt", {"d_model": d, "n_heads": 4, "n_layers": 2, "max_tokens": t},
                               n_features=m, pe="cape", angles=angles)
        dec = ValueDecoder(d)
    params = list(model.parameters()) + list(dec.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    model.train()
    fwd = model
    if variant == "compile":
        fwd = torch.compile(model, dynamic=False)
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if variant == "bf16" else contextlib.nullcontext()
    gen = torch.Generator().manual_seed(0)

    def step() -> None:
        tok = model.tokenize(xb)
        hide = (torch.rand(tok.idx.shape, generator=gen) < 0.4) & tok.observed
        with amp:
            h = fwd(tok, hide=hide)
            pred = dec(h[:, 1:]).float()
        loss = ((pred - tok.values) ** 2)[hide].mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    for _ in range(3):
        step()
    times = [_timed(step) for _ in range(reps)]
    return batch / float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="fp32,bf16,compile")
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--widths", default="64,128")
    ap.add_argument("--tokens", default="128,256,512")
    a = ap.parse_args()
    variants = a.variants.split(",")
    load0 = os.getloadavg()
    p32, p16 = peak_gflops(torch.float32), peak_gflops(torch.bfloat16)
    print("# Train-step speed on CPU against its FLOP count\n")
    print(f"Command: `python benchmarks/scale/step_speed.py --variants {a.variants} --reps {a.reps}`  ")
    print(f"Machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, torch threads "
          f"{torch.get_num_threads()}, load average before {tuple(round(v, 2) for v in load0)}  ")
    print("Step: masked-value pretraining of scgpt, pe=cape, 2 layers, 4 heads, batch 32, every cell with "
          f"exactly T expressed genes of 2,000; median of {a.reps} steps after 3 warm-up.  ")
    print(f"Peak (2048^3 matmul, same threads): fp32 {p32:.0f} GFLOP/s, bf16 {p16:.0f} GFLOP/s\n")
    print("| D | T | variant | cells/s | GFLOP/s | share of fp32 peak |")
    print("|---|---|---|---|---|---|")
    for d in map(int, a.widths.split(",")):
        for t in map(int, a.tokens.split(",")):
            for v in variants:
                try:
                    cps = measure(d, t, v, a.reps)
                except Exception as exc:  # noqa: BLE001 - report the variant as failed, keep the table
                    print(f"| {d} | {t} | {v} | failed: {type(exc).__name__}: {str(exc)[:80]} | | |", flush=True)
                    continue
                gf = cps / 32 * step_flops(d, t) / 1e9
                print(f"| {d} | {t} | {v} | {cps:.0f} | {gf:.1f} | {gf / p32:.0%} |", flush=True)
    print(f"\nLoad average after: {tuple(round(v, 2) for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
