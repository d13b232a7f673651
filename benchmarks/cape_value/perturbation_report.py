"""Tables and forest plot of the perturbation task at Norman et al.'s size (issue 31 item 3).

Reads ``results_perturbation/raw.jsonl`` (rows of ``benchmarks/tasks/run.py --tasks
perturbation-norman``): every arm (a PE on one graph's angles) against ``default``, paired by
seed (same GEARS split, same initialization), with the 95 % t-interval and the minimum detectable
effect (power 0.8), on the MSE of the top-20 DE genes for the unseen single perturbations and for
the test doubles, and the Pearson correlation of the predicted change. A row reads **helps** /
**hurts** when its interval excludes 0 in the metric's direction, otherwise **cannot tell**.
The intervals are per row, not adjusted for the number of rows.

Usage::

    python benchmarks/cape_value/perturbation_report.py [--write]   # --write: RESULTS.md block, forest_perturbation.png
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
RAW = HERE / "results_perturbation" / "raw.jsonl"
METRICS = ("mse_top20_single", "mse_top20_double", "pearson_delta")
READING = {"better": "helps", "worse": "hurts"}
ROLE = {  # arm label → its row of paper 000 Table 3 / the comparison
    "default": "null (no PE: the backbone's gene identity only)",
    "cape [discover]": "full CAPE (Step I DAG, hyperboloid, rotary)",
    "cape [correlation]": "w/o-CSL (correlation graph)",
    "cape [discover-euclidean]": "w/o-hyperbolic (Euclidean embedding of the Step I DAG)",
    "cape-additive [discover]": "w/o-rotary (angles added, not rotated)",
    "cape [true]": "CAPE on the true DAG",
    "ape-tree [true]": "ape-tree (paper 002) on the true DAG's spanning forest",
    "ape-tree [discover]": "ape-tree (paper 002) on the Step I DAG's spanning forest",
    "none": "no PE and no identity beyond the token",
}


def load(path: Path = RAW) -> pd.DataFrame:
    """One row per run; ``arm`` is ``pe [graph]`` (``pe`` alone for arms that use no graph)."""
    df = pd.read_json(path, lines=True)
    df["graph"] = df["graph"].fillna("")
    df["arm"] = [p if not g else f"{p} [{g}]" for p, g in zip(df.pe, df.graph, strict=True)]
    return df.drop_duplicates(["arm", "seed"], keep="last")


def rows_of(df: pd.DataFrame) -> list[dict]:
    """Paired ``arm − default`` rows (``power.arm_differences``) for :data:`METRICS`."""
    from cape_pipeline.pipeline.power import arm_differences

    results = [SimpleNamespace(task="perturbation", params={"pe": r.arm, "seed": int(r.seed)},
                               metrics={m: float(getattr(r, m)) for m in METRICS if m in df and np.isfinite(getattr(r, m))})
               for r in df.itertuples()]
    out = []
    for row in arm_differences(results, "default"):
        row["reading"] = READING.get(row["verdict"], "cannot tell")
        out.append(row)
    return out


def render(df: pd.DataFrame, rows: list[dict]) -> str:
    """Markdown: absolute means per arm (with the two references), then the paired rows."""
    arms = [a for a in ROLE if a in set(df.arm)] + sorted(set(df.arm) - set(ROLE))
    lines = ["| arm | what it is | seeds | MSE top-20, unseen singles | MSE top-20, test doubles | Pearson Δ (all test) | fit + test time |",
             "|---|---|---|---|---|---|---|"]
    for a in arms:
        s = df[df.arm == a]
        cells = [f"{s[m].mean():.4f} ± {s[m].std(ddof=1):.4f}" if len(s) > 1 else f"{s[m].mean():.4f}" for m in METRICS]
        lines.append(f"| {a} | {ROLE.get(a, '')} | {len(s)} | " + " | ".join(cells) + f" | {s.seconds.mean() / 60:.1f} min |")
    base = df[df.arm == "default"]
    for ref, label in (("reference_ctrl", "no change (predict the control mean)"), ("reference_linear", "linear model (ridge on control co-expression)")):
        cells = [f"{base[f'{ref}_{m}'].mean():.4f} ± {base[f'{ref}_{m}'].std(ddof=1):.4f}" if f"{ref}_{m}" in base else "–"
                 for m in ("mse_top20_single", "mse_top20_double")]
        lines.append(f"| {label} | reference, same splits | {len(base)} | " + " | ".join(cells) + " | – | – |")
    lines += ["", "| arm − default | metric | mean | 95 % CI | MDE | seeds | reading |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        ci = "–" if r["ci_low"] is None else f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]"
        mde = "–" if r["mde"] is None else f"{r['mde']:.4f}"
        lines.append(f"| {r['arm']} | {r['metric']} | {r['mean']:+.4f} | {ci} | {mde} | {r['n']} | **{r['reading']}** |")
    load1 = df["load1"].astype(float)
    lines += ["", f"{len(df)} runs; load average (1 min) at the end of each run {load1.min():.1f}–{load1.max():.1f}."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--raw", type=Path, default=RAW)
    a = ap.parse_args()
    df = load(a.raw)
    rows = rows_of(df)
    text = render(df, rows)
    print(text)
    if a.write:
        from cape_pipeline.pl.forest import forest_plot

        fig = forest_plot(rows, title="simulated perturbation, Norman size, GEARS split: arm − default (paired seeds)")
        fig.savefig(HERE / "forest_perturbation.png", dpi=130, bbox_inches="tight")
        res = HERE / "RESULTS.md"
        body = res.read_text()
        block = f"<!-- perturbation: begin -->\n{text}\n<!-- perturbation: end -->"
        if "<!-- perturbation: begin -->" in body:
            body = re.sub(r"<!-- perturbation: begin -->.*<!-- perturbation: end -->", lambda _: block, body, flags=re.S)
        else:
            body = body.rstrip() + "\n\n" + block + "\n"
        res.write_text(body)


if __name__ == "__main__":
    main()
