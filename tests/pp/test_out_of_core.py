"""Out-of-core input: Parquet row groups and backed .h5ad read lazily with dask,
preprocessing statistics streamed without loading X, within a memory cap on a file 3x larger."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import anndata as ad
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

import cape_pipeline.io as cio
from cape_pipeline.errors import CapeDataError
from cape_pipeline.io import _lazy as io_lazy
from cape_pipeline.io.readers import read_parquet_lazy
from cape_pipeline.pp import preprocess

CAP_MB = 150
"""Extra peak RSS allowed to the preprocessing of the big file, above the process after imports."""
ROWS, M, N_HV = 2048, 2000, 100
"""Rows per row group, genes, overdispersed genes (the ones seurat HVG must find)."""


def _gene_params(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lam = rng.gamma(2.0, 1.0, size=M) + 0.2
    hv = np.zeros(M, dtype=bool)
    hv[rng.choice(M, N_HV, replace=False)] = True
    return lam, hv


def _group(g: int, rows: int = ROWS, seed: int = 0) -> np.ndarray:
    """Row group ``g`` of the generated counts: Poisson genes, and gamma-Poisson genes with
    variance ~5x their mean (highly variable); deterministic in (seed, g)."""
    lam, hv = _gene_params(seed)
    rng = np.random.default_rng([seed, g])
    size = rng.gamma(8.0, 1 / 8.0, size=(rows, 1))
    rate = np.broadcast_to(lam * size, (rows, M)).copy()
    rate[:, hv] *= rng.gamma(0.2, 5.0, size=(rows, N_HV))
    return rng.poisson(rate).astype(np.float32)


def _write_parquet(path, n_groups: int, rows: int = ROWS, seed: int = 0) -> None:
    names = [f"g{j}" for j in range(M)]
    schema = pa.schema([pa.field("cell_type", pa.string())] + [pa.field(n, pa.float32()) for n in names])
    with pq.ParquetWriter(path, schema, compression="none", use_dictionary=False) as w:  # as large on disk
        for g in range(n_groups):
            x = _group(g, rows, seed)
            cols = [pa.array(np.where(np.arange(rows) % 2, "a", "b"))] + [pa.array(x[:, j]) for j in range(M)]
            w.write_table(pa.Table.from_arrays(cols, schema=schema), row_group_size=rows)


_CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import anndata, dask.array, pyarrow.parquet, scanpy  # noqa: F401  (imports are the baseline)
    import cape_pipeline.io as cio
    from cape_pipeline.pp import preprocess

    def hwm_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

    small, big, out = sys.argv[1:4]
    kw = dict(min_genes=200, min_cells=3, n_top_genes=100)
    preprocess(cio.read(small, backed=True, label_columns=["cell_type"]), **kw, copy=True)  # warm-up: code, not data
    base = hwm_mb()
    a = cio.read(big, backed=True, label_columns=["cell_type"])
    lazy = type(a.X).__module__.startswith("dask")
    res = preprocess(a, **kw, copy=True)
    peak = hwm_mb()
    np.save(out + ".npy", np.asarray(res.X[:4096]))
    json.dump({"base": base, "peak": peak, "lazy": lazy, "shape": list(res.shape),
               "var": list(res.var_names), "obs0": list(res.obs_names[:3]),
               "labels": list(res.obs["cell_type"][:4]), "steps": res.uns["cape_preprocess"]["steps"]},
              open(out, "w"))
    """
)


