"""Power of the paired seed comparison: minimum detectable effect, seeds needed, and every trained
arm against the baseline in the report and its forest plot."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from cape_pipeline.errors import CapeConfigError
from cape_pipeline.report.power import (
    arm_differences,
    minimum_detectable_effect,
    power_table,
    seeds_needed,
)
from cape_pipeline.tasks import TaskResult


def test_mde_is_statsmodels_ttestpower_and_shrinks_with_seeds():
    from scipy import stats
    from statsmodels.stats.power import TTestPower

    sd, n = 0.04, 10
    mde = minimum_detectable_effect(sd, n)
    # at the MDE the paired t-test has exactly the asked power
    assert TTestPower().power(mde / sd, n, 0.05, alternative="two-sided") == pytest.approx(0.8, abs=1e-6)
    # and it is close to the textbook normal-approximation formula with t quantiles
    approx = (stats.t.ppf(0.975, 9) + stats.t.ppf(0.8, 9)) * sd / math.sqrt(n)
    assert mde == pytest.approx(approx, rel=0.05)
    assert minimum_detectable_effect(sd, 30) < minimum_detectable_effect(sd, 10) < minimum_detectable_effect(sd, 3)
    assert minimum_detectable_effect(sd, 1) is None and minimum_detectable_effect(None, 5) is None
    with pytest.raises(CapeConfigError, match="power"):
        minimum_detectable_effect(sd, 5, power=1.5)


def test_seeds_needed_is_the_smallest_n_that_reaches_the_effect():
    sd, eff = 0.04, 0.02
    n = seeds_needed(sd, eff)
    assert minimum_detectable_effect(sd, n) <= eff < minimum_detectable_effect(sd, n - 1)
    assert 30 < n < 40  # ≈ ((1.96 + 0.84) · 2)² = 31.4, a little more with t quantiles
    assert seeds_needed(0.0, eff) == 2 and seeds_needed(None, eff) is None
    assert seeds_needed(10.0, 0.001, max_n=100) is None
    with pytest.raises(CapeConfigError, match="effect"):
        seeds_needed(sd, 0.0)


def _results() -> list[TaskResult]:
    rng = np.random.default_rng(0)
    out = []
    for seed in range(6):
        base = 0.7 + 0.05 * rng.normal()
        for pe, shift in (("none", 0.0), ("cape", 0.01), ("cape-learned-scale", 0.05), ("none/no-id", -0.1)):
            out.append(TaskResult("annotation", {"accuracy": base + shift + 0.005 * rng.normal(),
                                                 "reference_accuracy": 0.8}, params={"arm": pe, "seed": seed}))
    return out


def test_every_arm_against_the_baseline_with_its_mde():
    rows = arm_differences(_results())
    assert [r["arm"] for r in rows] == ["cape", "cape-learned-scale", "none/no-id"]
    by = {r["arm"]: r for r in rows}
    assert by["cape-learned-scale"]["verdict"] == "better" and by["none/no-id"]["verdict"] == "worse"
    assert by["cape"]["mean"] == pytest.approx(0.01, abs=0.01)
    for r in rows:
        assert r["baseline"] == "none" and r["n"] == 6
        assert r["mde"] == pytest.approx(minimum_detectable_effect(r["sd"], 6))
    assert arm_differences(_results(), baseline="absent") == []
    (p,) = [r for r in power_table(rows, {"accuracy": 0.02}) if r["arm"] == "cape"]
    assert p["seeds_needed"] == seeds_needed(by["cape"]["sd"], 0.02)


def test_report_lists_every_arm_and_draws_the_forest():
    import matplotlib.pyplot as plt

    from cape_pipeline.pl.forest import forest_plot
    from cape_pipeline.report.build import _comparison
    from cape_pipeline.report.lead import difference_lines

    res = _results()
    train = SimpleNamespace(results=res, arms=["cape", "none", "cape-learned-scale", "none/no-id"])
    comp = _comparison(train)
    assert comp["arm"] == "cape" and {r["arm"] for r in comp["arms"]} == {"cape", "cape-learned-scale", "none/no-id"}
    lines = difference_lines({"comparison": comp})
    assert any(ln.startswith("| cape-learned-scale | annotation | **accuracy** |") and "| better |" in ln
               for ln in lines)
    fig = forest_plot(comp["arms"])
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == 3 and "cape-learned-scale" in ax.get_yticklabels()[1].get_text() + \
        "".join(t.get_text() for t in ax.get_yticklabels())
    plt.close(fig)
    assert forest_plot([]) is None
    one = SimpleNamespace(results=[r for r in res if r.params["arm"] in ("cape", "none")], arms=["cape", "none"])
    rows = [ln for ln in difference_lines({"comparison": _comparison(one)}) if ln.startswith("| cape |")]
    assert len(rows) == 1 and "| **accuracy** |" in rows[0]  # one arm: its row alone


def test_report_line_on_how_much_the_models_use_their_angles():
    from cape_pipeline.report.build import _comparison
    from cape_pipeline.report.sections import angle_use_lines

    res = _results()
    abl = {"embedding_change": 0.03, "prediction_change": 0.004, "probability_change": 0.01,
           "angle_abs_median": 0.07, "angle_abs_max": 0.4, "zero_angle_share": 0.0}
    res[1].params["angle_ablation"] = abl  # the cape run of seed 0
    comp = _comparison(SimpleNamespace(results=res, arms=["cape", "none"]))
    assert comp["angle_use"] == {"cape": abl}
    (line,) = [ln for ln in angle_use_lines(comp) if ln]
    assert "`cape`: embeddings 3.0 %, labels 0.40 %" in line and "barely uses its angles" in line
    assert angle_use_lines({"angle_use": {}}) == []
