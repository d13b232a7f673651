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


def _groups(recs: list[dict]) -> dict:
    """(data, reference setting) → {setting: newest record}; records from before ``reference``
    existed compare max_tokens against the most tokens."""
    last: dict = {}
    for r in recs:
        last[(r["data"], r["setting"])] = r
    groups: dict = {}
    for (data, setting), r in last.items():
        ref = r.get("reference")
        if ref is None:
            ref = max((x for (d, _), x in last.items() if d == data and "reference" not in x),
                      key=lambda x: x["plan"]["max_tokens"])["setting"]
        groups.setdefault((data, ref), {})[setting] = r
    return groups


def _width(r: dict) -> str:
    """The backbone width D of a record's plan (``d_model``), or ``?`` when not recorded."""
    return str(r["plan"].get("d_model", "?"))


def main() -> None:
    recs = [json.loads(ln) for ln in (HERE / "defaults_ablation.jsonl").read_text().splitlines() if ln.strip()]
    for (data, ref_setting), rows in _groups(recs).items():
        ref = rows[ref_setting]
        plan = ref["plan"]
        print(f"\n**{data}** ({plan['n_obs']:,} cells × {plan['n_vars']:,} features, tokens per cell "
              f"median {plan['tokens_median']:.0f}; arms cape and default, seeds 0–{ref['seeds'] - 1}; "
              f"Δ = change of the cape mean against `{ref_setting}`, with the larger of the two settings' "
              "seed sd beside it)\n")
        cols = [(t, m) for t, ms in METRICS.items() for m in ms if t in ref["metrics"] and m in ref["metrics"][t]]
        print("| setting | D | max_tokens | train stage | load | "
              + " | ".join(f"{t} {m}: cape / none (Δ cape; sd)" for t, m in cols) + " |")
        print("|---|---|---|---|---|" + "---|" * len(cols))
        for setting, r in sorted(rows.items(), key=lambda kv: kv[0] != ref_setting):
            cells = []
            for t, m in cols:
                v = r["metrics"][t][m]
                c, d = np.array(v["cape"]), np.array(v["none"] if "none" in v else v["default"])  # default: earlier rows
                rc = np.array(ref["metrics"][t][m]["cape"])
                sd = max(np.std(c, ddof=1), np.std(rc, ddof=1)) if c.size > 1 else float("nan")
                delta = "" if r is ref else f" (Δ {c.mean() - rc.mean():+.3f}; sd {sd:.3f})"
                cells.append(f"{c.mean():.3f} / {d.mean():.3f}{delta}")
            print(f"| `{setting}` | {_width(r)} | {r['plan']['max_tokens']} | {r['train_seconds'] / 60:.1f} min | "
                  f"{r['load_before'][0]:.1f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
