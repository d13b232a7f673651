"""CAPE at scGPT's width against ``none`` on the simulated Norman-size perturbation task.

The question: ``benchmarks/cape_value/RESULTS.md`` reads **cannot tell** for full CAPE on Step I's
DAG against the null on this task at D = 32, 4 heads, 2 layers. Does that hold at the size of
paper 000 / scGPT, D = 512, 12 layers, 8 heads? Two arms, paired by seed (3 seeds):

* ``none``: no positional encoding on top of the scGPT-style backbone's gene identity (identity
  kept, as in every arm of ``benchmarks/tasks/run.py``). With the identity kept this is the same
  model as the perturbation task's ``default`` arm, the null of the RESULTS rows (``DefaultPE``
  and ``NoPE`` add nothing, and the backbone keeps its identity for both).
* ``cape [discover]``: full CAPE (rotary, the hyperbolic embedding of Step I's DAG, the paper's
  map φ = (π/4)·e), as ``cape [discover]`` there, with d = D/2 = 256 angles per gene.

**Task.** ``sim_perturbation_norman`` (``benchmarks/tasks/_data.py``: 200 genes, 1,000 control
cells, 105 single and 131 double perturbations of 20 cells each, 5,720 cells), GEARS's
unseen-gene split (``split="gears"``; the seed draws the split, the initialization and the batch
order). The rest is the task's protocol (``cape_pipeline.tasks.perturbation``): masked-value
pretraining on the control and training cells, then fine-tuning with early stopping on 15 % of
the training conditions (the best validation epoch is kept). The metric is the MSE on the top-20
DE genes of the unseen conditions. The "no change" (``reference_ctrl_*``) and linear-model
references are computed inside every run.

**Budget.** What differs from the D = 32 rows besides the size:

* ``precision="bf16"``: ``torch.autocast`` around the forward passes; the weights, gradients
  and AdamW stay float32.
* ``batch_size`` 128 (the task default is 32). At this size a step is bound by kernel launches,
  so a larger batch costs little more per step.
* :data:`PRETRAIN_EPOCHS` pretraining and :data:`FINETUNE_EPOCHS` fine-tuning epochs, fixed here:
  no step caps, no timer. Early stopping cannot end 8 epochs (patience 8). That is about 17,600
  pretraining cells in 140 steps and 28,000 fine-tuning pairs in 224 steps per run. At D = 32 it
  was ≤ 19,200 cells and ≤ 32,000 pairs (≤ 600 and ≤ 1,000 steps of 32).
* Learning rates, warm-up, weight decay and patience are the task defaults (lr 2e-3,
  pretraining lr 1e-3), not retuned for the wider model. Every run records its loss and
  validation curves, so the reader can judge whether the model trained; the "no change"
  reference shows whether it learned anything.

**Estimated time** on an H200: about 22 s per run, so 6 runs take about 135 s, plus 15–20 s of
start-up. A step is bound by kernel launches. One training step at this size dispatches 4.0×
(cape) / 3.8× (none) the ops of the default-size throughput step of ``RESULTS.md`` §3, which
took 9.0 / 8.1 ms there; that gives about 36 / 31 ms per step. The step's 6.2 TFLOP take about
26 ms at the 237 TFLOP/s of the scGPT-size bf16 step. So 364 steps take about 14 s. Validation
(26 conditions × 256 control cells) costs about 0.6 s per epoch, and the test predictions about
1.7 s.

**Step I's DAG and its angles** are read from :data:`ANGLES`, committed next to this script.
They were made on the CPU by ``--make-angles``, which runs ``benchmarks/tasks/angles.py OUT 512
sim_perturbation_norman discover default hyperbolic paper``, the ``STEP_I`` call of
``benchmarks/cape_value/tasks.py``. It is the same 316-edge graph as the ``discover`` row there.
The angles are not made on the device because Step I took 503 s and Step II (d = 256) 380 s on a
shared 2-core CPU. ``--dry`` runs at D = 32 and takes the first 16 of the 256 angle columns: a
toy input that exercises the code path, not CAPE's angles at that width.

**Output.** ``OUT/perturb_width.jsonl`` gets one line per run as it finishes: arm, seed, every
metric of the task with its references, seconds, epochs, first and last losses, the curves,
peak GPU memory, the torch version, the device name and the commit (``$CAPE_COMMIT`` when
set). A final ``"summary"`` line has the paired differences cape − none per seed and metric,
their mean, the 95 % t-interval (scipy), the paired t-test's p and the minimum detectable
effect (``cape_pipeline.report.power.arm_differences``, as in ``RESULTS.md``). Runs go seed by
seed (``none`` first, then ``cape``), so a killed call leaves whole pairs, and
``--summarize`` adds the summary line afterwards. Progress lines are flushed.

Usage (from the repository root)::

    python benchmarks/gpu/perturb_width.py --out OUT               # on the GPU (--device cuda)
    python benchmarks/gpu/perturb_width.py --out /tmp/pw --dry     # toy width, bf16 on the CPU, under a minute
    python benchmarks/gpu/perturb_width.py --make-angles [NPZ]     # rewrite ANGLES (from angles.py's NPZ, or run it)
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "tasks"))  # _data.py: the benchmark's data sets

DATASET = "sim_perturbation_norman"
ANGLES = HERE / "perturb_width_angles.npz"
"""CAPE's angles (d = 256, float32: the model's dtype) of Step I's DAG on ``sim_perturbation_norman``,
with the DAG's edges and how they were made; written by ``--make-angles``."""
ANGLES_CALL = ("discover", "default", "hyperbolic", "paper")
"""``angles.py``'s arguments after OUT D DATASET: Step I's graph with its default epochs, as
``benchmarks/cape_value/tasks.py``'s ``STEP_I`` (its hyperbolic embedding and the paper's map)."""
ARMS = (("none", ""), ("cape", "discover"))
"""(pe, graph) of the two arms; the first is the baseline."""
WIDTH = {"d_model": 512, "n_layers": 12, "n_heads": 8}
"""scGPT's size (paper 000's backbone)."""
DRY_WIDTH = {"d_model": 32, "n_layers": 2, "n_heads": 4}
PRETRAIN_EPOCHS, FINETUNE_EPOCHS, BATCH_SIZE = 4, 8, 128
"""The budget of every run (module docstring: how it was sized)."""
DRY = {"batch_size": 16, "pretrain_max_steps": 8, "finetune_max_steps": 8, "n_eval_ctrl": 32}
"""``--dry``'s task settings on top of one epoch of each (and one torch thread: on a shared 2-core
machine two threads under load made the bf16 CPU runs 30 times slower)."""
PRIMARY = ("mse_top20_single", "mse_top20_double", "mse_top20", "pearson_delta")
"""The metrics printed at the end (all are in the summary line)."""
READING = {"better": "helps", "worse": "hurts", "negligible": "no difference (|mean| < 0.001)"}
"""``paired_differences``' verdicts as ``benchmarks/cape_value/tasks_report.py`` reads them (else: cannot tell)."""


