"""Summarize ``results/raw.jsonl`` of run.py into markdown tables (mean ± sd over seeds).

Usage: python benchmarks/tasks/summarize.py [results_dir]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from cape_pipeline.models import PE_NAMES

COLUMNS = {
    "annotation": ["accuracy", "macro_f1"],
    "clustering": ["ari", "nmi", "asw"],
    "perturbation": ["mse_top20_single", "mse_top20_double", "mse_top20", "pearson_delta"],
    "age": ["medae", "mae", "pearson_r"],
}
LOWER_IS_BETTER = {"mse_top20_single", "mse_top20_double", "mse_top20", "medae", "mae"}


def table(raw: pd.DataFrame, task: str) -> str:
    sub = raw[raw.task == task]
    if sub.empty:
        return f"_{task}: no runs_\n"
    cols = [c for c in COLUMNS[task] if c in sub]
    g = sub.groupby("pe")
    mean, sd = g[cols].mean(), g[cols].std(ddof=1)
    best = {c: (mean[c].idxmin() if c in LOWER_IS_BETTER else mean[c].idxmax()) for c in cols}
    lines = ["| PE | " + " | ".join(cols) + " | s/run | cells/s |", "|---" * (len(cols) + 3) + "|"]
    for pe in [p for p in PE_NAMES if p in mean.index]:
        cells = []
        for c in cols:
            s = f"{mean.loc[pe, c]:.3f} ± {sd.loc[pe, c]:.3f}"
            cells.append(f"**{s}**" if best[c] == pe else s)
        lines.append(f"| {pe} | " + " | ".join(cells) + f" | {g['seconds'].mean()[pe]:.1f} | {g['cells_per_second'].mean()[pe]:.0f} |")
    ref = [c for c in sub.columns if c.startswith("reference_") and any(c == f"reference_{k}" or c == f"reference_ctrl_{k}" for k in cols)]
    if ref:
        r = sub[ref].mean()
        lines.append("| _reference_ | " + " | ".join(
            next((f"{r[x]:.3f}" for x in (f"reference_{c}", f"reference_ctrl_{c}") if x in r), "–") for c in cols) + " | | |")
    n = sub.groupby("pe").size()
    lines.append(f"\n{int(n.min())}–{int(n.max())} seeds per PE; bold = best mean.")
    return "\n".join(lines) + "\n"


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "results"
    raw = pd.read_json(out / "raw.jsonl", lines=True)
    for task in COLUMNS:
        print(f"### {task}\n")
        print(table(raw, task))


if __name__ == "__main__":
    main()
