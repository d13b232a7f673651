"""Paper 000's Figs. S2 and S3 as checks: small versions of the full-size runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from cape_pipeline.cli import main
from cape_pipeline.encodings.rope import apply_rotary
from cape_pipeline.errors import CapeConfigError, CapeFileError
from cape_pipeline.paper.theory import (
    FIGS2_FILES,
    FIGS3_FILES,
    attention_bias_noise,
    attention_bound_surface,
    attention_score,
    monotonicity_report,
    reproduce_figS2,
    reproduce_figS3,
)

DIST = np.linspace(1, 5, 9)
NORM = np.linspace(0.05, 0.95, 10)


def _strict_json(path):
    def no_constant(name):
        raise ValueError(f"{path}: non-finite JSON constant {name}")

    return json.loads(path.read_text(), parse_constant=no_constant)


@pytest.mark.parametrize("dim", [8, 128])
def test_bound_decreases_with_distance_and_generality(dim):
    """Prop. 4.1: A⁺ falls as d_p grows (fixed r); Prop. 4.2: A⁺ falls as ψ = 1 − r grows (fixed d_p)."""
    s = attention_bound_surface(DIST, NORM, dim=dim, seed=1)
    assert s.a_plus.shape == (DIST.size, NORM.size)
    assert (np.diff(s.a_plus, axis=0) < 0).all()  # along d_p
    assert (np.diff(s.a_plus[:, ::-1], axis=1) < 0).all()  # along ψ (r decreasing)
    rep = monotonicity_report(s.a_plus, s.distance, s.norm, axis=0, names=("distance", "norm"))
    assert rep["fraction_decreasing"] == 1.0 and rep["n_not_decreasing"] == 0 and rep["max_change"] < 0
    assert (s.a_plus > 0).all()  # A⁺ > 0 (Prop. 4.1)


def test_bound_is_eq_a59_and_bounds_the_score():
    s = attention_bound_surface(DIST, NORM, dim=16, seed=2)
    d = 8
    np.testing.assert_allclose(s.delta_norm, (1 - NORM[None] ** 2) * np.sinh(DIST[:, None] / 2))  # Eq. A.70
    direct = s.alpha_star * d * np.cos(math.pi / 4 * s.delta_norm / d) + s.beta_abs_sum  # Eq. A.59
    np.testing.assert_allclose(s.a_plus, direct, rtol=1e-13)
    feas = s.feasible
    assert feas.any() and not feas.all()
    assert (s.delta_norm[feas] <= 2 * NORM[None].repeat(DIST.size, 0)[feas]).all()
    # the constructed pairs have the requested Poincaré distance (Eq. 28) and |A| <= A⁺
    np.testing.assert_allclose(s.distance_check[feas], np.broadcast_to(DIST[:, None], feas.shape)[feas], atol=1e-9)
    assert (np.abs(s.score[feas]) <= s.a_plus[feas]).all()
    assert np.isnan(s.score[~feas]).all()


def test_monotonicity_report_finds_increases():
    coords, other = np.arange(5.0), np.array([0.1, 0.2])
    increasing = np.add.outer(coords, other)
    rep = monotonicity_report(increasing, coords, other, axis=0, names=("x", "y"))
    assert rep["fraction_decreasing"] == 0.0 and rep["n_not_decreasing"] == 8 and rep["max_change"] == pytest.approx(1.0)
    dip = -increasing
    dip[3, 1] = 10.0  # one bump: steps 2→3 rises, 3→4 falls
    rep = monotonicity_report(dip, coords, other, axis=0, names=("x", "y"))
    assert rep["n_not_decreasing"] == 1 and rep["fraction_decreasing"] == pytest.approx(7 / 8)
    assert rep["not_decreasing"] == [{"x_from": 2.0, "x_to": 3.0, "y": 0.2, "change": pytest.approx(12.2)}]
    assert monotonicity_report(dip.T, coords, other, axis=1, names=("x", "y"))["n_not_decreasing"] == 1


def test_attention_score_is_rotary_inner_product():
    """Eq. A.50: ⟨R(φ_m) q, R(φ_n) k⟩ = qᵀ R(φ_n − φ_m) k, with the package's rotary convention."""
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal(12), rng.standard_normal(12)
    phi = rng.uniform(-math.pi / 4, math.pi / 4, size=(5, 2, 6))
    ours = attention_score(q, k, phi[:, 0], phi[:, 1])
    rq = apply_rotary(torch.tensor(q).expand(5, 1, 12), torch.tensor(phi[:, :1]))
    rk = apply_rotary(torch.tensor(k).expand(5, 1, 12), torch.tensor(phi[:, 1:]))
    np.testing.assert_allclose(ours, (rq * rk).sum(-1).squeeze(-1).numpy(), rtol=1e-12)


