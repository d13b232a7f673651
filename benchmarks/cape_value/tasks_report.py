"""Tables and forest plots of the simulated tasks with known graphs.

* ``perturbation``: ``results_perturbation/raw.jsonl``, rows of ``benchmarks/tasks/run.py --tasks
  perturbation-norman`` (Norman et al.'s size, GEARS's unseen-gene split): MSE of the top-20 DE
  genes for the unseen single perturbations and for the test doubles, Pearson of the predicted
  change; references "no change" and the linear model.
* ``age``: ``results_age/raw.jsonl``, rows of ``run.py --tasks age`` (``sim_methylation_age``):
  MedAE, MAE, Pearson r; reference the ElasticNet clock.

Every arm (a PE on one graph's angles, ``pe [graph]``) is set against ``none`` (called
``default`` in the rows written before it was renamed: a file of those is read with that name,
a file holding both reads ``default`` as ``none``), paired by seed
(same split, same initialization), with the 95 % t-interval and the minimum detectable effect
(power 0.8). A row reads **helps** / **hurts** when its interval excludes 0 in the metric's
direction, otherwise **cannot tell**. The intervals are per row: with ~20 rows one may exclude 0
by chance, so the last column says whether the effect still holds after Holm's step-down over
all the table's rows (family-wise error 0.05, from the paired t-test's p).

Usage::

    python benchmarks/cape_value/tasks_report.py perturbation|age [--write]   # --write: RESULTS.md block, forest_<task>.png
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Task:
    raw: str
    metrics: tuple[str, ...]
    headers: tuple[str, ...]
    references: tuple[tuple[str, str], ...]  # (metric prefix, label)
    title: str


TASKS = {
    "perturbation": Task("results_perturbation/raw.jsonl", ("mse_top20_single", "mse_top20_double", "pearson_delta"),
                         ("MSE top-20, unseen singles", "MSE top-20, test doubles", "Pearson Δ (all test)"),
                         (("reference_ctrl_", "no change (predict the control mean)"),
                          ("reference_linear_", "linear model (ridge on control co-expression)")),
                         "simulated perturbation, Norman size, GEARS split: arm − {base} (paired seeds)"),
    "age": Task("results_age/raw.jsonl", ("medae", "mae", "pearson_r"), ("MedAE (years)", "MAE (years)", "Pearson r"),
                (("reference_", "ElasticNet clock"),), "simulated methylation age: arm − {base} (paired seeds)"),
}
READING = {"better": "helps", "worse": "hurts", "negligible": "no difference (|mean| < 0.001)"}
ROLE = {  # arm label → its row of paper 000 Table 3 / the comparison
    "none": "null: no PE, the backbone's feature identity only",
    "default": "null: no PE, the backbone's feature identity only",  # its name in earlier rows
    "cape [discover]": "full CAPE (Step I DAG, hyperboloid, rotary)",
    "cape [correlation]": "w/o-CSL (correlation graph)",
    "cape [discover-euclidean]": "w/o-hyperbolic (Euclidean embedding of the Step I DAG)",
    "cape-additive [discover]": "w/o-rotary (angles added, not rotated)",
    "cape [true]": "CAPE on the true DAG",
    "ape-tree [true]": "ape-tree (paper 002) on the true DAG's spanning forest",
    "ape-tree [discover]": "ape-tree (paper 002) on the Step I DAG's spanning forest",
    "cape-learned-scale [discover]": "CAPE, Step I DAG, a learned scale per head (an angle variant)",
    "cape [discover-scale4]": "CAPE, Step I DAG, angles ×4 (encode.scale = π)",
    "cape [discover-geometric]": "CAPE, Step I DAG, geometric frequencies 1–100",
    "cape [interventional]": "CAPE on Step I with the perturbation labels, blind to the test conditions of seeds 0–2",
}


def load(path: Path) -> pd.DataFrame:
    """One row per run; ``arm`` is ``pe [graph]`` (``pe`` alone for arms that use no graph)."""
    df = pd.read_json(path, lines=True)
    df["graph"] = df["graph"].fillna("")
    if (df.pe == "none").any():  # rows of both names: "default" is the earlier name of "none"
        df["pe"] = df.pe.replace("default", "none")
    df["arm"] = [p if not g else f"{p} [{g}]" for p, g in zip(df.pe, df.graph, strict=True)]
    return df.drop_duplicates(["arm", "seed"], keep="last")


def baseline(df: pd.DataFrame) -> str:
    """The null arm of :func:`load`'s rows: ``none``, or ``default`` in a file written before the
    arm was renamed."""
    return "none" if (df.arm == "none").any() or not (df.arm == "default").any() else "default"


def rows_of(df: pd.DataFrame, task: str) -> list[dict]:
    """Paired ``arm − none`` rows (``power.arm_differences``; the null arm is :func:`baseline`)
    for the task's metrics."""
    from cape_pipeline.report.power import arm_differences

    metrics = TASKS[task].metrics
    results = [SimpleNamespace(task=task, params={"arm": r.arm, "seed": int(r.seed)},
                               metrics={m: float(getattr(r, m)) for m in metrics if m in df and np.isfinite(getattr(r, m))})
               for r in df.itertuples()]
    out = []
    for row in arm_differences(results, baseline(df)):
        row["reading"] = READING.get(row["verdict"], "cannot tell")
        row["p"] = _paired_p(row)
        out.append(row)
    return _holm(out)


