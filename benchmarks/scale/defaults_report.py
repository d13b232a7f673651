"""Tables of ``defaults_ablation.jsonl``: per dataset and setting, the train stage's time and
each metric's mean ± sd over seeds for ``cape`` and ``default``, and the change against the
dataset's reference setting (the most tokens) next to the seed sd.

Usage::

    python benchmarks/scale/defaults_report.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
METRICS = {"annotation": ("macro_f1", "accuracy"), "clustering": ("ari", "nmi")}


def main() -> None:
    recs = [json.loads(ln) for ln in (HERE / "defaults_ablation.jsonl").read_text().splitlines() if ln.strip()]
    last: dict = {}
    for r in recs:
        last[(r["data"], r["setting"])] = r
    for data in dict.fromkeys(k[0] for k in last):
        rows = sorted((r for (d, _), r in last.items() if d == data), key=lambda r: -r["plan"]["max_tokens"])
        ref = rows[0]
        print(f"\n**{data}** ({ref['plan']['n_obs']:,} cells × {ref['plan']['n_vars']:,} features, tokens per cell "
              f"median {ref['plan']['tokens_median']:.0f} uncapped at {ref['plan']['max_tokens']}; arms cape and default, "
              f"seeds 0–{ref['seeds'] - 1}; Δ = change of the mean against max_tokens={ref['plan']['max_tokens']}, "
              "with the larger of the two settings' seed sd beside it)\n")
        cols = [(t, m) for t, ms in METRICS.items() for m in ms if t in ref["metrics"] and m in ref["metrics"][t]]
        print("| max_tokens | train stage | load | " + " | ".join(f"{t} {m}: cape / default (Δ cape; sd)" for t, m in cols) + " |")
        print("|---|---|---|" + "---|" * len(cols))
        for r in rows:
            cells = []
            for t, m in cols:
                v = r["metrics"][t][m]
                c, d = np.array(v["cape"]), np.array(v["default"])
                rc = np.array(ref["metrics"][t][m]["cape"])
                sd = max(np.std(c, ddof=1), np.std(rc, ddof=1)) if c.size > 1 else float("nan")
                delta = "" if r is ref else f" (Δ {c.mean() - rc.mean():+.3f}; sd {sd:.3f})"
                cells.append(f"{c.mean():.3f} / {d.mean():.3f}{delta}")
            print(f"| {r['plan']['max_tokens']} | {r['train_seconds'] / 60:.1f} min | {r['load_before'][0]:.1f} | "
                  + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