@pytest.fixture(scope="module")
def big_parquet(tmp_path_factory):
    d = tmp_path_factory.mktemp("ooc")
    n_groups = -(-3 * CAP_MB * 2**20 // (ROWS * M * 4)) + 1  # > 3x the cap of float32 values
    big, small = d / "big.parquet", d / "small.parquet"
    _write_parquet(big, n_groups)
    _write_parquet(small, 2, rows=256, seed=1)
    return big, small, n_groups


def test_parquet_three_times_the_cap_preprocesses_within_it(big_parquet, tmp_path):
    import scanpy as sc

    big, small, n_groups = big_parquet
    size_mb = io_lazy.parquet_decoded_bytes(big) / 2**20
    assert size_mb > 3 * CAP_MB and big.stat().st_size > 3 * CAP_MB * 2**20
    out = tmp_path / "res.json"
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(small), str(big), str(out)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    extra = r["peak"] - r["base"]
    print(f"\nfile {size_mb:.0f} MB decoded, cap {CAP_MB} MB, peak RSS {r['peak']:.0f} MB "
          f"= baseline {r['base']:.0f} MB + {extra:.0f} MB")
    assert r["lazy"] and r["steps"][0].startswith("backed: streamed with dask")
    assert extra < CAP_MB
    assert r["shape"] == [n_groups * ROWS, N_HV]
    # HVG: exactly the overdispersed genes, as scanpy finds them in memory on a slice
    _, hv = _gene_params()
    designed = {f"g{j}" for j in np.flatnonzero(hv)}
    assert set(r["var"]) == designed
    first = ad.AnnData(np.vstack([_group(0), _group(1)]), var=pd.DataFrame(index=[f"g{j}" for j in range(M)]))
    sc.pp.normalize_total(first, target_sum=1e4)
    sc.pp.log1p(first)
    mem_hvg = sc.pp.highly_variable_genes(first, n_top_genes=N_HV, flavor="seurat", inplace=False)
    assert set(first.var_names[mem_hvg["highly_variable"].to_numpy()]) == designed
    # values of the first rows: scanpy's normalize_total + log1p of the same rows, kept genes
    np.testing.assert_allclose(np.load(str(out) + ".npy"), first[:, r["var"]].X, rtol=1e-5, atol=1e-5)
    assert r["obs0"] == ["0", "1", "2"] and r["labels"] == ["b", "a", "b", "a"]


@pytest.mark.parametrize("sparse", [False, True])
def test_lazy_paths_never_load_x(tmp_path, monkeypatch, sparse):
    """X stays a dask array; no eager reader, no np.asarray(X), no to_memory; blocks ≤ a row group."""
    import dask.array as da

    p = tmp_path / "t.parquet"
    _write_parquet(p, 3, rows=128)
    reads: list[int] = []
    real = io_lazy._RowGroupReader.__call__

    def spy(self, group):
        out = real(self, group)
        reads.append(out.shape[0])
        return out

    def refuse(*a, **k):
        raise AssertionError("X was materialized")

    monkeypatch.setattr(io_lazy._RowGroupReader, "__call__", spy)
    monkeypatch.setattr("cape_pipeline.io.readers.read_parquet", refuse)
    monkeypatch.setattr(da.Array, "__array__", refuse)
    monkeypatch.setattr(ad.AnnData, "to_memory", refuse)
    kw = dict(min_genes=10, n_top_genes=30)
    if sparse:  # backed .h5ad with CSR X, through anndata's read_elem_lazy
        x = np.vstack([_group(g, 128) for g in range(3)])
        h5 = tmp_path / "t.h5ad"
        ad.AnnData(sp.csr_matrix(x), var=pd.DataFrame(index=[f"g{j}" for j in range(M)])).write_h5ad(h5)
        a = cio.read(h5, backed=True)
        assert a.isbacked
    else:
        a = cio.read(p, backed=True, label_columns=["cell_type"])
        assert isinstance(a.X, da.Array) and a.uns["cape_ingest"]["backed"] is True
        assert reads and max(reads) == 128  # validation read row groups one at a time
    out = preprocess(a, **kw, copy=True)
    assert out.shape == (384, 30) and isinstance(out.X, sp.csr_matrix if sparse else np.ndarray)
    assert not sparse or max(reads, default=0) == 0


def test_lazy_parquet_equals_eager(tmp_path):
    p = tmp_path / "t.parquet"
    _write_parquet(p, 4, rows=300)
    kw = dict(min_genes=100, min_cells=3, n_top_genes=50)
    eager = preprocess(cio.read(p, label_columns=["cell_type"]), **kw, copy=True)
    lazy = cio.read(p, backed=True, label_columns=["cell_type"])
    assert not isinstance(cio.read(p, label_columns=["cell_type"]).X, type(lazy.X))
    res = preprocess(lazy, **kw, copy=True)
    assert list(res.var_names) == list(eager.var_names)
    assert list(res.obs_names) == list(eager.obs_names)
    # float32 per-cell sums in dask's chunk order vs one pass: ≤ n_genes·ε relative (see test_backed)
    np.testing.assert_allclose(res.X, eager.X, rtol=1e-5, atol=1e-6)
    prot = preprocess(cio.read(p, backed=True, label_columns=["cell_type"], modality="proteomics"),
                      n_top_genes=20, copy=True)
    prot_eager = preprocess(cio.read(p, label_columns=["cell_type"], modality="proteomics"), n_top_genes=20, copy=True)
    np.testing.assert_array_equal(prot.X, prot_eager.X)


def test_lazy_parquet_messages(tmp_path):
    df = pd.DataFrame(np.abs(np.random.default_rng(0).normal(size=(20, 4))), columns=["f0", "f1", "f2", "f3"])
    df["label"] = ["a", "b"] * 10
    df["cell_id"] = [f"cell{i}" for i in range(20)]
    p = tmp_path / "t.parquet"
    df.to_parquet(p, index=False, row_group_size=7)
    with pytest.raises(CapeDataError, match=r"non-numeric feature column\(s\) \['label', 'cell_id'\].*label_columns"):
        read_parquet_lazy(p)
    with pytest.raises(CapeDataError, match="column 'celltype' not found"):
        read_parquet_lazy(p, label_columns=["celltype"])
    a = cio.read(p, backed=True, label_columns=["label"], index_column="cell_id")
    assert a.obs_names[0] == "cell0" and list(a.var_names) == ["f0", "f1", "f2", "f3"]
    df.loc[15, "f2"] = np.nan
    df.loc[3, "f1"] = np.inf
    df.to_parquet(p, index=False, row_group_size=7)
    with pytest.raises(CapeDataError, match=r"infinite values in feature\(s\) \['f1'\]"):
        cio.read(p, backed=True, label_columns=["label", "cell_id"], modality="proteomics")
    df.loc[3, "f1"] = 1.0
    df.to_parquet(p, index=False, row_group_size=7)
    with pytest.raises(CapeDataError, match=r"NaN in feature\(s\) \['f2'\].*proteomics or methylation"):
        cio.read(p, backed=True, label_columns=["label", "cell_id"])
    df.drop(columns=["label"]).set_index("cell_id").to_parquet(p)  # stored pandas index -> obs_names
    assert cio.read(p, backed=True, modality="proteomics").obs_names[3] == "cell3"
    table = pa.table({"g1": [1.0, 2.0], "h": [3.0, 4.0]})
    table = table.append_column("g1", pa.array([5.0, 6.0]))
    pq.write_table(table, p)
    with pytest.raises(CapeDataError, match=r"duplicate column name\(s\) \['g1'\]"):
        read_parquet_lazy(p)
    df = pd.DataFrame({"c": np.ones(20), "v": np.arange(20.0)})
    df.to_parquet(p, index=False, row_group_size=6)
    with pytest.raises(CapeDataError, match=r"feature\(s\) \['c'\] \(1 in all\) are constant"):
        preprocess(cio.read(p, backed=True, modality="proteomics"), n_top_genes=5, copy=True)
