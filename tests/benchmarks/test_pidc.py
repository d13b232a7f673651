"""Tests of the PIDC baseline of the real-data benchmark (``benchmarks/discover/real/pidc.py``):
against the reference values NetworkInference.jl's own tests hold, and the vectorized PUC sums
against the triple loop of their definition.

``data/networkinference/``: NetworkInference.jl's test data at e5a3de3 (MIT, its ``LICENSE.md``
beside them): 10 genes of GeneNetWeaver's Yeast1 network, 140 samples, and the MI, PUC and PIDC
edge weights its tests compare with (computed before that package by scripts on
InformationMeasures.jl).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).parents[2] / "benchmarks" / "discover" / "real" / "pidc.py"
_spec = importlib.util.spec_from_file_location("pidc_benchmark", _PATH)
pidc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pidc)

DATA = Path(__file__).parent / "data" / "networkinference"


def _yeast() -> tuple[list[str], np.ndarray]:
    rows = [ln.split() for ln in (DATA / "yeast1_10_data.txt").read_text().splitlines()[1:] if ln.strip()]
    return [r[0] for r in rows], np.array([[float(v) for v in r[1:]] for r in rows]).T


def _reference(name: str) -> list[tuple[str, str, float]]:
    return [(a, b, float(v)) for a, b, v in
            (ln.split() for ln in (DATA / f"{name}.txt").read_text().splitlines() if ln.strip())]


@pytest.fixture(scope="module")
def yeast():
    labels, x = _yeast()
    bins, n_bins = pidc.discretize(x)
    puc, mi = pidc.puc_scores(bins, n_bins)
    return {g: i for i, g in enumerate(labels)}, x, mi, puc, pidc.context(puc)


@pytest.mark.parametrize("name", ["mi", "puc", "pidc"])
def test_matches_networkinference_reference(yeast, name):
    # the reference files hold every pair in both directions; NetworkInference.jl's own tests
    # compare five of them at atol 1e-4. Every operation here is the same sum of the same
    # float64 terms in another order (the triple loop there, sorted cumulative sums here), so
    # the values agree to rounding: the largest PUC is 16 (2 terms per third gene), and 1e-9
    # leaves six orders of magnitude above float64 rounding of such sums
    ix, _, mi, puc, w = yeast
    mat = {"mi": mi, "puc": puc, "pidc": w}[name]
    ref = _reference(name)
    assert len(ref) == 90
    got = np.array([mat[ix[a], ix[b]] for a, b, _ in ref])
    np.testing.assert_allclose(got, [v for *_, v in ref], rtol=0, atol=1e-9)


def test_pidc_end_to_end_is_the_reference(yeast):
    ix, x, *_ = yeast
    w = pidc.pidc(x)
    assert np.allclose(w, w.T) and np.all(np.diag(w) == 0)
    top = max(_reference("pidc"), key=lambda r: r[2])
    assert np.unravel_index(np.argmax(w), w.shape) in ((ix[top[0]], ix[top[1]]), (ix[top[1]], ix[top[0]]))


def _puc_by_triples(bins: np.ndarray, n_bins: np.ndarray) -> np.ndarray:
    """PUC from its definition, one triple at a time (Chan et al. 2017, eq. 5)."""
    n, m = bins.shape

    def joint(a, b):
        p = np.zeros((n_bins[a], n_bins[b]))
        np.add.at(p, (bins[:, a], bins[:, b]), 1.0 / n)
        return p

    si, mi = {}, {}
    for a in range(m):
        for b in range(m):
            if a == b:
                continue
            p = joint(a, b)  # source a, target b
            pa, pb = p.sum(1, keepdims=True), p.sum(0, keepdims=True)
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (p / pb) * np.log2(p / (pa * pb))
            si[a, b] = np.where(np.isfinite(t), t, 0.0).sum(0)
            mi[a, b] = float(si[a, b] @ pb.ravel())
    out = np.zeros((m, m))
    for y in range(m):
        py = np.bincount(bins[:, y], minlength=n_bins[y]) / n
        for x in range(m):
            for z in range(m):
                if len({x, y, z}) < 3 or mi[x, y] <= pidc.MI_ZERO:
                    continue
                red = float(py @ np.minimum(si[x, y], si[z, y]))
                out[x, y] += max((mi[x, y] - red) / mi[x, y], 0.0)
    return out + out.T


def test_puc_vectorized_equals_triple_loop():
    rng = np.random.default_rng(0)
    n, m = 60, 7
    bins = rng.integers(0, 3, size=(n, m))
    bins[:, 3] = (bins[:, 0] + bins[:, 1]) % 3  # a synergistic gene
    bins[:, 4] = bins[:, 0]  # a copy: ties among the specific informations
    bins[:, 5] = 0  # a constant gene: mutual information 0 with every gene
    n_bins = np.array([3, 3, 3, 3, 3, 1, 3])
    puc, _ = pidc.puc_scores(bins, n_bins)
    np.testing.assert_allclose(puc, _puc_by_triples(bins, n_bins), rtol=0, atol=1e-12)


def test_context_falls_back_to_clr_where_a_gamma_cannot_be_fitted():
    rng = np.random.default_rng(1)
    m = 6
    s = rng.uniform(0.5, 3.0, size=(m, m))
    s = s + s.T
    np.fill_diagonal(s, 0.0)
    s[0, 1] = s[1, 0] = 0.0  # a score of 0: no gamma for genes 0 and 1
    w = pidc.context(s)
    off = ~np.eye(m, dtype=bool)
    rows = s[off].reshape(m, m - 1)
    mean, sd = rows.mean(1), rows.std(1, ddof=1)
    z = np.maximum((s - mean[:, None]) / sd[:, None], 0.0)
    clr = np.sqrt(z**2 + z.T**2)
    assert w[0, 2] == pytest.approx(clr[0, 2]) and w[1, 4] == pytest.approx(clr[1, 4])
    from scipy.stats import gamma

    a2, _, scale2 = gamma.fit(rows[2], floc=0)
    a3, _, scale3 = gamma.fit(rows[3], floc=0)
    want = gamma.cdf(s[2, 3], a2, scale=scale2) + gamma.cdf(s[2, 3], a3, scale=scale3)
    # scipy solves the same maximum-likelihood equation by another root finder
    assert w[2, 3] == pytest.approx(want, abs=1e-6)


def test_bayesian_blocks_bins_every_value():
    rng = np.random.default_rng(2)
    x = np.r_[np.zeros(50), rng.normal(3.0, 0.3, 100), rng.normal(6.0, 0.3, 100)]
    e = pidc.bayesian_blocks_edges(x)
    assert e[0] == x.min() and e[-1] == x.max() and np.all(np.diff(e) > 0)
    assert 3 <= e.size - 1 <= 20  # three clusters of values, not one bin per value
    bins, n_bins = pidc.discretize(np.c_[x, np.ones_like(x)])
    assert n_bins[1] == 1 and np.all(bins[:, 1] == 0)
    assert bins[:, 0].min() == 0 and bins[:, 0].max() == n_bins[0] - 1
    assert np.all(bins[x == 0, 0] == 0)


def test_pidc_needs_three_genes():
    with pytest.raises(ValueError, match="at least 3 genes"):
        pidc.pidc(np.zeros((10, 2)))
