from __future__ import annotations

import logging

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from cape_pipeline.causal.api import discover, prepare_matrix
from cape_pipeline.causal.metrics import dag_metrics
from cape_pipeline.errors import CapeConfigError, CapeDataError


def _chain(n=600, seed=0):
    rng = np.random.default_rng(seed)
    x = np.zeros((n, 5))
    x[:, 0] = rng.normal(size=n)
    for j in range(1, 5):
        x[:, j] = x[:, j - 1] + rng.normal(size=n)
    return x


def _small(n=200, m=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, m))


def test_chain_skeleton_recovered():
    x = _chain()
    g = discover(x, feature_names=list("abcde"), device="cpu", seed=0)
    assert g.is_dag()
    true = np.diag(np.ones(4), 1)
    m = dag_metrics(g, true)
    skel = {frozenset(e) for e in g.to_frame()[["source", "target"]].itertuples(index=False)}
    # every chain link is found (orientation of a Gaussian chain is not identifiable after
    # standardization, so only the skeleton is checked), with at most one extra pair
    for pair in ["ab", "bc", "cd", "de"]:
        assert frozenset(pair) in skel
    assert m["skeleton_f1"] >= 0.85
    assert g.params["effective_rank"] == 4
    # epochs=None: N = 600 rows are 5 steps per epoch, so 1000 epochs give the 5000 steps
    assert g.params["epochs"] is None and g.params["effective_epochs"] == 1000
    assert len(g.history) >= 1 and {"h", "rho", "alpha", "neg_elbo", "seconds"} <= set(g.history[0])


def test_resolve_epochs():
    from cape_pipeline.causal.api import resolve_epochs

    assert resolve_epochs(7, 600, 128) == 7  # explicit budgets are kept
    assert resolve_epochs(None, 600, 128) == 1000  # 5 steps per epoch
    assert resolve_epochs(None, 2000, 128) == 313  # 16 steps per epoch
    assert resolve_epochs(None, 7466, 128) == 100  # Sachs: 59 steps per epoch, the paper's 100
    assert resolve_epochs(None, 600, 128, min_steps=0) == 100
    with pytest.raises(CapeConfigError, match="min_steps"):
        discover(_small(), low_rank={"epochs": 1, "min_steps": -1}, device="cpu")
    with pytest.raises(CapeConfigError, match="posterior"):
        discover(_small(), low_rank={"epochs": 1, "posterior": "laplace"}, device="cpu")
    with pytest.raises(CapeConfigError, match="only for method 'cape'"):
        discover(_small(), method="correlation", low_rank={"posterior": "mean"})


def test_majorant_option_runs_and_is_dag():
    g = discover(_chain(n=300), low_rank={"acyclicity": "majorant", "epochs": 5}, device="cpu")
    assert g.is_dag() and g.params["acyclicity"] == "majorant"


def test_reproducible_with_seed():
    x = _small()
    a = discover(x, low_rank={"epochs": 3, "threshold": 0.0}, device="cpu", seed=3)
    b = discover(x, low_rank={"epochs": 3, "threshold": 0.0}, device="cpu", seed=3)
    assert (a.adjacency != b.adjacency).nnz == 0


def test_rank_capped_with_info(caplog):
    with caplog.at_level(logging.INFO, logger="cape_pipeline.causal.api"):
        g = discover(_small(), low_rank={"rank": 40, "epochs": 1}, device="cpu")
    assert g.params["effective_rank"] == 3 and g.params["rank"] == 40
    assert any("rank 40" in r.getMessage() for r in caplog.records)


def test_input_types_and_names():
    x = _small()
    df = pd.DataFrame(x, columns=["g1", "g2", "g3", "g4"])
    g = discover(df, low_rank={"epochs": 1}, device="cpu")
    assert list(g.feature_names) == ["g1", "g2", "g3", "g4"]
    adata = ad.AnnData(sp.csr_matrix(x), var=pd.DataFrame(index=["p", "q", "r", "s"]))
    g2 = discover(adata, low_rank={"epochs": 1}, device="cpu")
    assert list(g2.feature_names) == ["p", "q", "r", "s"]
    xs, _ = prepare_matrix(x)
    assert np.allclose(xs.mean(0), 0) and np.allclose(xs.std(0), 1)


def test_correlation_is_symmetric_not_dag():
    rng = np.random.default_rng(0)
    a = rng.normal(size=500)
    x = np.c_[a, a + 0.3 * rng.normal(size=500), rng.normal(size=500)]
    g = discover(x, method="correlation", threshold=0.5)
    dense = g.adjacency.toarray()
    assert dense[0, 1] != 0 and dense[1, 0] != 0 and np.allclose(dense, dense.T)
    assert dense[0, 2] == 0 and not g.is_dag()
    assert dense[0, 1] == pytest.approx(np.corrcoef(x.T)[0, 1])


