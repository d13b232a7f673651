"""``n_candidates="auto"``: k cut where a cross-fitting half has fewer than 20 rows per candidate."""

import numpy as np
import pytest

from cape_pipeline.causal.regression import (
    REGRESSION_N_CANDIDATES,
    ROWS_PER_CANDIDATE,
    RegressionConfig,
    resolve_candidates,
)
from cape_pipeline.errors import CapeConfigError


@pytest.mark.parametrize(("rows", "k"), [(0, 1), (100, 1), (160, 1), (319, 1), (320, 2), (400, 2), (425, 2), (1000, 6),
                                         (1599, 9), (1600, 10), (10_000, 10), (500_000, 10)])
def test_auto_keeps_twenty_rows_of_a_half_per_candidate(rows, k):
    assert resolve_candidates("auto", rows) == k
    if 1 < k < REGRESSION_N_CANDIDATES:  # the largest k whose 4k candidates get 20 rows each of a half
        assert 4 * k * ROWS_PER_CANDIDATE <= rows // 2 < 4 * (k + 1) * ROWS_PER_CANDIDATE


def test_an_explicit_k_is_kept_at_any_size():
    assert resolve_candidates(10, 200) == 10 and resolve_candidates(25, 100_000) == 25


def test_config_takes_auto_or_an_int():
    assert RegressionConfig().n_candidates == "auto"
    assert RegressionConfig(n_candidates=3).n_candidates == 3
    with pytest.raises(CapeConfigError, match="n_candidates: expected 'auto' or an integer >= 1, got 'many'"):
        RegressionConfig(n_candidates="many")


def test_discover_records_the_k_it_used():
    from cape_pipeline.causal import discover

    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 30))
    x[:, 1] += 0.8 * x[:, 0]
    auto = discover(x, algorithm="regression", regression={"n_splits": 1})
    fixed = discover(x, algorithm="regression", regression={"n_splits": 1, "n_candidates": 4})
    assert auto.params["n_candidates_used"] == 2 and fixed.params["n_candidates_used"] == 4
