"""Table of the pbmc68k_reduced CAPE ablations (mean ± sd over seeds).

Usage: python benchmarks/tasks/ablation_summary.py

Combines ``results/raw.jsonl`` (the original zoo run: ``none`` and cape on the correlation graph,
i.e. w/o-CSL) with ``results_ablation/raw.jsonl`` (full CAPE on the Step I DAG at threshold 0.05,
w/o-hyperbolic, w/o-rotary = cape-additive, RSGD→RAdam variant, and a re-run of ``none``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
COLS = {"annotation": ["accuracy", "macro_f1"], "clustering": ["ari", "nmi", "asw"]}
ROWS = [  # (label, source, pe, graph)
    ("none (original run)", "results", "none", ""),
    ("none (re-run with the ablations)", "results_ablation", "none", ""),
    ("cape, correlation graph (w/o-CSL)", "results", "cape", "correlation"),
    ("cape-additive, correlation graph", "results", "cape-additive", "correlation"),
    ("**full CAPE**: cape, Step I DAG τ 0.05, hyperbolic (RSGD)", "results_ablation", "cape", "discover005"),
    ("cape-input, Step I DAG, hyperbolic", "results_ablation", "cape-input", "discover005"),
    ("cape-additive, Step I DAG, hyperbolic (w/o-rotary)", "results_ablation", "cape-additive", "discover005"),
    ("cape, Step I DAG, Euclidean + Adam (w/o-hyperbolic)", "results_ablation", "cape", "discover005-euclidean"),
    ("cape, Step I DAG, hyperbolic + RAdam (extra)", "results_ablation", "cape", "discover005-radam"),
    ("static-absolute (best PE of the zoo)", "results", "static-absolute", ""),
]


def main() -> None:
    raw = {s: pd.read_json(HERE / s / "raw.jsonl", lines=True) for s in ("results", "results_ablation")}
    for r in raw.values():
        r["graph"] = r["graph"].fillna("")
    for task, cols in COLS.items():
        print(f"### {task} (pbmc68k_reduced)\n")
        print("| variant | n seeds | " + " | ".join(cols) + " |")
        print("|---" * (len(cols) + 2) + "|")
        for label, src, pe, graph in ROWS:
            sub = raw[src]
            sub = sub[(sub.task == task) & (sub.pe == pe) & (sub.graph == graph)]
            if sub.empty:
                continue
            cells = [f"{sub[c].mean():.3f} ± {sub[c].std(ddof=1):.3f}" for c in cols]
            print(f"| {label} | {len(sub)} | " + " | ".join(cells) + " |")
        ref = raw["results"][raw["results"].task == task]
        print("| _reference_ | | " + " | ".join(f"{ref[f'reference_{c}'].mean():.3f}" for c in cols) + " |\n")


if __name__ == "__main__":
    main()
