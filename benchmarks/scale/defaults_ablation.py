"""Does a cheaper train-stage setting lower the metrics beyond the seed noise?

Runs the main job's train stage (``cape_pipeline.pipeline.run_pipeline``; Steps I–III cached in
the work directory, so every setting trains on the same angles) with the arms ``cape`` and
``none`` (the identity alone; the rows of earlier runs name it ``default``) over seeds 0–2, once per setting, and appends one JSON line per (dataset, setting)
to ``defaults_ablation.jsonl``: per task, metric and arm the values per seed, the wall time of
the train stage and the load average. ``defaults_report.py`` turns them into tables.

Datasets: ``pbmc68k_reduced`` (bundled, 700 cells, its workflow config); ``sim1k`` … ``sim20k``
(our ``simulated_counts``: 8 cell types, 15,000 genes up to 3,000 cells and 20,000 above →
2,000 HVGs; annotation saturates at accuracy 1.0 on them); ``simhard3k`` / ``simhard10k``
(the same generator with ``type_effect=0.3``: the cell types sit close, so a logistic
regression on 50 PCs reaches accuracy ≈ 0.76 and k-means ARI ≈ 0.65 at 3,000 cells, and
neither annotation nor clustering starts at its ceiling).

A setting is ``key=value`` pairs separated by commas. A bare key is a train option; a key
with a section (``embed.dim=64``) goes to that section, so Steps II–III rerun for it (Step I
stays cached). The first setting of a call is the reference the others are compared with
(``reference`` in each record): put the old default first.

Usage::

    python benchmarks/scale/defaults_ablation.py --data pbmc68k_reduced --setting max_tokens=512 --setting max_tokens=128
    python benchmarks/scale/defaults_ablation.py --data pbmc68k_reduced --setting embed.dim=64 --setting embed.dim=32
    python benchmarks/scale/defaults_ablation.py --data simhard10k --setting pretrain_max_steps=0,finetune_max_steps=0 --setting ""
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _record import append, provenance  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "defaults_ablation.jsonl"
ROOT = HERE.parents[1]


def source(name: str, work: Path) -> tuple[str, dict]:
    """The source path/name and the overrides of a benchmark dataset."""
    from cape_pipeline.pipeline.config import read_config_file

    if name == "pbmc68k_reduced":
        return name, read_config_file(ROOT / "workflows" / "pbmc68k_reduced.yaml")
    if name.startswith("sim"):
        sizes = {"1k": 1000, "3k": 3000, "10k": 10_000, "20k": 20_000}
        hard = name.startswith("simhard")
        n = sizes.get(name.removeprefix("simhard" if hard else "sim"))
        if n is None:
            raise SystemExit(f"unknown dataset {name}")
        path = work / f"{name}.h5ad"
        if not path.is_file():
            from cape_pipeline.datasets import simulated_counts

            genes = 15_000 if n <= 3000 else 20_000
            simulated_counts(n, genes, seed=0, type_effect=0.3 if hard else 1.0).write_h5ad(path)
        return str(path), {"ingest": {"label_columns": ["cell_type"]}, "embed": {"dim": 32}}
    raise SystemExit(f"unknown dataset {name}")


def parse_setting(text: str) -> dict:
    """``"max_tokens=128,embed.dim=64"`` → ``{"train": {"max_tokens": 128}, "embed": {"dim": 64}}``
    (a bare key is a train option; ints where they parse)."""
    out: dict = {}
    for part in filter(None, text.split(",")):
        k, _, v = part.partition("=")
        section, _, key = k.strip().rpartition(".")
        out.setdefault(section or "train", {})[key] = int(v) if v.strip().lstrip("-").isdigit() else v.strip()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--setting", action="append", required=True, help="train overrides, e.g. max_tokens=128")
    ap.add_argument("--work", default="/tmp/cape_scale_work")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--source", default=None, help="an existing .h5ad of the dataset (its work dir: --workdir)")
    ap.add_argument("--workdir", default=None, help="the cache directory (default WORK/DATA)")
    a = ap.parse_args()

    from cape_pipeline.pipeline.config import merge
    from cape_pipeline.pipeline.runner import run_pipeline
    from cape_pipeline.report.power import arm_of

    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    if a.source is None:
        src, base = source(a.data, work)
    else:  # a simulated-counts file made beforehand
        src, base = a.source, {"ingest": {"label_columns": ["cell_type"]}, "embed": {"dim": 32}}
    cache = Path(a.workdir) if a.workdir else work / a.data
    for setting in a.setting:
        parsed = parse_setting(setting)
        train = {"compare": ["none"], "n_seeds": a.seeds, "save_models": False, **parsed.pop("train", {})}
        overrides = merge(base, {**parsed, "train": train})
        load0 = os.getloadavg()
        t0 = time.perf_counter()
        res = run_pipeline(src, workdir=cache, overrides=overrides, until="train")
        wall = time.perf_counter() - t0
        rec_train = next(r for r in res.records if r.stage == "train")
        out = res.output("train")
        seconds = rec_train.seconds
        if rec_train.cached:  # the time it took when it ran
            seconds = json.loads((rec_train.path / "manifest.json").read_text())["timings"]["seconds"]
        metrics: dict = {}
        for r in out.results:
            for k, v in r.metrics.items():
                metrics.setdefault(r.task, {}).setdefault(k, {}).setdefault(arm_of(r.params), []).append(round(float(v), 5))
        rec = {
            "data": a.data, "setting": setting or "default", "reference": a.setting[0] or "default", "seeds": a.seeds,
            "train_seconds": round(seconds, 1), "cached": rec_train.cached, "wall_seconds": round(wall, 1),
            "plan": out.plan, "metrics": metrics,
            "best_epochs": [r.params.get("best_epoch") for r in out.results if r.task == "annotation"],
            **provenance(load0),
        }
        append(OUT, rec)
        print(json.dumps({k: rec[k] for k in ("data", "setting", "train_seconds", "load_before")}), flush=True)


if __name__ == "__main__":
    main()
