"""Does CAPE help, and at which angle scale?

Runs the main job's train stage (``cape_pipeline.pipeline.run_pipeline``; Step I cached in the
work directory, so every variant uses the same DAG) on pbmc68k_reduced with its workflow config,
once per angle variant, over seeds 0 … n−1. A seed fixes the split and the initialization, so
within a variant every arm is paired with ``none`` seed by seed (``default``, its earlier name,
in the records written before). Variants:

* ``paper``: φ = (π/4)·e (the default), arms ``cape`` and ``cape-learned-scale`` (a learned
  factor per head, starting at 1) against ``none``;
* ``scale4``: ``encode.scale = π`` (4× the paper's c), ``cape`` against ``none``;
* ``geometric``: ``encode.frequencies = geometric`` (ω_i from 1 to 100 over the pairs),
  ``cape`` against ``none``.

Per variant it appends one JSON line to ``variants.jsonl``: the |φ| quantiles of the angle table,
every run's metrics, the learned head scales, how much the annotation models of seeds 0–2 move
when their angles are zeroed (``TrainedModel.angle_ablation``), the train stage's wall time and
the load. ``variants_report.py`` turns the lines into the forest plot, the power table and the
helps / hurts / cannot-tell table of ``RESULTS.md``.

Usage::

    python benchmarks/cape_value/variants.py --seeds 10 [--variant paper --variant scale4 ...]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "scale"))
from _record import append, provenance  # noqa: E402

OUT = HERE / "variants.jsonl"
VARIANTS = {
    "paper": ({}, ["cape-learned-scale", "none"]),
    "scale4": ({"scale": math.pi}, ["none"]),
    "geometric": ({"frequencies": "geometric", "frequency_range": 100.0}, ["none"]),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--variant", action="append", choices=sorted(VARIANTS), help="default: all")
    ap.add_argument("--workdir", default="/tmp/cape_value_work")
    a = ap.parse_args()

    from cape_pipeline.pipeline.config import merge, read_config_file
    from cape_pipeline.pipeline.runner import run_pipeline
    from cape_pipeline.report.build import angle_quantiles
    from cape_pipeline.report.power import arm_of

    base = read_config_file(ROOT / "workflows" / "pbmc68k_reduced.yaml")
    for name in a.variant or list(VARIANTS):
        encode, compare = VARIANTS[name]
        overrides = merge(base, {"encode": encode, "train": {"compare": compare, "n_seeds": a.seeds}})
        load0 = os.getloadavg()
        t0 = time.perf_counter()
        res = run_pipeline("pbmc68k_reduced", workdir=a.workdir, overrides=overrides, until="train")
        wall = time.perf_counter() - t0
        enc = res.output("encode").encodings
        train = res.output("train")
        adata = res.output("preprocess")
        runs, ablation, scales = [], [], []
        for r in train.results:
            runs.append({"task": r.task, "arm": arm_of(r.params), "seed": int(r.params["seed"]),
                         "metrics": {k: float(v) for k, v in r.metrics.items()}})
            pe = getattr(getattr(r.model, "backbone", None), "pe", None) if r.model is not None else None
            if pe is not None and hasattr(pe, "head_scales") and r.task == "annotation":
                scales.append({"seed": int(r.params["seed"]), "head_scales": [float(s) for s in pe.head_scales()]})
            if (r.task == "annotation" and r.model is not None and int(r.params["seed"]) < 3
                    and hasattr(pe, "angles")):
                abl = r.model.angle_ablation(adata)
                ablation.append({"arm": arm_of(r.params), "seed": int(r.params["seed"]), **abl})
        rec_train = next(x for x in res.records if x.stage == "train")
        rec = {
            "variant": name, "encode": encode, "arms": list(train.arms), "seeds": a.seeds,
            "angle_quantiles": angle_quantiles(enc.angles),
            "angle_quantiles_off_origin": angle_quantiles(enc.angles, (abs(enc.poincare).max(axis=1) > 0)),
            "runs": runs, "ablation": ablation, "learned_scales": scales,
            "train_seconds": round(rec_train.seconds, 1), "cached": rec_train.cached, "wall_seconds": round(wall, 1),
            "plan": train.plan, **provenance(load0),
        }
        append(OUT, rec)
        print(name, "train", rec["train_seconds"], "s", "load", rec["load_before"], flush=True)


if __name__ == "__main__":
    main()
