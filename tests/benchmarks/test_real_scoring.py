"""Tests of the BEELINE scoring in ``benchmarks/discover/real/real.py`` (``Universe``), on
hand-computed cases: the TF → gene candidate pairs, ties at the k-th score, zero scores, the
random predictor's density and the kept graph's metrics."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).parents[2] / "benchmarks" / "discover" / "real" / "real.py"
_spec = importlib.util.spec_from_file_location("real_benchmark", _PATH)
real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real)

GENES = np.array(["A", "B", "C", "D", "E"])  # E is not in the truth


@pytest.fixture
def universe(tmp_path: Path):
    truth = tmp_path / "truth.csv"
    # a self-loop and a duplicate, which BEELINE drops
    truth.write_text("Gene1,Gene2\nA,B\nA,C\nD,B\nA,A\nA,B\n")
    return real.Universe(truth, GENES)


def _score(pairs: dict[tuple[str, str], float]) -> np.ndarray:
    s = np.zeros((len(GENES), len(GENES)))
    ix = {g: i for i, g in enumerate(GENES)}
    for (a, b), v in pairs.items():
        s[ix[a], ix[b]] = v
    return s


def test_candidate_pairs_and_density(universe):
    # TFs = sources of true edges {A, D}; genes of the truth {A, B, C, D}; no self-loops: 2 * 4 - 2 = 6 pairs
    assert universe.n_true == 3
    assert int(universe.pairs.sum()) == 6
    assert universe.density == pytest.approx(0.5)
    assert not universe.pairs[:, 4].any() and not universe.pairs[4].any()
    # AUPRC is over every ordered pair of the truth's genes: 4 * 3 = 12
    assert universe.node_density == pytest.approx(3 / 12)


def test_early_precision_takes_every_tie_at_the_kth_score(universe):
    # k = 3 true edges; the 3rd-largest score 0.5 is shared by three pairs: all four predictions count
    q = universe.ranking(_score({("A", "B"): 0.9, ("D", "A"): 0.5, ("A", "C"): 0.5, ("D", "C"): 0.5}))
    assert q["early_precision"] == pytest.approx(2 / 4)
    assert q["epr"] == pytest.approx((2 / 4) / 0.5)


def test_zero_scores_are_not_predictions_and_outside_pairs_are_ignored(universe):
    # one non-zero candidate score: k = min(1, 3); a large score on E (outside the truth) does not count
    q = universe.ranking(_score({("A", "C"): 0.2, ("E", "B"): 5.0, ("B", "A"): 3.0}))
    assert q["early_precision"] == pytest.approx(1.0)
    assert q["scored_true_share"] == pytest.approx(1 / 3)


def test_scores_are_absolute_and_rounded_to_six_decimals(universe):
    # -0.9 ranks as 0.9; 1e-7 rounds to 0 and is no prediction
    q = universe.ranking(_score({("A", "B"): -0.9, ("D", "A"): 1e-7}))
    assert q["early_precision"] == pytest.approx(1.0)


def test_perfect_ranking_has_auprc_one(universe):
    q = universe.ranking(_score({("A", "B"): 3.0, ("A", "C"): 2.0, ("D", "B"): 1.0, ("B", "C"): 0.5}))
    assert q["auprc"] == pytest.approx(1.0)
    assert q["auprc_ratio"] == pytest.approx(4.0)
    assert q["epr"] == pytest.approx(2.0)


def test_kept_graph_metrics_count_candidate_pairs_only(universe):
    adj = _score({("A", "B"): 1.0, ("D", "A"): 1.0, ("E", "B"): 1.0})
    g = universe.graph(adj)
    assert g["edges"] == 3 and g["edges_scored"] == 2
    assert g["precision"] == pytest.approx(0.5) and g["recall"] == pytest.approx(1 / 3)
    assert g["f1"] == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    assert g["genes_without_edge"] == pytest.approx(1 / 5)  # C alone has no edge
    # a ranking's precision at its k best candidate pairs
    assert universe.precision_at(_score({("A", "B"): 2.0, ("D", "A"): 1.0}), 2) == pytest.approx(0.5)
