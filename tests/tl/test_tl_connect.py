"""tl, export and pl connect through the AnnData: ``CapeEncodings.from_anndata``,
``pl.plot_dag(adata)`` and ``pl.plot_loss(adata)`` take the AnnData the tools wrote."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pytest
import scipy.sparse as sp

import cape_pipeline as cp
from cape_pipeline.encodings import CapeEncodings, load_encodings


@pytest.fixture
def adata_after_tl():
    rng = np.random.default_rng(0)
    a = ad.AnnData(X=rng.normal(size=(30, 6)).astype(np.float32))
    a.var_names = [f"g{i}" for i in range(6)]
    a.varp["cape_dag"] = sp.csr_matrix(np.triu(rng.uniform(0.3, 1.0, (6, 6)), 1) * (rng.random((6, 6)) < 0.6))
    cp.tl.embed(a, dim=2, max_epochs=30)
    cp.tl.encode(a)
    return a


def test_encodings_from_anndata_round_trip(adata_after_tl, tmp_path):
    a = adata_after_tl
    enc = CapeEncodings.from_anndata(a)
    np.testing.assert_array_equal(enc.angles, a.varm["cape_angles"])
    assert enc.graph is not None and enc.graph.n_edges == a.varp["cape_dag"].nnz
    enc.save(tmp_path / "enc")
    back = load_encodings(tmp_path / "enc")
    np.testing.assert_allclose(back.angles, enc.angles)
    del a.varm["cape_angles"]
    with pytest.raises(cp.errors.CapeDataError, match="tl.encode"):
        CapeEncodings.from_anndata(a)


def test_plots_take_the_anndata(adata_after_tl):
    a = adata_after_tl
    assert cp.pl.plot_dag(a) is not None
    fig = cp.pl.plot_loss(a)
    (line,) = fig.axes[0].get_lines()
    assert len(line.get_ydata()) == len(a.uns["cape"]["embed"]["loss_history"]) > 0
    with pytest.raises(ValueError, match="tl.discover"):
        cp.pl.plot_dag(ad.AnnData(X=np.zeros((2, 2), dtype=np.float32)))


def test_tl_progress_follows_scanpy_verbosity():
    import scanpy as sc

    from cape_pipeline.tl._steps import _show_progress

    before = sc.settings.verbosity
    try:
        sc.settings.verbosity = 1
        assert _show_progress(None) is False  # pytest's stderr is no terminal
        sc.settings.verbosity = 2
        assert _show_progress(None) is True
    finally:
        sc.settings.verbosity = before
    assert _show_progress(False) is False and _show_progress(True) is True


def test_width_follows_the_angles_and_a_mismatch_names_the_setting():
    """The backbone width follows the angles (D = 2·d); where it is set and does not fit, the
    error names the settings to change."""
    from cape_pipeline.tasks import run_task

    rng = np.random.default_rng(0)
    a = ad.AnnData(X=np.abs(rng.normal(size=(60, 10))).astype(np.float32))
    a.obs["cell_type"] = np.repeat(["a", "b"], 30)
    angles = rng.normal(size=(10, 16)) * 0.1
    budget = {"pretrain_epochs": 1, "finetune_epochs": 1, "reference": False}
    res = run_task("annotation", a, pe="cape", angles=angles, config={**budget, "model": {"n_layers": 1}})
    assert res.params["model_config"]["d_model"] == 32  # D = 2·d
    with pytest.raises(cp.errors.CapeDataError, match=r"d_model': 32.*train.d_model=32.*embed.dim=8"):
        run_task("annotation", a, pe="cape", angles=angles, config={**budget, "model": {"d_model": 16, "n_heads": 2}})
