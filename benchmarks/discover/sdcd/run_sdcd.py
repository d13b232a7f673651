"""Fit the published SDCD (PyPI sdcd==0.1.4) on one data file. Run with the SDCD venv:

    OMP_NUM_THREADS=1 nice -n 5 benchmarks/discover/sdcd/.venv/bin/python \
        benchmarks/discover/sdcd/run_sdcd.py --d 100 --seed 0

Uses SDCD's own defaults everywhere (SDCD() and .train(dataset) with no kwargs; SDCD itself
holds out 20 % of the rows for its early stopping and seeds torch/numpy with 0).
Writes data/pred_d{d}_s{seed}.npz (pred: thresholded DAG, cont: unthresholded adjacency)
and data/pred_d{d}_s{seed}.json (seconds, call, versions, load averages).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

import argparse
import importlib.metadata as md
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

torch.set_num_threads(1)

from sdcd.models import SDCD  # noqa: E402
from sdcd.utils import create_intervention_dataset  # noqa: E402

HERE = Path(__file__).resolve().parent
CALL = (
    "X_df = pd.DataFrame(x, columns=[str(i) for i in range(d)]); "
    "X_df['perturbation_label'] = 'obs'; "
    "dataset = sdcd.utils.create_intervention_dataset(X_df); "
    "model = sdcd.models.SDCD(); model.train(dataset); "
    "pred = model.get_adjacency_matrix(threshold=True); "
    "cont = model.get_adjacency_matrix(threshold=False)"
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    data = np.load(HERE / "data" / f"sdcd_gen_d{a.d}_s{a.seed}.npz")
    x = data["x"]
    d = x.shape[1]
    X_df = pd.DataFrame(x, columns=[str(i) for i in range(d)])
    X_df["perturbation_label"] = "obs"  # observational only: every row gets the all-ones mask
    dataset = create_intervention_dataset(X_df)
    assert int(dataset.tensors[1].sum()) == x.shape[0] * d, "expected no interventions"

    load_before = os.getloadavg()
    t0 = time.perf_counter()
    model = SDCD()
    model.train(dataset)
    seconds = time.perf_counter() - t0
    load_after = os.getloadavg()

    pred = np.asarray(model.get_adjacency_matrix(threshold=True)).astype(np.int8)
    cont = np.asarray(model.get_adjacency_matrix(threshold=False), dtype=np.float32)
    np.savez_compressed(HERE / "data" / f"pred_d{a.d}_s{a.seed}.npz", pred=pred, cont=cont)
    meta = {
        "d": a.d,
        "seed": a.seed,
        "n": int(x.shape[0]),
        "seconds": seconds,
        "sdcd_internal_train_seconds": getattr(model, "_train_runtime_in_sec", None),
        "load_before": load_before,
        "load_after": load_after,
        "call": CALL,
        "sdcd": md.version("sdcd"),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "command": "OMP_NUM_THREADS=1 nice -n 5 " + " ".join([sys.executable, *sys.argv]),
    }
    (HERE / "data" / f"pred_d{a.d}_s{a.seed}.json").write_text(json.dumps(meta, indent=1))
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