def say(*parts: Any) -> None:
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


def num(v: Any) -> str:
    return "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.4f}"


def commit(paths: tuple[str, ...] = ("cape_pipeline", "benchmarks/gpu")) -> str:
    """``$CAPE_COMMIT`` when set (a copied tree's git can name another commit: one device copy
    said b3beea7 at 5bc4746), else the short commit of this checkout (``+dirty`` with uncommitted
    changes under ``paths``), ``?`` without git."""
    if os.environ.get("CAPE_COMMIT"):
        return os.environ["CAPE_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", *paths],
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"
    if head.returncode:
        return "?"
    return head.stdout.strip() + ("+dirty" if dirty else "")


def make_angles(path: Path, source: Path | None) -> None:
    """Write :data:`ANGLES` from ``angles.py``'s output for Step I's graph at d = 256 (``source``),
    or run ``angles.py`` first (Step I, then Step II; about 15 minutes on a 2-core CPU)."""
    d = WIDTH["d_model"] // 2
    if source is None:
        tmp = Path(tempfile.mkdtemp(prefix="perturb_width_"))
        cmd = [sys.executable, "angles.py", str(tmp), str(WIDTH["d_model"]), DATASET, *ANGLES_CALL]
        say("+", shlex.join(cmd))
        subprocess.run(cmd, cwd=ROOT / "benchmarks" / "tasks", check=True)
        source = tmp / f"angles_{DATASET}_discover_d{d}.npz"
    z = np.load(source, allow_pickle=False)
    if z["angles"].shape[1] != d:
        raise SystemExit(f"{source}: angles of width {z['angles'].shape[1]}, expected d = {d}")
    np.savez_compressed(
        path, angles=z["angles"].astype(np.float32), var_names=z["var_names"], edge_src=z["edge_src"].astype(np.int32),
        edge_dst=z["edge_dst"].astype(np.int32), edge_weight=z["edge_weight"], graph_s=z["graph_s"], embed_s=z["embed_s"],
        made_by=np.asarray(f"benchmarks/tasks/angles.py OUT {WIDTH['d_model']} {DATASET} {' '.join(ANGLES_CALL)}"),
        commit=np.asarray(commit(("cape_pipeline/causal", "cape_pipeline/hyperbolic", "cape_pipeline/encodings"))),
        machine=np.asarray(f"{platform.machine()}, {os.cpu_count()} cores"))
    say(f"{path}: {z['angles'].shape} angles, {z['edge_src'].size} edges (Step I {float(z['graph_s']):.0f} s, "
        f"Step II {float(z['embed_s']):.0f} s, from {source})")


