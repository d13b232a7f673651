"""Out-of-core through the pipeline: ``cape run big.parquet --until preprocess`` on a Parquet file
3x a memory cap reads it lazily at ingest (nothing copied into the cache), reloads it lazily and
streams preprocess, within the cap; the ingest key follows the file's content."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anndata as ad
import numpy as np
import pytest

import cape_pipeline.io as cio
from cape_pipeline._lazy import is_lazy
from cape_pipeline.errors import CapeFileError
from cape_pipeline.io import _lazy as io_lazy
from cape_pipeline.pipeline import run_pipeline
from cape_pipeline.pipeline.stages import STAGES
from cape_pipeline.pp import preprocess

_spec = importlib.util.spec_from_file_location(
    "_ooc_helpers", Path(__file__).resolve().parents[1] / "pp" / "test_out_of_core.py"
)
_ooc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ooc)  # the generator of tests/pp/test_out_of_core.py
ROWS, M, N_HV = _ooc.ROWS, _ooc.M, _ooc.N_HV

CAP_MB = 120
"""Extra peak RSS allowed to ``cape run big.parquet`` above the same run on a small file."""
KW = {"min_genes": 200, "min_cells": 3, "n_top_genes": N_HV}
SETS = [f"--set=preprocess.{k}={v}" for k, v in KW.items()] + ["--set=ingest.label_columns=[cell_type]"]

_CHILD = textwrap.dedent(
    """
    import json, sys
    import anndata, dask.array, pyarrow.parquet, scanpy  # noqa: F401  (the same imports in both runs)
    import cape_pipeline.io.readers as readers
    from cape_pipeline import cli

    src, workdir, out, avail_mb, *sets = sys.argv[1:]
    readers._available_memory = lambda: int(avail_mb) << 20  # a machine with this much free memory
    rc = cli.main(["run", src, "--until", "preprocess", "--workdir", workdir, *sets])
    hwm = next(int(x.split()[1]) / 1024 for x in open("/proc/self/status") if x.startswith("VmHWM:"))
    json.dump({"rc": rc, "peak": hwm}, open(out, "w"))
    """
)


def _cape_run(src: Path, workdir: Path, out: Path, *sets: str) -> dict:
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(src), str(workdir), str(out), str(2 * CAP_MB), *SETS, *sets],
        capture_output=True, text=True, env=env, timeout=300, cwd=workdir.parent,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["rc"] == 0, proc.stdout[-3000:]
    return r


def _only(workdir: Path, stage: str) -> Path:
    (d,) = (workdir / stage).iterdir()
    return d


def test_cape_run_parquet_three_times_the_cap_streams_within_it(tmp_path):
    n_groups = -(-3 * CAP_MB * 2**20 // (ROWS * M * 4)) + 1  # > 3x the cap of float32 values
    big, small = tmp_path / "big.parquet", tmp_path / "small.parquet"
    _ooc._write_parquet(big, n_groups)
    _ooc._write_parquet(small, 2, rows=256, seed=1)
    size_mb = io_lazy.parquet_decoded_bytes(big) / 2**20
    assert size_mb > 3 * CAP_MB and big.stat().st_size > 3 * CAP_MB * 2**20
    # baseline: the same command, lazily on a small file (same code, imports, scheduler)
    base = _cape_run(small, tmp_path / "w_small", tmp_path / "small.json", "--set=ingest.backed=true")
    # backed=None: the file is larger than half the (simulated) free memory, so it is read lazily
    res = _cape_run(big, tmp_path / "w", tmp_path / "big.json")
    extra = res["peak"] - base["peak"]
    print(f"\ncape run: file {size_mb:.0f} MB decoded, cap {CAP_MB} MB, peak RSS {res['peak']:.0f} MB "
          f"= baseline run {base['peak']:.0f} MB + {extra:.0f} MB")
    assert extra < CAP_MB

    ingest = _only(tmp_path / "w", "ingest")  # the source is referenced, not copied
    assert not (ingest / "adata.h5ad").exists()
    ref = json.loads((ingest / "backed_source.json").read_text())
    assert ref["format"] == "parquet" and ref["path"] == str(big.resolve())
    assert ref["uns"]["backed"] is True and ref["uns"]["label_columns"] == ["cell_type"]
    out = ad.read_h5ad(_only(tmp_path / "w", "preprocess") / "preprocessed.h5ad")
    steps = json.loads(out.uns["cape_preprocess"])["steps"]
    assert steps[0].startswith("backed: streamed with dask")

    lib = preprocess(cio.read(big, backed=True, label_columns=["cell_type"]), **KW, copy=True)  # library level
    assert out.shape == lib.shape == (n_groups * ROWS, N_HV)
    assert list(out.var_names) == list(lib.var_names)
    assert set(out.var_names) == {f"g{j}" for j in np.flatnonzero(_ooc._gene_params()[1])}
    assert list(out.obs_names) == list(lib.obs_names)
    assert list(out.obs["cell_type"][:4]) == ["b", "a", "b", "a"]
    np.testing.assert_allclose(out.X, lib.X, rtol=1e-6, atol=1e-6)


def test_parquet_content_is_the_ingest_key_and_cached_ingest_reloads_lazily(tmp_path):
    p = tmp_path / "t.parquet"
    _ooc._write_parquet(p, 3, rows=128)
    sets = {"ingest": {"backed": True, "label_columns": ["cell_type"]},
            "preprocess": {"min_genes": 10, "n_top_genes": 30}}
    first = run_pipeline(str(p), until="ingest", workdir=tmp_path / "w", overrides=sets)
    old = first.records[0]
    eager = cio.read(p, label_columns=["cell_type"])
    assert old.summary["data_fingerprint"] == STAGES["ingest"].summary(eager)["data_fingerprint"]

    # ingest from the cache, preprocess from its lazy reload (streamed again)
    r = run_pipeline(str(p), until="preprocess", workdir=tmp_path / "w", overrides=sets)
    assert [x.cached for x in r.records] == [True, False]
    assert is_lazy(r.output("ingest").X)
    assert r.output("preprocess").uns["cape_preprocess"]["steps"][0].startswith("backed: streamed")
    mem = preprocess(eager, min_genes=10, n_top_genes=30, copy=True)
    assert list(r.output("preprocess").var_names) == list(mem.var_names)

    # other values, same size and mtime: another key; the old artifact refuses the new file
    st = p.stat()
    _ooc._write_parquet(p, 3, rows=128, seed=5)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert p.stat().st_size == st.st_size
    second = run_pipeline(str(p), until="ingest", workdir=tmp_path / "w", overrides=sets)
    assert second.records[0].key != old.key and not second.records[0].cached
    assert second.records[0].summary["data_fingerprint"] != old.summary["data_fingerprint"]
    with pytest.raises(CapeFileError, match="changed since the cached ingest artifact"):
        STAGES["ingest"].load(old.path)
    assert STAGES["ingest"].load(second.records[0].path).n_obs == 384
