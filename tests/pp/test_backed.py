from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import cape_pipeline.io as cio
from cape_pipeline import _lazy
from cape_pipeline.pp import preprocess


def _counts(n=3000, m=400, sparse=True, seed=0):
    rng = np.random.default_rng(seed)
    lam = rng.gamma(0.6, 1.5, size=m)
    x = rng.poisson(lam * rng.gamma(2.0, 0.5, size=(n, 1))).astype(np.float32)
    x[:, :3] = 0  # empty genes are removed by filter_genes
    x[:5] = 0  # empty cells are removed by filter_cells
    obs = pd.DataFrame({"label": rng.choice(["a", "b"], n)}, index=[f"c{i}" for i in range(n)])
    return ad.AnnData(X=sp.csr_matrix(x) if sparse else x, obs=obs, var=pd.DataFrame(index=[f"g{i}" for i in range(m)]))


@pytest.mark.parametrize("sparse", [True, False])
def test_backed_matches_in_memory(tmp_path, sparse):
    a = _counts(sparse=sparse)
    p = tmp_path / "c.h5ad"
    a.write_h5ad(p)
    kw = dict(min_genes=10, min_cells=3, n_top_genes=60)
    mem = preprocess(cio.read(p, backed=False), **kw, copy=True)
    backed_in = cio.read(p, backed=True)
    assert backed_in.isbacked
    streamed = preprocess(backed_in, **kw, copy=True)
    assert any(s.startswith("backed") for s in streamed.uns["cape_preprocess"]["steps"])
    assert list(streamed.obs_names) == list(mem.obs_names)
    assert list(streamed.var_names) == list(mem.var_names)
    dense = lambda z: z.toarray() if sp.issparse(z) else np.asarray(z)  # noqa: E731
    # float32 per-cell sums formed in another order (streamed row blocks vs one pass): at worst
    # n_genes·ε = 400 · 6e-8 = 2.4e-5 relative before log1p, which does not enlarge it
    np.testing.assert_allclose(dense(streamed.X), dense(mem.X), rtol=400 * 6e-8 * 1.25, atol=1e-6)
    assert list(streamed.obs["label"]) == list(mem.obs["label"])


def test_backed_streams_in_several_chunks(monkeypatch, tmp_path):
    monkeypatch.setattr(_lazy, "CHUNK_ROWS", 256)
    a = _counts(n=1000, m=100)
    p = tmp_path / "c.h5ad"
    a.write_h5ad(p)
    kw = dict(min_genes=5, n_top_genes=20)
    mem = preprocess(cio.read(p), **kw, copy=True)
    streamed = preprocess(cio.read(p, backed=True), **kw, copy=True)
    assert list(streamed.var_names) == list(mem.var_names)


def test_pipeline_with_backed_ingest(tmp_path):
    from cape_pipeline.pipeline import run_pipeline

    a = _counts(n=600, m=80)
    p = tmp_path / "c.h5ad"
    a.write_h5ad(p)
    kw = dict(until="preprocess", workdir=tmp_path / "w",
              overrides={"ingest": {"backed": True}, "preprocess": {"min_genes": 5, "n_top_genes": 30}})
    r = run_pipeline(str(p), **kw)
    assert (r.records[0].path / "backed_source.json").is_file()  # not copied
    assert not (r.records[0].path / "adata.h5ad").exists()
    assert r.output("preprocess").n_vars == 30
    r2 = run_pipeline(str(p), **kw)
    assert [x.cached for x in r2.records] == [True, True]
    assert r2.output("ingest").isbacked


@pytest.mark.parametrize("sparse", [True, False])
def test_backed_counts_keep_their_library_sizes(monkeypatch, tmp_path, sparse):
    # Step I's library-size covariate and counting-noise correction read obs["cape_library_size"]
    monkeypatch.setattr(_lazy, "CHUNK_ROWS", 700)
    a = _counts(sparse=sparse)
    p = tmp_path / "c.h5ad"
    a.write_h5ad(p)
    kw = dict(min_genes=10, min_cells=3, n_top_genes=60)
    mem = preprocess(cio.read(p, backed=False), **kw, copy=True)
    streamed = preprocess(cio.read(p, backed=True), **kw, copy=True)
    assert streamed.uns["cape_preprocess"]["counts_source"] == mem.uns["cape_preprocess"]["counts_source"] == "X"
    # whole counts summed in float64 either way: equal
    np.testing.assert_array_equal(streamed.obs["cape_library_size"], mem.obs["cape_library_size"])


@pytest.mark.parametrize("sparse", [True, False])
def test_backed_log_normalized_counts_are_read_back(monkeypatch, tmp_path, sparse):
    import scanpy as sc

    monkeypatch.setattr(_lazy, "CHUNK_ROWS", 700)
    a = _counts(sparse=sparse)[5:]  # no empty cells: a user's normalized file has none
    sc.pp.normalize_total(a, target_sum=1e4)
    sc.pp.log1p(a)
    p = tmp_path / "l.h5ad"
    a.write_h5ad(p)
    kw = dict(min_cells=3, n_top_genes=60)
    mem = preprocess(cio.read(p, backed=False), **kw, copy=True)
    streamed = preprocess(cio.read(p, backed=True), **kw, copy=True)
    rec = streamed.uns["cape_preprocess"]
    assert rec["input_state"] == "counts" and rec["counts_recovered"] == {"base": "e"}
    assert rec["counts_source"] == mem.uns["cape_preprocess"]["counts_source"] == "X (recovered from log-normalized values)"
    assert list(streamed.var_names) == list(mem.var_names)
    np.testing.assert_array_equal(streamed.obs["cape_library_size"], mem.obs["cape_library_size"])
    dense = lambda z: z.toarray() if sp.issparse(z) else np.asarray(z)  # noqa: E731
    np.testing.assert_allclose(dense(streamed.X), dense(mem.X), rtol=400 * 6e-8 * 1.25, atol=1e-6)
    off = preprocess(cio.read(p, backed=True), **kw, recover_counts=False, copy=True)
    assert off.uns["cape_preprocess"]["input_state"] == "log-normalized" and "cape_library_size" not in off.obs