def test_correlation_topk_blockwise():
    x = _small(n=100, m=30, seed=1)
    g = discover(x, method="correlation", threshold=0.0, max_edges_per_row=2)
    d = g.adjacency.toarray()
    assert np.allclose(d, d.T) and (np.count_nonzero(d, axis=1) >= 2).all()


@pytest.mark.parametrize(
    ("x", "match"),
    [
        (np.c_[np.ones(10), np.arange(10.0)], r"'x0'.*constant"),
        (np.c_[np.full(10, np.nan), np.arange(10.0)], r"'x0'.*all missing"),
        (np.c_[np.arange(10.0), np.r_[np.arange(9.0), np.inf]], r"'x1'.*NaN or inf"),
        (np.ones((1, 3)), "at least 2 observations"),
        (np.arange(10.0)[:, None], "at least 2 features"),
        (np.zeros(5), "2-D"),
    ],
)
def test_bad_data(x, match):
    with pytest.raises(CapeDataError, match=match):
        discover(x, low_rank={"epochs": 1})


def test_bad_names_and_frame():
    with pytest.raises(CapeDataError, match="feature_names"):
        discover(_small(), feature_names=["a"], low_rank={"epochs": 1})
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": ["x", "y", "z"]})
    with pytest.raises(CapeDataError, match="'b'"):
        discover(df, low_rank={"epochs": 1})


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"method": "pc"}, "method"),
        ({"low_rank": {"rank": 0}}, r"low_rank\.rank"),
        ({"low_rank": {"threshold": -1}}, r"low_rank\.threshold"),
        ({"low_rank": {"epochs": 0}}, r"low_rank\.epochs"),
        ({"learned": {"lr": 0}}, r"learned\.lr"),
        ({"low_rank": {"acyclicity": "expm"}}, r"low_rank\.acyclicity"),
        ({"bogus": 1}, "bogus"),
        ({"device": "tpu9"}, "device"),
    ],
)
def test_bad_config(kw, match):
    with pytest.raises(CapeConfigError, match=match):
        discover(_small(), **kw)


def test_missing_mean_imputes_nan_for_structure_learning_only():
    """``missing="mean"``: NaN becomes the feature's observed mean (so no covariance is added);
    the default refuses NaN, naming the feature and the option; inf is refused either way."""
    from cape_pipeline.causal._input import prepare_matrix

    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3))
    x[:, 1] += x[:, 0]
    holes = x.copy()
    holes[[3, 7, 11], 1] = np.nan
    with pytest.raises(CapeDataError, match=r"'x1'.*missing='mean'"):
        prepare_matrix(holes)
    xs, _ = prepare_matrix(holes, missing="mean")
    filled = holes.copy()
    filled[[3, 7, 11], 1] = np.nanmean(holes[:, 1])
    np.testing.assert_allclose(xs, (filled - filled.mean(0)) / filled.std(0), atol=1e-12)
    inf = holes.copy()
    inf[0, 2] = np.inf
    with pytest.raises(CapeDataError, match="NaN or inf"):
        prepare_matrix(inf, missing="mean")
    with pytest.raises(CapeConfigError, match="missing"):
        discover(holes, missing="zero")
    g = discover(holes, missing="mean", method="correlation", threshold=0.3)
    assert g.n_edges > 0


def test_pipeline_discovers_on_methylation_with_missing_values(tmp_path):
    """Bundled methylation data hold NaN (not measured); the discover stage imputes feature means."""
    from cape_pipeline.pipeline import run_pipeline

    ad = run_pipeline("methylation-age-sim", until="preprocess", workdir=tmp_path / "w").output("preprocess")
    assert np.isnan(np.asarray(ad.X)).any()
    r = run_pipeline("methylation-age-sim", until="discover", workdir=tmp_path / "w",
                     overrides={"discover": {"method": "correlation", "threshold": 0.3}})
    assert r.output("discover").n_edges > 0


def test_learned_algorithm_on_fewer_rows_than_features_warns():
    """Measured on simulated counts with a known graph (benchmarks/discover/counts/counts.jsonl):
    at 1,000 cells × 2,000 genes 95 % of the learned algorithm's 6,150 edges were false, so the
    library warns."""
    import warnings as w

    import scipy.sparse as sp

    from cape_pipeline.causal.diagnostics import isolation_report
    from cape_pipeline.errors import CapeWarning

    adj = sp.csr_array(sp.random(40, 40, density=0.1, format="csr", random_state=0))
    with w.catch_warnings(record=True) as rec:
        w.simplefilter("always")
        out = isolation_report(adj, 40, threshold=0.2, method="cape", algorithm="learned", scores=None, n_obs=30)
    assert any("fewer rows than features" in str(r.message) and issubclass(r.category, CapeWarning) for r in rec)
    assert any("exploratory" in m for m in out["warnings"])
    with w.catch_warnings(record=True) as rec:
        w.simplefilter("always")
        out = isolation_report(adj, 40, threshold=0.2, method="cape", algorithm="learned", scores=None, n_obs=400)
    assert not any("fewer rows" in m for m in out["warnings"])
