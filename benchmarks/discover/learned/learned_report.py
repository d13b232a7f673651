"""Tables of ``RESULTS.md``: the learned algorithm against every other Step I option, per suite row.

Reads what the other scripts measured (nothing is run here):

- the ``seeds-*__{dataset}__{seed}`` cases of ``../cases.jsonl`` from ``../lowrank/seeds.py`` (synth10/20/50, Sachs; 3 seeds) for
  ``--algorithm low-rank`` (tag ``seeds``), ``screened`` and ``learned``;
- ``../suite/suite.jsonl`` from ``../suite/suite.py`` (M = 200–5000; cape = low rank, cape-screened,
  cape-learned, dagma, correlation and its oracle-best threshold);
- ``learned_ablation.jsonl`` from ``learned_ablation.py``, ``user_counts.jsonl`` from
  ``user_counts.py`` and ``../sdcd/results.jsonl`` (SDCD itself, its
  own virtual environment) when present.

For every row it prints the mean over the seeds each method has there, and whether the
learned algorithm is at least as good as the best other option on F1 (the rule behind
``algorithm="auto"``).

Usage::

    python benchmarks/discover/learned/learned_report.py   # pasted between the tables markers of RESULTS.md
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

SMALL = ("synth10", "synth20", "synth50", "sachs")
TAGS = {"low-rank": "seeds", "screened": "seeds-screened", "learned": "seeds-learned"}


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def small_sets() -> list[str]:
    out = [
        "## Small sets (`../lowrank/seeds.py`, N = 2000 for synth*, 7466 for Sachs; seeds 0–2; one thread)",
        "",
        "| dataset | M | low-rank F1 | screened F1 | learned F1 | learned SHD (low-rank) | learned AUPRC (low-rank) | learned s (low-rank s) | auto uses | auto vs best |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    from cape_pipeline.causal.config import resolve_algorithm

    for ds in SMALL:
        recs = {}
        for sup, tag in TAGS.items():
            rs = [common.read_cache(tag, f"{ds}__{s}") for s in (0, 1, 2)]
            recs[sup] = [r for r in rs if r is not None]
        if not all(recs.values()):
            continue
        f1 = {k: _mean([r["metrics"]["f1"] for r in v]) for k, v in recs.items()}
        shd = {k: _mean([r["metrics"]["shd"] for r in v]) for k, v in recs.items()}
        auprc = {k: _mean([r["metrics"]["auprc"] for r in v]) for k, v in recs.items()}
        sec = {k: _mean([r["seconds"] for r in v]) for k, v in recs.items()}
        m = recs["learned"][0]["params"]["n_vars"]
        auto = resolve_algorithm("auto", m, recs["learned"][0]["params"]["n_obs"])
        best = max(f1.values())
        verdict = "best" if f1[auto] >= best - 1e-9 else f"−{best - f1[auto]:.3f} F1"
        out.append(
            f"| {ds} | {m} | {f1['low-rank']:.3f} | {f1['screened']:.3f} | {f1['learned']:.3f} | "
            f"{shd['learned']:.1f} ({shd['low-rank']:.1f}) | {auprc['learned']:.3f} ({auprc['low-rank']:.3f}) | "
            f"{sec['learned']:.0f} ({sec['low-rank']:.0f}) | {auto} | {verdict} |"
        )
    return out


def suite_rows() -> list[str]:
    path = HERE.parent / "suite" / "suite.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    by = defaultdict(list)
    for r in recs:
        by[(r["setting"], r["m"], r["method"])].append(r)
    keys = sorted({(r["setting"], r["m"]) for r in recs if r["method"] == "cape-learned"}, key=lambda k: (k[1], k[0]))
    out = [
        "## Suite (`../suite/suite.py`; one subprocess per case, one torch thread; mean over the seeds each method has)",
        "",
        "F1 (seeds). *corr-best* is the correlation graph at its oracle-best threshold (chosen on the truth).",
        "",
        "| setting | M | learned | low-rank | screened | DAGMA | corr-best | learned SHD | learned AUPRC | learned s | learned peak RSS MiB | load (before, after) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(st: str, m: int, me: str) -> str:
        rs = [r for r in by[(st, m, me)] if r["status"] == "ok"]
        bad = [r for r in by[(st, m, me)] if r["status"] != "ok"]
        if not rs:
            return f"{bad[0]['status']} (> {bad[0].get('limit_seconds', 0):.0f} s)" if bad else "–"
        return f"{_mean([r['metrics']['f1'] for r in rs]):.3f} ({len(rs)})"

    for st, m in keys:
        ok = [r for r in by[(st, m, "cape-learned")] if r["status"] == "ok"]
        corr = [r for r in by[(st, m, "correlation")] if r["status"] == "ok" and "best_threshold" in r]
        cb = f"{_mean([r['best_threshold']['f1'] for r in corr]):.3f} ({len(corr)})" if corr else "–"
        if ok:
            la = "; ".join(", ".join(f"{v:.1f}" for v in r["load_average"]) for r in ok)
            tail = (
                f"{_mean([r['metrics']['shd'] for r in ok]):.0f} | {_mean([r['metrics']['auprc'] for r in ok]):.3f} | "
                f"{_mean([r['seconds'] for r in ok]):.0f} | {max(r['peak_rss_mib'] for r in ok):.0f} | {la}"
            )
        else:
            tail = " | | | | "
        out.append(
            f"| {st} | {m} | {cell(st, m, 'cape-learned')} | {cell(st, m, 'cape')} | {cell(st, m, 'cape-screened')} | "
            f"{cell(st, m, 'dagma')} | {cb} | {tail} |"
        )
    return out


def extra(name: str, title: str) -> list[str]:
    path = HERE / name
    if not path.is_file():
        return []
    out = [f"## {title} (`{name}`)", ""]
    for line in path.read_text().splitlines():
        r = json.loads(line)
        out.append("- " + ", ".join(f"{k}: {v}" for k, v in r.items() if k not in ("machine", "command", "warnings")))
        out.append(f"  - command: `{r.get('command')}`; machine: {r.get('machine')}")
    return out


def main() -> None:
    print("<!-- made by: " + common.command() + " -->")
    print()
    for block in (small_sets(), suite_rows(), extra("learned_ablation.jsonl", "Single learned-algorithm fits"),
                  extra("user_counts.jsonl", "User-sized counts, `cape run` defaults"),
                  extra("../sdcd/results.jsonl", "SDCD itself (its own virtual environment, `../sdcd/`)")):
        if block:
            print("\n".join(block))
            print()


if __name__ == "__main__":
    main()
