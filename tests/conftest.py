from __future__ import annotations

import warnings

import anndata as ad
import numpy as np
import pandas as pd
import pytest


@pytest.fixture(autouse=True)
def _quiet_third_party_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", FutureWarning)
        yield


@pytest.fixture
def counts_adata() -> ad.AnnData:
    """300 cells x 50 genes of Poisson counts with two cell types."""
    rng = np.random.default_rng(0)
    lam = rng.gamma(2.0, 2.0, size=50)
    x = rng.poisson(lam, size=(300, 50)).astype(np.float32)
    x[:, 0] += rng.poisson(5, size=300)  # every gene expressed somewhere
    obs = pd.DataFrame({"cell_type": np.repeat(["A", "B"], 150)}, index=[f"c{i}" for i in range(300)])
    return ad.AnnData(X=x, obs=obs, var=pd.DataFrame(index=[f"g{i}" for i in range(50)]))


@pytest.fixture
def table() -> pd.DataFrame:
    """20 observations x 4 numeric features, a label column and an id column."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame(rng.normal(size=(20, 4)), columns=["f0", "f1", "f2", "f3"])
    df["label"] = ["a", "b"] * 10
    df["cell_id"] = [f"cell{i}" for i in range(20)]
    return df