def test_bias_concentrates():
    """Prop. A.10: the spread of ξ_N shrinks with N (≈ N^-1/2), its mean is E(ξ_N) of Eq. A.101 ≈ 0."""
    b = attention_bias_noise((0.1, 0.3), n_max=40, repeats=60, dim=32, seed=3)
    assert b.xi.shape == (2, 40, 60) and (b.n == np.arange(1, 41)).all()
    for s in range(2):
        x = b.xi[s]
        sd, mx = x.std(1, ddof=1), np.abs(x).max(1)
        slope = np.polyfit(np.log(b.n), np.log(sd), 1)[0]
        assert -0.75 < slope < -0.3
        assert sd[-4:].mean() < 0.45 * sd[:4].mean() and mx[-4:].mean() < mx[:4].mean()
        pooled = (x * b.n[:, None]).sum() / (b.n.sum() * 60)
        se = sd[0] / math.sqrt(b.n.sum() * 60)
        assert abs(pooled - b.expected_bias[s]) < 4.5 * se
        assert abs(pooled) < 0.25 * sd[0]
    assert b.expected_bias[1] / b.expected_bias[0] == pytest.approx(math.expm1(-0.09) / math.expm1(-0.01))
    pos = attention_bias_noise((0.2,), n_max=3, repeats=2, dim=8, noise="position")
    assert pos.angle_sigma[0] == pytest.approx(0.2 * math.pi / 4)


def test_bias_spread_check_fails_without_noise_shrinkage():
    """The concentration check can fail: terms that do not average out (N·ξ_N) keep their spread."""
    b = attention_bias_noise((0.3,), n_max=40, repeats=60, dim=32, seed=3)
    sums = b.xi[0] * b.n[:, None]  # a sum, not an average: spread grows like sqrt(N)
    slope = np.polyfit(np.log(b.n), np.log(sums.std(1, ddof=1)), 1)[0]
    assert slope > 0


@pytest.mark.parametrize(
    "fn,kwargs,needle",
    [
        (attention_bound_surface, {"distance": [0.0, 1.0], "norm": NORM}, "distance"),
        (attention_bound_surface, {"distance": [2.0, 1.0], "norm": NORM}, "distance"),
        (attention_bound_surface, {"distance": DIST, "norm": [0.5, 1.0]}, "norm"),
        (attention_bound_surface, {"distance": DIST, "norm": NORM, "dim": 7}, "dim"),
        (attention_bound_surface, {"distance": DIST, "norm": NORM, "seed": -1}, "seed"),
        (attention_bias_noise, {"sigma": 0.0}, "sigma"),
        (attention_bias_noise, {"sigma": [0.1, 1.0]}, "sigma"),
        (attention_bias_noise, {"n_max": 0}, "n_max"),
        (attention_bias_noise, {"repeats": 1}, "repeats"),
        (attention_bias_noise, {"noise": "gamma"}, "noise"),
        (attention_bias_noise, {"dim": 3}, "dim"),
    ],
)
def test_bad_parameters(fn, kwargs, needle):
    with pytest.raises(CapeConfigError, match=f"^{needle}:"):
        fn(**kwargs)


@pytest.mark.parametrize(
    "fn,kwargs,needle",
    [(reproduce_figS2, {"n_distance": 1}, "n_distance"), (reproduce_figS2, {"dim": True}, "dim"),
     (reproduce_figS3, {"n_max": 1.5}, "n_max"), (reproduce_figS3, {"seed": 2**32}, "seed")],
)
def test_reproduce_bad_parameters_write_nothing(tmp_path, fn, kwargs, needle):
    with pytest.raises(CapeConfigError, match=needle):
        fn(tmp_path / "o", **kwargs)
    assert not (tmp_path / "o").exists()
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(CapeFileError, match="not a directory"):
        fn(f)