def _paired_p(row: dict) -> float:
    """Two-sided p of the paired t-test behind the row's interval (scipy's ``ttest_1samp`` of the
    per-seed differences, i.e. ``ttest_rel``; NaN below 2 seeds, 0 when every seed moved alike)."""
    from scipy import stats

    if row["n"] < 2 or not row["sd"]:
        return float("nan") if row["n"] < 2 else 0.0
    return float(stats.ttest_1samp(row["differences"], 0.0).pvalue)


def _holm(rows: list[dict], alpha: float = 0.05) -> list[dict]:
    """Holm's step-down over every row of the table (statsmodels ``multipletests``, method
    ``"holm"``): ``holm`` is True where the row's effect survives the adjustment for the number
    of rows (family-wise error ``alpha``)."""
    from statsmodels.stats.multitest import multipletests

    idx = [i for i, r in enumerate(rows) if np.isfinite(r["p"])]
    if idx:
        reject = multipletests([rows[i]["p"] for i in idx], alpha=alpha, method="holm")[0]
        for i, rej in zip(idx, reject, strict=True):
            rows[i]["holm"] = bool(rej)
    return rows


def _cell(v: pd.Series) -> str:
    return "–" if v.isna().all() else f"{v.mean():.4f} ± {v.std(ddof=1):.4f}" if len(v) > 1 else f"{v.mean():.4f}"


def graphs_table(path: Path | None, used: set[str]) -> list[str]:
    """Markdown rows of ``graphs.json`` (``tasks.py``'s description of the angle files) for the
    graphs in ``used`` (and the true DAG), or none when the file is missing."""
    if path is None or not path.exists():
        return []
    lines = ["| graph | edges (true DAG) | precision / recall | skeleton precision / recall | |φ| median / 90 % / max (rad) | features at angle 0 |",
             "|---|---|---|---|---|---|"]
    for g in json.loads(path.read_text()):
        if g["graph"] not in used:
            continue
        lines.append(f"| {g['graph']} | {g['edges']:,} ({g['true_edges']:,}) | {g['precision']:.2f} / {g['recall']:.2f} | "
                     f"{g['skeleton_precision']:.2f} / {g['skeleton_recall']:.2f} | "
                     f"{g['phi_median']:.3f} / {g['phi_q90']:.3f} / {g['phi_max']:.3f} | {g['features_at_origin']} of {g['features']} |")
    return [*lines, ""]


def render(df: pd.DataFrame, rows: list[dict], task: str, graphs: Path | None = None) -> str:
    """Markdown: the angle files' graphs (when ``graphs`` exists), absolute mean ± sd per arm
    (and the references, on the null arm's splits), then the paired rows."""
    t = TASKS[task]
    arms = [a for a in ROLE if a in set(df.arm)] + sorted(set(df.arm) - set(ROLE))
    lines = [*graphs_table(graphs, {"true", *df.graph}),
             "| arm | what it is | seeds | " + " | ".join(t.headers) + " | time per run |", "|---" * (len(t.headers) + 4) + "|"]
    for a in arms:
        s = df[df.arm == a]
        lines.append(f"| {a} | {ROLE.get(a, '')} | {len(s)} | " + " | ".join(_cell(s[m]) for m in t.metrics)
                     + f" | {s.seconds.mean() / 60:.1f} min |")
    null = baseline(df)
    base = df[df.arm == null]
    for ref, label in t.references:
        cells = [_cell(base[ref + m]) if ref + m in base else "–" for m in t.metrics]
        lines.append(f"| {label} | reference, same splits | {len(base)} | " + " | ".join(cells) + " | – |")
    lines += ["", f"| arm − {null} | metric | mean | 95 % CI | MDE | seeds | p (paired t) | reading | after Holm over all rows |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ci = "–" if r["ci_low"] is None else f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]"
        mde = "–" if r["mde"] is None else f"{r['mde']:.4f}"
        holm = "–" if "holm" not in r else "holds" if r["holm"] and r["reading"] in ("helps", "hurts") else "cannot tell"
        lines.append(f"| {r['arm']} | {r['metric']} | {r['mean']:+.4f} | {ci} | {mde} | {r['n']} | {r['p']:.3f} | **{r['reading']}** | {holm} |")
    load1 = df["load1"].astype(float)
    lines += ["", f"{len(df)} runs; load average (1 min) at the end of each run {load1.min():.1f}–{load1.max():.1f}."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("task", choices=sorted(TASKS))
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--raw", type=Path, default=None, help="results file (default: the task's, next to this script)")
    a = ap.parse_args()
    raw = a.raw or HERE / TASKS[a.task].raw
    df = load(raw)
    rows = rows_of(df, a.task)
    text = render(df, rows, a.task, graphs=raw.parent / "graphs.json")
    print(text)
    if a.write:
        from _results import write_block

        from cape_pipeline.pl.forest import forest_plot

        # Pearson r lives on another scale than the errors: the figure shows the error metrics
        fig = forest_plot([r for r in rows if not r["metric"].startswith("pearson")], title=TASKS[a.task].title.format(base=baseline(df)))
        fig.savefig(HERE / f"forest_{a.task}.png", dpi=130, bbox_inches="tight")
        write_block(HERE / "RESULTS.md", a.task, text)


if __name__ == "__main__":
    main()
