"""Summarize ``OUT/raw.jsonl`` of run.py into markdown tables (mean ± sd over seeds).

Usage: python benchmarks/tasks/summarize.py [OUT]

One table per task; a row per arm (and per graph kind where one arm ran on several graphs).
The classical references (logistic regression, PCA + k-means, "no change" and a linear model,
ElasticNet) are the mean over the same seeds' splits.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

COLUMNS = {
    "annotation": ["accuracy", "macro_f1"],
    "annotation-louvain": ["accuracy", "macro_f1"],
    "clustering": ["ari", "nmi", "asw"],
    "perturbation": ["mse_top20_single", "mse_top20_double", "mse_top20", "pearson_delta"],
    "age": ["medae", "mae", "pearson_r"],
}
LOWER_IS_BETTER = {"mse_top20_single", "mse_top20_double", "mse_top20", "medae", "mae"}
REFERENCES = {"": "reference", "ctrl_": "reference: no change", "linear_": "reference: linear model"}


def table(raw: pd.DataFrame, task: str) -> str:
    sub = raw[raw.task == task].copy()
    if sub.empty:
        return f"_{task}: no runs_\n"
    sub["arm"] = sub["pe"] + sub["graph"].fillna("").map(lambda g: f" [{g}]" if g else "")
    cols = [c for c in COLUMNS[task] if c in sub]
    g = sub.groupby("arm", sort=False)
    mean, sd, n = g[cols].mean(), g[cols].std(ddof=1), g.size()
    best = {c: (mean[c].idxmin() if c in LOWER_IS_BETTER else mean[c].idxmax()) for c in cols}
    lines = ["| arm | " + " | ".join(cols) + " | seeds | s/run | best epoch |", "|---" * (len(cols) + 4) + "|"]
    for arm in mean.index:
        cells = []
        for c in cols:
            s = f"{mean.loc[arm, c]:.3f} ± {sd.loc[arm, c]:.3f}"
            cells.append(f"**{s}**" if best[c] == arm else s)
        be = g["best_epoch"].mean()[arm] if "best_epoch" in sub else float("nan")
        lines.append(f"| {arm} | " + " | ".join(cells) + f" | {n[arm]} | {g['seconds'].mean()[arm]:.0f} | {be:.1f} |")
    for prefix, name in REFERENCES.items():
        ref = [f"reference_{prefix}{c}" for c in cols]
        if any(r in sub for r in ref):
            vals = [f"{sub[r].mean():.3f}" if r in sub else "–" for r in ref]
            lines.append(f"| _{name}_ | " + " | ".join(vals) + " | | | |")
    lines.append("\nBold = best arm mean. sd over seeds (the seed sets split, init, batch order and masks).")
    return "\n".join(lines) + "\n"


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "results_identity"
    raw = pd.read_json(out / "raw.jsonl", lines=True)
    for task in COLUMNS:
        if task in set(raw.task):
            print(f"### {task}\n")
            print(table(raw, task))


if __name__ == "__main__":
    main()
