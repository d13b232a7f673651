"""Where a training step's time goes (torch profiler, 1 thread): masked-value pretraining step
of scgpt, pe=cape, D = 64, 4 heads, 2 layers, batch 32, T = 128 or 256 tokens per cell, 5 steps
after 3 warm-up; the 15 ops with the most self time.

Usage::

    python benchmarks/scale/profile_step.py [--tokens 128]

The T = 256 output is quoted in the ``step`` block of ``RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from cape_pipeline.models import build_backbone
from cape_pipeline.models.backbones.heads import ValueDecoder
from cape_pipeline.models.loops import masked_value_loss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=128)
    t = ap.parse_args().tokens
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    m, batch, d = 2000, 32, 64
    x = np.zeros((batch, m), np.float32)
    for i in range(batch):
        x[i, rng.choice(m, t, replace=False)] = rng.gamma(2.0, 1.0, t)
    xb = torch.as_tensor(x)
    torch.manual_seed(0)
    model = build_backbone("scgpt", {"d_model": d, "n_heads": 4, "n_layers": 2, "max_tokens": t}, n_features=m,
                           pe="cape", angles=rng.uniform(-0.3, 0.3, (m, d // 2)))
    model.fit_data(x)
    dec = ValueDecoder(d)
    params = list(model.parameters()) + list(dec.parameters())
    opt = torch.optim.AdamW(params, 1e-4)
    gen = torch.Generator().manual_seed(0)

    def step() -> None:
        loss, _ = masked_value_loss(model, dec, xb, mask_ratio=0.4, generator=gen)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    for _ in range(3):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as p:
        for _ in range(5):
            step()
    print(f"T = {t}, D = {d}, 1 thread, load average {tuple(round(v, 2) for v in os.getloadavg())}")
    print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


if __name__ == "__main__":
    main()