def test_reproduce_figS2_files(tmp_path):
    rec = reproduce_figS2(tmp_path, seed=4, n_distance=6, n_norm=7, dim=16)
    assert set(rec["files"]) == set(FIGS2_FILES)
    for name in FIGS2_FILES.values():
        assert (tmp_path / name).stat().st_size > 0
    assert (tmp_path / FIGS2_FILES["surface"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*.tmp"))
    assert _strict_json(tmp_path / "figS2.json") == rec
    for key in ("monotonic_in_distance", "monotonic_in_generality"):
        assert rec[key]["all"]["fraction_decreasing"] == 1.0 and rec[key]["all"]["not_decreasing"] == []
        assert rec[key]["feasible"]["n_steps"] < rec[key]["all"]["n_steps"]
    assert rec["bound_holds"] == 1.0 and rec["distance_check_max_error"] < 1e-9
    assert rec["command"] == f"cape reproduce figS2 --out {tmp_path} --seed 4 --n-distance 6 --n-norm 7 --dim 16"
    df = pd.read_csv(tmp_path / "figS2_bound.csv")
    assert len(df) == 42 and df["a_plus"].max() == pytest.approx(rec["a_plus_range"][1])
    np.testing.assert_allclose(df["a_minus"], -df["a_plus"])


def test_reproduce_figS3_files(tmp_path):
    rec = reproduce_figS3(tmp_path, seed=5, sigma=(0.1, 0.3), n_max=30, repeats=40, dim=16)
    for name in FIGS3_FILES.values():
        assert (tmp_path / name).stat().st_size > 0
    assert _strict_json(tmp_path / "figS3.json") == rec
    assert [p["sigma"] for p in rec["per_sigma"]] == [0.1, 0.3]
    for p in rec["per_sigma"]:
        assert p["spread_shrinks"] and p["sd_last"] < p["sd_first"] and p["sd_slope_loglog"] < 0
        assert p["hoeffding_exceed_fraction"] == 0.0  # Eq. A.96 holds (it is loose)
    xi = pd.read_csv(tmp_path / "figS3_xi.csv")
    assert len(xi) == 2 * 30 * 40 and list(xi.columns) == ["sigma", "N", "repeat", "xi"]
    stats = pd.read_csv(tmp_path / "figS3_stats.csv")
    grouped = xi.groupby(["sigma", "N"])["xi"].std().to_numpy()
    np.testing.assert_allclose(stats["sd"], grouped, rtol=1e-6)
    assert rec["command"].endswith("--sigma 0.1 --sigma 0.3 --n-max 30 --repeats 40 --dim 16 --noise angle")


def test_cli_figS2_and_figS3(tmp_path, capsys):
    code = main(["reproduce", "figS2", "--out", str(tmp_path / "s2"), "--n-distance", "4", "--n-norm", "5", "--dim", "8"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert "decreasing in distance" in cap.out and f"wrote {tmp_path / 's2' / 'figS2.json'}" in cap.out
    assert all((tmp_path / "s2" / n).is_file() for n in FIGS2_FILES.values())
    args = ["reproduce", "figS3", "--out", str(tmp_path / "s3"), "--sigma", "0.2", "--n-max", "12", "--repeats", "20"]
    code = main([*args, "--dim", "8", "--seed", "7"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    rec = _strict_json(tmp_path / "s3" / "figS3.json")
    assert rec["seed"] == 7 and rec["sigma"] == [0.2] and rec["n_max"] == 12 and rec["repeats"] == 20
    out = tmp_path / "s3"
    assert rec["command"] == f"cape reproduce figS3 --out {out} --seed 7 --sigma 0.2 --n-max 12 --repeats 20 --dim 8 --noise angle"


@pytest.mark.parametrize(
    "args,needle",
    [(["figS2", "--dim", "7"], "dim: expected an even integer"), (["figS3", "--noise", "x"], "noise: expected"),
     (["figS3", "--sigma", "2"], "sigma: expected")],
)
def test_cli_bad_input_exit_2(tmp_path, capsys, args, needle):
    code = main(["reproduce", args[0], "--out", str(tmp_path / "o"), *args[1:]])
    err = capsys.readouterr().err
    assert code == 2 and needle in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
