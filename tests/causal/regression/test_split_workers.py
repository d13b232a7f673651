"""The regression algorithm's random splits on dask.distributed workers: the same DAG as the serial run."""

from __future__ import annotations

import numpy as np
import pytest

from cape_pipeline.causal.regression import fit_regression
from cape_pipeline.causal.regression.split_vote import check_workers
from cape_pipeline.errors import CapeConfigError

pytest.importorskip("distributed")


def _sem(n: int = 600, m: int = 30, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, m))
    for j in range(1, m):  # a chain with a few skips
        x[:, j] += 0.6 * x[:, j - 1] + (0.4 * x[:, j - 3] if j >= 3 and j % 4 == 0 else 0.0)
    return (x - x.mean(0)) / x.std(0)


def test_local_workers_give_the_serial_dag_bit_for_bit():
    z = _sem()
    serial = fit_regression(z, n_splits=4, seed=3)
    dist = fit_regression(z, n_splits=4, seed=3, workers="local:2")
    assert serial.adjacency.nnz > 10
    # each worker runs the same float64 arithmetic with this process's torch threads: identical sums
    assert (serial.adjacency != dist.adjacency).nnz == 0
    np.testing.assert_array_equal(serial.adjacency.toarray(), dist.adjacency.toarray())
    np.testing.assert_array_equal(serial.pvalue, dist.pvalue)
    assert dist.n_splits == 4


@pytest.mark.parametrize("bad", ["cluster", "local:0", "local:x", 3, ""])
def test_workers_option_is_checked(bad):
    with pytest.raises(CapeConfigError, match="workers"):
        check_workers(bad)
    with pytest.raises(CapeConfigError, match="workers"):
        fit_regression(_sem(60, 5), n_splits=2, workers=bad)


def test_discover_config_takes_workers_for_the_regression_algorithm_only():
    from cape_pipeline.causal.config import DiscoverConfig

    assert DiscoverConfig(regression={"workers": "local:2"}).regression.workers == "local:2"
    with pytest.raises(CapeConfigError, match="workers"):
        DiscoverConfig(regression={"workers": "nowhere"})
    with pytest.raises(CapeConfigError, match="workers"):
        DiscoverConfig(algorithm="low-rank", regression={"workers": "local"})