def cape_angles(adata, d: int, path: Path, dry: bool) -> tuple[np.ndarray, dict[str, Any]]:
    """CAPE's angles of Step I's DAG from ``path`` (:data:`ANGLES`) aligned to ``adata.var_names``,
    ``(M, d)``; and a description of the graph (edges, precision / recall against the true DAG, |φ|).

    ``dry`` with ``d`` below the stored width takes the first ``d`` columns: a toy input that runs
    the code path, not CAPE's angles at that width."""
    z = np.load(path, allow_pickle=False)
    names = pd.Index(z["var_names"].astype(str))
    pos = names.get_indexer(adata.var_names.astype(str))
    if (pos < 0).any():
        raise SystemExit(f"{path}: genes of the data missing, e.g. {list(adata.var_names[pos < 0])[:5]}")
    angles = z["angles"][pos]
    if angles.shape[1] != d and not (dry and angles.shape[1] > d):
        raise SystemExit(f"{path}: angles of width {angles.shape[1]}, the model needs d = D/2 = {d}")
    angles = angles[:, :d]
    to_data = adata.var_names.astype(str).get_indexer(names)  # file order → data order
    found = {(int(to_data[i]), int(to_data[j])) for i, j in zip(z["edge_src"], z["edge_dst"], strict=True)}
    true = sp.coo_array(adata.varp["true_dag"])
    t_edges = {(int(i), int(j)) for i, j in zip(true.row, true.col, strict=True)}
    hit = len(found & t_edges)
    a = np.abs(angles)
    info = {"angles_file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
            "made_by": str(z["made_by"]), "made_at": str(z["commit"]), "edges": len(found), "true_edges": len(t_edges),
            "precision": hit / max(len(found), 1), "recall": hit / max(len(t_edges), 1), "d": d,
            "step1_s": round(float(z["graph_s"]), 1), "step2_s": round(float(z["embed_s"]), 1),
            "phi_median": float(np.median(a)), "phi_q90": float(np.quantile(a, 0.9)), "phi_max": float(a.max()),
            "features_at_origin": int((a.sum(1) < 1e-9).sum())}
    return angles, info


def run_config(a: argparse.Namespace, width: dict[str, int]) -> dict[str, Any]:
    """The perturbation task config of every run (``run_task(..., config=)``)."""
    cfg = {"model": {**width, "identity": True}, "split": "gears", "precision": a.precision, "batch_size": a.batch_size,
           "pretrain_epochs": a.pretrain_epochs, "finetune_epochs": a.epochs, "pretrain_max_steps": 0, "finetune_max_steps": 0}
    if a.lr is not None:
        cfg["lr"] = a.lr
    if a.pretrain_lr is not None:
        cfg["pretrain_lr"] = a.pretrain_lr
    if a.dry:
        cfg.update({k: v for k, v in DRY.items() if k != "batch_size"})
    return cfg


def one_run(adata, pe: str, graph: str, seed: int, angles, cfg: dict, device: str, env: dict) -> dict[str, Any]:
    """One (arm, seed) run of the perturbation task; its JSON record."""
    import torch

    from cape_pipeline.tasks import run_task

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    res = run_task("perturbation", adata, pe=pe, angles=angles if graph else None, backbone="scgpt", config=cfg,
                   label_key="condition", seed=seed, device=device, progress=True)
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    pre, fine, val = (res.curves.get(k, []) for k in ("pretrain_loss", "finetune_loss", "val_score"))
    return {
        "arm": f"{pe} [{graph}]" if graph else pe, "pe": pe, "graph": graph, "seed": seed, "dataset": DATASET,
        **res.metrics,
        "seconds": round(res.seconds, 2), "wall_s": round(wall, 2), "cells_per_second": round(res.cells_per_second, 1),
        "pretrain_epochs": len(pre), "finetune_epochs": len(fine), "best_epoch": res.params.get("best_epoch"),
        "stopped_early": res.params.get("stopped_early"),
        "pretrain_loss_first": pre[0] if pre else None, "pretrain_loss_last": pre[-1] if pre else None,
        "finetune_loss_first": fine[0] if fine else None, "finetune_loss_last": fine[-1] if fine else None,
        "curves": {"pretrain_loss": pre, "finetune_loss": fine, "val_score": val},
        "n_test_conditions": len(res.params.get("test_conditions", [])),
        "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else None,
        "config": {k: v for k, v in res.params["config"].items() if k != "model"}, "model": res.params["model_config"],
        **env,
    }


