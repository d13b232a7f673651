"""Summarize benchmarks/peers: one row per arm, mean ± sd over the seeds that ran,
seconds per run and its ratio to the dot-product `cape` arm of the same seed (same process
sequence, so the same load), and the paired difference to `none` over the seeds (the arm was
called `default` in the rows written before it was renamed: a table of those rows pairs with
`default`, a table holding both reads `default` as `none`).

Tables:
1. pbmc68k_reduced annotation, the CAPE angles of the current Step I (125 edges, max |φ| 0.43):
   `results_peers_pbmc*` (b6d26f2, 2026-11-23), with the angle-free arms (`default`, `learned-small-norm`,
   `rank-value`) of `results_pe` (12a1aa4, 2026-11-23; they do not read the angles and reproduce exactly).
2. The simulated perturbation task (true-DAG angles), every arm: `results_perturbation`.
3. The pbmc table of 12a1aa4 (angles of an older Step I, max |φ| 0.003): `results_pe`,
   `results_pe_corr`, `results_attention*`.

Every run's rows are in ``runs.jsonl``, tagged with ``src``: the ``benchmarks/tasks/run.py --out``
folder they were written to (``results_pe``, ``results_peers_pbmc``, …). After new runs,
``--gather`` folds each ``results_*/raw.jsonl`` into it (replacing that folder's rows); the
folders and their logs are scratch, not tracked.

Usage: python benchmarks/peers/summarize.py [--gather] > benchmarks/peers/RESULTS_table.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs.jsonl"


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def gather() -> None:
    """Fold every ``results_*/raw.jsonl`` into :data:`RUNS`, in place of the rows of that folder."""
    rows = _read(RUNS)
    for f in sorted(HERE.glob("results_*/raw.jsonl")):
        src = f.parent.name
        rows = [r for r in rows if r["src"] != src] + [{"src": src, **r} for r in _read(f)]
    tmp = RUNS.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(RUNS)


def load(*subs: str, tag: dict[str, str] | None = None) -> list[dict]:
    """The rows of the runs written to ``subs`` (in that order), arms renamed by ``tag``."""
    runs = _read(RUNS)
    rows = []
    for sub in subs:
        for r in runs:
            if r["src"] == sub:
                rows.append({**r, "pe": f"{r['pe']} {tag[sub]}"} if tag and sub in tag else dict(r))
    return rows


def null_arm(rows: list[dict]) -> str:
    """The arm the table pairs every other with: ``none``, or ``default`` where the rows were all
    written before it was renamed; with rows of both names, ``default`` rows become ``none``."""
    if not any(r["pe"] == "none" for r in rows):
        return "default" if any(r["pe"] == "default" for r in rows) else "none"
    for r in rows:
        if r["pe"] == "default":
            r["pe"] = "none"
    return "none"


def ms(v: list[float], digits: int = 3) -> str:
    a = np.asarray(v, dtype=float)
    return f"{a.mean():.{digits}f} ± {a.std(ddof=1):.{digits}f}" if a.size > 1 else f"{a.mean():.{digits}f}"


def paired(rows: list[dict], arm: str, metric: str, base: str = "none") -> str:
    """Mean paired difference arm − base over the shared seeds, with its 95 % t-interval."""
    a = {r["seed"]: r[metric] for r in rows if r["pe"] == arm}
    b = {r["seed"]: r[metric] for r in rows if r["pe"] == base}
    seeds = sorted(set(a) & set(b))
    if arm == base or len(seeds) < 2:
        return ""
    d = np.array([a[s] - b[s] for s in seeds])
    half = stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
    return f"{d.mean():+.3f} [{d.mean() - half:+.3f}, {d.mean() + half:+.3f}]"


def table(rows: list[dict], metrics: list[tuple[str, str]], digits: int = 3, n_paired: int = 1) -> None:
    # the time ratio only within one process sequence (same load): results_peers_pbmc* share the dot
    # `cape` rows of results_peers_pbmc; the older (12a1aa4) dirs theirs
    group = {"results_peers_pbmc_penumbral": "results_peers_pbmc", "results_peers_pbmc_umbral": "results_peers_pbmc",
             "results_peers_pbmc_apectrl": "results_peers_pbmc",
             "results_pe_corr": "results_pe", "results_attention": "results_pe", "results_attention_s1": "results_pe",
             "results_attention_s2": "results_pe"}
    src = {id(r): group.get(r["src"], r["src"]) for r in rows}
    dot = {(src[id(r)], r["seed"]): r["seconds"] for r in rows if r["pe"] == "cape"}
    head = " | ".join(name for _, name in metrics)
    pm = metrics[:n_paired]
    base = null_arm(rows)
    phead = " | ".join(f"{name} − {base} (95 % CI)" for _, name in pm)
    print(f"| arm | seeds | {head} | {phead} | s per run | × dot `cape` (same seed) | load1 |")
    print("|---|---|" + "---|" * (len(metrics) + n_paired) + "---|---|---|")
    for arm in dict.fromkeys(r["pe"] for r in rows):
        rs = [r for r in rows if r["pe"] == arm]
        vals = " | ".join(ms([r[k] for r in rs], digits) for k, _ in metrics)
        ratio = [r["seconds"] / dot[src[id(r)], r["seed"]] for r in rs if (src[id(r)], r["seed"]) in dot]
        rtxt = f"{np.mean(ratio):.2f}" if ratio else ""
        pvals = " | ".join(paired(rows, arm, k, base) for k, _ in pm)
        print(f"| `{arm}` | {','.join(str(r['seed']) for r in rs)} | {vals} | {pvals} | "
              f"{np.mean([r['seconds'] for r in rs]):.0f} | {rtxt} | {np.mean([r['load1'] for r in rs]):.1f} |")


ANNOT = [("macro_f1", "macro-F1"), ("accuracy", "accuracy")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gather", action="store_true", help="first fold results_*/raw.jsonl into runs.jsonl")
    if ap.parse_args().gather:
        gather()
    print("## 1. pbmc68k_reduced annotation, current Step I angles (b6d26f2, 2026-11-23)\n")
    pbmc = [r for r in load("results_pe") if r["pe"] in ("none", "default", "learned-small-norm", "rank-value")]
    pbmc += load("results_peers_pbmc", "results_peers_pbmc_penumbral", "results_peers_pbmc_umbral", "results_peers_pbmc_apectrl",
                 tag={"results_peers_pbmc_apectrl": "[control: empty forest, every gene a root]"})
    table(pbmc, ANNOT, n_paired=2)
    ref = [r for r in pbmc if "reference_macro_f1" in r]
    if ref:
        print(f"\nlogistic regression on the same splits: macro-F1 {ms([r['reference_macro_f1'] for r in ref])}, "
              f"accuracy {ms([r['reference_accuracy'] for r in ref])}")
    print("\n## 2. Simulated perturbation (40 genes, true-DAG angles), MSE on the top-20 DE genes (lower is better)\n")
    pert = load("results_perturbation")
    table(pert, [("mse_top20", "MSE all"), ("mse_top20_single", "MSE single"), ("mse_top20_double", "MSE double"),
                 ("pearson_delta", "Pearson Δ")], digits=4)
    if pert:
        print(f"\nreferences on the same split: no change (control mean) {pert[0]['reference_ctrl_mse_top20']:.4f}, "
              f"linear model {pert[0]['reference_linear_mse_top20']:.4f}")
    print("\n## 3. Commit 12a1aa4, 2026-11-23: pbmc68k_reduced annotation, angles of an older Step I (max |φ| 0.003)\n")
    old = load("results_pe", "results_pe_corr", "results_attention", "results_attention_s1", "results_attention_s2",
               tag={"results_pe_corr": "[correlation-graph angles]"})
    table(old, ANNOT, n_paired=2)


if __name__ == "__main__":
    main()
