"""Downstream effect of the rule for isolated features (``embed.isolated``), paired by seed.

Runs the main job's train stage twice on the same data, split and seeds, once per rule, and
compares the ``cape`` arm per seed (``none`` is shared: it ignores the angles; ``default`` is its
name in a results.json written before it was renamed, read the same way)::

    cape run pbmc68k_reduced --workdir W --out A --config workflows/pbmc68k_reduced.yaml --threads 1
    cape run pbmc68k_reduced --workdir W --out B --config workflows/pbmc68k_reduced.yaml --threads 1 \\
        --set embed.isolated=embed --set 'train.compare=[]'
    python benchmarks/embed/isolated.py A/results.json B/results.json --out benchmarks/embed/results_isolated.md
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from cape_pipeline.report.power import arm_of

METRICS = {"annotation": ("macro_f1", "accuracy"), "clustering": ("ari", "nmi")}


def sd(v: np.ndarray) -> str:
    """``mean ± sd`` (sd over seeds, ddof 1) of a 1-D array."""
    if v.size > 1:
        return f"{v.mean():.3f} ± {v.std(ddof=1):.3f}"
    return f"{v.mean():.3f}" if v.size else "–"


def _runs(path: str) -> dict[tuple[str, str, int], dict[str, float]]:
    doc = json.loads(Path(path).read_text())
    runs = doc["runs"] if isinstance(doc, dict) else doc
    arms = {"default": "none"}  # the earlier name of the arm
    return {(r["task"], arms.get(arm_of(r["params"]), arm_of(r["params"])), int(r["params"].get("seed", 0))): r["metrics"]
            for r in runs}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("origin", help="results.json of the run with embed.isolated=origin (the default)")
    ap.add_argument("embedded", help="results.json of the run with embed.isolated=embed")
    ap.add_argument("--out", default=None)
    ap.add_argument("--note", default="", help="free text (machine, load, commands) added to the output")
    args = ap.parse_args()
    a, b = _runs(args.origin), _runs(args.embedded)
    lines = [
        "# Isolated features: at the origin (default) vs embedded like the others (paper-literal)",
        "",
        f"- command: `python {' '.join(shlex.quote(x) for x in sys.argv)}`",
        args.note,
        "",
        "| task | metric | cape, origin (mean ± sd) | cape, embed (mean ± sd) | none (mean ± sd) | origin − embed per seed | mean [95 % t-CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, metrics in METRICS.items():
        seeds = sorted(s for (t, pe, s) in a if t == task and pe == "cape" and (t, "cape", s) in b)
        if not seeds:
            continue
        for m in metrics:
            x = np.array([a[(task, "cape", s)][m] for s in seeds])
            y = np.array([b[(task, "cape", s)][m] for s in seeds])
            dflt = np.array([a[(task, "none", s)][m] for s in seeds if (task, "none", s) in a])
            diff = x - y
            if diff.size > 1:
                half = stats.t.ppf(0.975, diff.size - 1) * diff.std(ddof=1) / np.sqrt(diff.size)
                ci = f"[{diff.mean() - half:+.3f}, {diff.mean() + half:+.3f}]"
            else:
                ci = "–"
            lines.append(
                f"| {task} | {m} | {sd(x)} | {sd(y)} | {sd(dflt)} | {', '.join(f'{v:+.3f}' for v in diff)} | "
                f"{diff.mean():+.3f} {ci} |"
            )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
