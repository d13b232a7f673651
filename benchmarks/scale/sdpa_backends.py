"""Fused SDPA against the math path on this CPU: forward + backward of
``torch.nn.functional.scaled_dot_product_attention`` with a key padding mask (half the batch
padded to half length), batch 32, one thread, at the head sizes the backbones use
(D = 64 with 4 heads → 16; 2 heads → 32; D = 128 with 8 heads → 16) and T + 1 = 129, 257, 513.

Usage::

    python benchmarks/scale/sdpa_backends.py

Its output is quoted in the ``step`` block of ``RESULTS.md``.
"""

from __future__ import annotations

import os
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main() -> None:
    torch.set_num_threads(1)
    print(f"load average before {tuple(round(v, 2) for v in os.getloadavg())}; torch {torch.__version__}, 1 thread\n")
    print("| head size | heads | T + 1 | flash (ms) | math (ms) | math / flash |")
    print("|---|---|---|---|---|---|")
    for hd, h in ((16, 4), (32, 2), (16, 8)):
        for t in (129, 257, 513):
            q, k, v = (torch.randn(32, h, t, hd, requires_grad=True) for _ in range(3))
            mask = torch.ones(32, 1, 1, t, dtype=torch.bool)
            mask[:16, ..., t // 2 :] = False
            res = {}
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("math", SDPBackend.MATH)):
                with sdpa_kernel(backend):
                    times = []
                    for i in range(5):
                        t0 = time.perf_counter()
                        F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()
                        if i >= 2:
                            times.append(time.perf_counter() - t0)
                res[name] = 1000 * sum(times) / len(times)
            print(f"| {hd} | {h} | {t} | {res['flash']:.1f} | {res['math']:.1f} | {res['math'] / res['flash']:.1f}× |")
    print(f"\nload average after {tuple(round(v, 2) for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
