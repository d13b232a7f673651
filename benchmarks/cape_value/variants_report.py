"""Tables and the forest plot of ``variants.jsonl``: every angle variant's arms
against ``none`` (``default`` in the records written before it was renamed), paired by seed, with the 95 % t-interval, the minimum detectable effect
(power 0.8) and the seeds needed to detect 0.02 in accuracy / macro-F1 and 0.03 in ARI / NMI.

A row reads **helps** / **hurts** when its interval excludes 0 (in the metric's direction),
otherwise **cannot tell** at this power (the MDE says how large an effect could still hide).
The intervals are per metric, not adjusted for the number of rows: with 5 arm × variant rows
and 4 metrics, about one in a few rows may exclude 0 by chance, so a lone "helps" is weak.

Usage::

    python benchmarks/cape_value/variants_report.py [--write]   # --write: into RESULTS.md, and forest.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

HERE = Path(__file__).resolve().parent
TARGETS = {"accuracy": 0.02, "macro_f1": 0.02, "ari": 0.03, "nmi": 0.03}
METRICS = {"annotation": ("accuracy", "macro_f1"), "clustering": ("ari", "nmi")}
READING = {"better": "helps", "worse": "hurts"}  # the paired_differences verdict in words


def load() -> dict[str, dict]:
    """The newest record of each variant."""
    recs: dict[str, dict] = {}
    for line in (HERE / "variants.jsonl").read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            recs[r["variant"]] = r
    return recs


def null_arm(rec: dict) -> str:
    """The arm a variant's record pairs every other with: ``none``, or ``default`` in a record
    written before the arm was renamed."""
    return "none" if any(r["arm"] == "none" for r in rec["runs"]) else "default"


def rows_of(recs: dict[str, dict]) -> list[dict]:
    """Every (variant, arm, task, metric) paired difference against the null arm
    (:func:`null_arm`), with MDE and n needed."""
    from cape_pipeline.report.power import arm_differences, seeds_needed

    out = []
    for name, rec in recs.items():
        results = [SimpleNamespace(task=r["task"], metrics=r["metrics"], params={"arm": r["arm"], "seed": r["seed"]})
                   for r in rec["runs"]]
        for row in arm_differences(results, null_arm(rec)):
            if row["metric"] not in METRICS.get(row["task"], ()):
                continue
            row["arm"] = f"{name}: {row['arm']}"
            row["seeds_needed"] = seeds_needed(row["sd"], TARGETS[row["metric"]]) if row["sd"] else None
            row["reading"] = READING.get(row["verdict"], "cannot tell")  # negligible / unclear: cannot tell
            out.append(row)
    return out


def render(recs: dict[str, dict], rows: list[dict]) -> str:
    lines = ["| variant | angles: median / 90 % / max |φ| (rad), all features | train stage | load | seeds |",
             "|---|---|---|---|---|"]
    for name, rec in recs.items():
        q = rec["angle_quantiles"]
        lines.append(f"| {name} (`{json.dumps(rec['encode'])}`) | {q['q50']:.3f} / {q['q90']:.3f} / {q['max']:.3f} | "
                     f"{rec['train_seconds'] / 60:.1f} min | {rec['load_before'][0]:.1f} | {rec['seeds']} |")
    null = " / ".join(sorted({null_arm(rec) for rec in recs.values()}))
    lines += ["", f"| variant: arm | task | metric | mean (arm − {null}) | 95 % CI | MDE | seeds | seeds for "
              "0.02 acc/F1, 0.03 ARI/NMI | reading |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ci = "–" if r["ci_low"] is None else f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
        mde = "–" if r["mde"] is None else f"{r['mde']:.3f}"
        lines.append(f"| {r['arm']} | {r['task']} | {r['metric']} | {r['mean']:+.3f} | {ci} | {mde} | {r['n']} | "
                     f"{r['seeds_needed'] or '–'} | **{r['reading']}** |")
    lines += ["", "How much the annotation models use their angles (`TrainedModel.angle_ablation`, seeds 0–2; "
              "mean over seeds):", "", "| variant: arm | embedding change | labels that change | learned head scales |",
              "|---|---|---|---|"]
    for name, rec in recs.items():
        by: dict[str, list] = {}
        for a in rec.get("ablation", []):
            by.setdefault(a["arm"], []).append(a)
        scales = [s["head_scales"] for s in rec.get("learned_scales", [])]
        for arm, ab in by.items():
            sc = "–"
            if arm == "cape-learned-scale" and scales:
                s = np.array(scales)
                sc = f"{s.min():.2f}–{s.max():.2f} (mean {s.mean():.2f}, {len(scales)} seeds × {s.shape[1]} heads)"
            lines.append(f"| {name}: {arm} | {100 * np.mean([x['embedding_change'] for x in ab]):.1f} % | "
                         f"{100 * np.mean([x['prediction_change'] for x in ab]):.2f} % | {sc} |")
    cmd = {rec.get("command") for rec in recs.values()}
    lines += ["", "Commands: " + "; ".join(f"`{c}`" for c in sorted(cmd)) + ". Machine: "
              + "; ".join(sorted({rec["machine"] for rec in recs.values()})) + "."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    recs = load()
    rows = rows_of(recs)
    text = render(recs, rows)
    print(text)
    if a.write:
        from _results import write_block

        from cape_pipeline.pl.forest import forest_plot

        null = " / ".join(sorted({null_arm(rec) for rec in recs.values()}))
        fig = forest_plot(rows, title=f"pbmc68k_reduced: angle variants against {null} (paired seeds)")
        fig.savefig(HERE / "forest.png", dpi=130, bbox_inches="tight")
        write_block(HERE / "RESULTS.md", "variants", text)


if __name__ == "__main__":
    main()
