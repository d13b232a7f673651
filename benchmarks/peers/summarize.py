"""Summarize benchmarks/peers (issue 17): one row per arm, mean ± sd over the seeds that ran,
seconds per fine-tune and its ratio to the dot-product `cape` arm of the same seed.

Usage: python benchmarks/peers/summarize.py > benchmarks/peers/RESULTS_table.md
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
rows = []
for sub in ("results_pe", "results_pe_corr", "results_attention", "results_attention_s1", "results_attention_s2"):
    f = HERE / sub / "raw.jsonl"
    if f.exists():
        new = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        if sub == "results_pe_corr":  # the same arm with the correlation graph's (non-trivial) angles
            for r in new:
                r["pe"] = f"{r['pe']} [correlation-graph angles]"
        rows += new
dot = {r["seed"]: r["seconds"] for r in rows if r["pe"] == "cape"}
print("| arm | seeds | accuracy | macro-F1 | s per run | × dot `cape` (same seed) | load1 |")
print("|---|---|---|---|---|---|---|")
for arm in dict.fromkeys(r["pe"] for r in rows):
    rs = [r for r in rows if r["pe"] == arm]

    def ms(k: str, rs: list = rs) -> str:
        v = np.array([r[k] for r in rs], dtype=float)
        return f"{v.mean():.3f} ± {v.std(ddof=1):.3f}" if len(v) > 1 else f"{v.mean():.3f}"

    ratio = [r["seconds"] / dot[r["seed"]] for r in rs if r["seed"] in dot]
    print(f"| `{arm}` | {','.join(str(r['seed']) for r in rs)} | {ms('accuracy')} | {ms('macro_f1')} | "
          f"{np.mean([r['seconds'] for r in rs]):.0f} | {np.mean(ratio):.2f} | {np.mean([r['load1'] for r in rs]):.1f} |")