def summary(rows: list[dict], seeds_asked: list[int], seconds: float) -> dict[str, Any]:
    """The paired cape − none differences (``arm_differences``: scipy's paired t-interval, MDE at power 0.8)."""
    from types import SimpleNamespace

    from scipy import stats

    from cape_pipeline.report.power import arm_differences, paired_differences

    base, arm = ARMS[0][0], f"{ARMS[1][0]} [{ARMS[1][1]}]"
    results = [SimpleNamespace(task="perturbation", params={"arm": r["arm"], "seed": r["seed"]},
                               metrics={k: v for k, v in r.items() if k.startswith(("mse_top", "pearson_delta"))
                                        and isinstance(v, float) and math.isfinite(v)}) for r in rows]
    try:
        rows_d = arm_differences(results, base)
    except ImportError:  # statsmodels (the MDE) missing: scipy's intervals alone
        rows_d = [{**r, "arm": arm, "mde": None} for r in paired_differences(results, arm, base)]
    diffs = []
    for d in rows_d:
        seeds = sorted(r["seed"] for r in rows if r["arm"] == d["arm"] and any(
            q["arm"] == base and q["seed"] == r["seed"] for q in rows))
        p = float(stats.ttest_1samp(d["differences"], 0.0).pvalue) if d["n"] > 1 and d["sd"] else None
        reading = READING.get(d["verdict"], "cannot tell")
        diffs.append({"metric": d["metric"], "primary": d["metric"] in PRIMARY, "seeds": seeds,
                      "differences": d["differences"], "n": d["n"], "mean": d["mean"], "sd": d["sd"],
                      "ci95_low": d["ci_low"], "ci95_high": d["ci_high"], "p": p, "mde": d["mde"],
                      "lower_is_better": not d["higher_is_better"], "reading": reading})
    means = {}
    for name in dict.fromkeys(r["arm"] for r in rows):
        sub = [r for r in rows if r["arm"] == name]
        keys = [k for k in sub[0] if k.startswith(("mse_top20", "pearson_delta", "reference_ctrl_mse_top20", "reference_linear_mse_top20"))]
        means[name] = {k: float(np.mean([r[k] for r in sub if k in r])) for k in keys} | {"runs": len(sub)}
    return {"summary": True, "comparison": f"{arm} - {base}", "seeds_asked": seeds_asked,
            "runs": len(rows), "seconds_total": round(seconds, 1), "differences": diffs, "means": means}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="folder of perturb_width.jsonl (appended to)")
    ap.add_argument("--device", default=None, help="torch device (default cuda; --dry: cpu)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--epochs", type=int, default=None, help=f"fine-tuning epochs (default {FINETUNE_EPOCHS}; --dry 1)")
    ap.add_argument("--pretrain-epochs", type=int, default=None, help=f"pretraining epochs (default {PRETRAIN_EPOCHS}; --dry 1)")
    ap.add_argument("--batch-size", type=int, default=None, help=f"default {BATCH_SIZE}; --dry {DRY['batch_size']}")
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--lr", type=float, default=None, help="fine-tuning lr (default: the task's, 2e-3)")
    ap.add_argument("--pretrain-lr", type=float, default=None, help="pretraining lr (default: the task's, 1e-3)")
    ap.add_argument("--angles", type=Path, default=ANGLES, help="CAPE's angles of Step I's DAG (--make-angles)")
    ap.add_argument("--dry", action="store_true",
                    help=f"toy width {DRY_WIDTH}, bf16 on the CPU, 1 epoch of each capped by {DRY}: every code path")
    ap.add_argument("--summarize", action="store_true",
                    help="run nothing: append the summary of the run lines already in OUT/perturb_width.jsonl (after a killed call)")
    ap.add_argument("--make-angles", nargs="?", type=Path, const=Path("-"), default=None, metavar="NPZ",
                    help="write --angles from angles.py's output NPZ (d = 256), or without NPZ run angles.py first; then stop")
    a = ap.parse_args()
    t_start = time.perf_counter()
    if a.make_angles is not None:
        make_angles(a.angles, None if str(a.make_angles) == "-" else a.make_angles)
        return
    if a.out is None:
        ap.error("--out is required")
    if a.summarize:
        lines = [json.loads(x) for x in (a.out / "perturb_width.jsonl").read_text().splitlines() if x.strip()]
        runs = list({(r["arm"], r["seed"]): r for r in lines if not r.get("summary")}.values())  # the last of each
        finish(a.out / "perturb_width.jsonl", runs, sorted({r["seed"] for r in runs}), 0.0, {"summarized_later": True})
        return
    from _data import BENCH_DATA

    adata = BENCH_DATA[DATASET]()
    a.device = a.device or ("cpu" if a.dry else "cuda")
    a.epochs = a.epochs if a.epochs is not None else (1 if a.dry else FINETUNE_EPOCHS)
    a.pretrain_epochs = a.pretrain_epochs if a.pretrain_epochs is not None else (1 if a.dry else PRETRAIN_EPOCHS)
    a.batch_size = a.batch_size or (DRY["batch_size"] if a.dry else BATCH_SIZE)
    width = DRY_WIDTH if a.dry else WIDTH
    import torch

    if a.dry:
        torch.set_num_threads(1)
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stdout)
    logging.getLogger("cape_pipeline.models.loops").setLevel(logging.INFO)  # the loss of every epoch
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here (use --dry, or --device cpu)")
    a.out.mkdir(parents=True, exist_ok=True)
    out = a.out / "perturb_width.jsonl"
    dev_name = torch.cuda.get_device_name(a.device) if a.device.startswith("cuda") else (platform.processor() or platform.machine())
    env = {"torch": torch.__version__, "device": a.device, "device_name": dev_name, "commit": commit(),
           "dry": a.dry, "command": "python " + shlex.join(sys.argv)}
    say(f"perturb_width: {DATASET} {adata.n_obs}x{adata.n_vars}, width {width}, arms {[p for p, _ in ARMS]}, seeds {a.seeds}, "
        f"{a.precision}, batch {a.batch_size}, epochs {a.pretrain_epochs} + {a.epochs}, device {a.device} ({dev_name}), "
        f"torch {torch.__version__}, commit {env['commit']}")
    angles, graph = cape_angles(adata, width["d_model"] // 2, a.angles, a.dry)
    say(f"Step I graph: {graph['edges']} edges (precision {graph['precision']:.2f}, recall {graph['recall']:.2f} against "
        f"the true DAG's {graph['true_edges']}); angles d = {graph['d']}, |phi| median {graph['phi_median']:.3f} "
        f"max {graph['phi_max']:.3f} (made by {graph['made_by']} at {graph['made_at']})")
    env["cape_angles"] = graph
    if a.device.startswith("cuda"):  # CUDA context and the bf16 GEMM kernels before the first timed run
        w = torch.randn(256, 256, device=a.device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            (w @ w).sum().item()
    cfg = run_config(a, width)
    rows: list[dict] = []
    for seed in a.seeds:
        for pe, graph_tag in ARMS:
            rec = one_run(adata, pe, graph_tag, seed, angles, cfg, a.device, env)
            rows.append(rec)
            with out.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            say(f"{rec['arm']:<16} seed {seed}: MSE top-20 single {num(rec.get('mse_top20_single'))} "
                f"double {num(rec.get('mse_top20_double'))} (no change {num(rec.get('reference_ctrl_mse_top20_single'))} / "
                f"{num(rec.get('reference_ctrl_mse_top20_double'))}); loss pretrain {num(rec['pretrain_loss_first'])}→"
                f"{num(rec['pretrain_loss_last'])}, finetune {num(rec['finetune_loss_first'])}→{num(rec['finetune_loss_last'])}; "
                f"best epoch {rec['best_epoch']}/{rec['finetune_epochs']}; {rec['wall_s']:.1f} s; peak {rec['peak_gpu_mib']} MiB")
    finish(out, rows, a.seeds, time.perf_counter() - t_start, {
        **{k: env[k] for k in ("torch", "device", "device_name", "commit", "dry", "command", "cape_angles")}, "config": cfg})


def finish(out: Path, rows: list[dict], seeds: list[int], seconds: float, extra: dict[str, Any]) -> None:
    """Append the summary line of ``rows`` to ``out`` and print its main rows."""
    summ = summary(rows, seeds, seconds) | extra
    with out.open("a") as fh:
        fh.write(json.dumps(summ) + "\n")
    for d in summ["differences"]:
        if d["primary"]:
            ci = "–" if d["ci95_low"] is None else f"[{d['ci95_low']:+.4f}, {d['ci95_high']:+.4f}]"
            say(f"cape - none {d['metric']:<18} mean {d['mean']:+.4f} 95% CI {ci} over seeds {d['seeds']}: {d['reading']}")
    say(f"summary of {len(rows)} runs ({seconds:.0f} s) → {out}")


if __name__ == "__main__":
    main()
