"""How much a paired seed comparison can see: minimum detectable effects, seeds needed, and the
paired difference of every trained arm against the baseline.

The main job compares arms on the same seeds: a seed fixes the data split and the model's
initialization, so ``arm − baseline`` per seed removes the split's variance
(:func:`paired_differences`; the interval is scipy's ``ttest_rel(...).confidence_interval``).
For n paired seeds with difference sd s, the minimum detectable effect is the δ that a
two-sided paired t-test at level 1 − α detects with probability ``power``: statsmodels'
``TTestPower`` solves the noncentral-t power equation for the standardized effect δ / s
(Cohen 1988, Ch. 2). :func:`seeds_needed` solves the same equation for n. Both use the
*measured* sd of the paired differences, so they are only as good as that estimate (with 3
seeds it is rough: report n beside them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from cape_pipeline.errors import CapeConfigError

__all__ = [
    "adjust_family",
    "arm_of",
    "fmt_difference",
    "is_primary",
    "minimum_detectable_effect",
    "seeds_needed",
    "paired_differences",
    "arm_differences",
    "power_table",
    "higher_is_better",
    "POWER",
    "LOWER_IS_BETTER",
    "NEGLIGIBLE",
    "PRIMARY_METRICS",
]

POWER = 0.8
"""Default power of :func:`minimum_detectable_effect` and :func:`seeds_needed`."""



def arm_of(entry: Mapping[str, Any], default: str = "?") -> str:
    """The arm a train-stage result's ``params`` or a row of the report's ``metrics`` names.

    The key is ``arm``; ``results.json`` and ``report.json`` written before it was called so
    name it ``pe``, read here the same way (a result of :func:`~cape_pipeline.tasks.run_task`
    alone has only ``pe``, its positional encoding, which is its arm). ``default`` when neither
    key is there.
    """
    return str(entry.get("arm", entry.get("pe", default)))

def _check(level: float, power: float) -> None:
    if not (0 < level < 1 and 0 < power < 1):
        raise CapeConfigError(f"level and power: expected numbers in (0, 1), got {level!r} and {power!r}")


def minimum_detectable_effect(sd: float | None, n: int, *, level: float = 0.95, power: float = POWER) -> float | None:
    """The smallest true paired difference that ``n`` seeds detect with probability ``power``.

    Parameters
    ----------
    sd
        Standard deviation of the per-seed paired differences (metric units), ≥ 0, or ``None``.
    n
        Number of paired seeds.
    level, power
        Confidence level 1 − α of the two-sided test and the power, both in (0, 1).

    Returns
    -------
    float or None
        ``d · sd`` in the metric's units, with ``d`` the standardized effect that
        ``statsmodels.stats.power.TTestPower`` (one-sample t on the paired differences,
        two-sided, α = 1 − level) detects with probability ``power`` at ``n``; ``None`` when
        ``n < 2`` or ``sd`` is ``None`` / not finite.

    Raises
    ------
    CapeConfigError
        If ``level`` or ``power`` is outside (0, 1).
    """
    _check(level, power)
    if n < 2 or sd is None or not math.isfinite(sd):
        return None
    if sd == 0:
        return 0.0
    from statsmodels.stats.power import TTestPower

    d = TTestPower().solve_power(nobs=n, alpha=1.0 - level, power=power, alternative="two-sided")
    return float(d) * float(sd)


def seeds_needed(sd: float | None, effect: float, *, level: float = 0.95, power: float = POWER, max_n: int = 10_000) -> int | None:
    """The fewest paired seeds whose :func:`minimum_detectable_effect` is at most ``effect``.

    Parameters
    ----------
    sd
        Standard deviation of the per-seed paired differences, ≥ 0.
    effect
        The difference to detect (metric units), > 0.
    level, power
        As in :func:`minimum_detectable_effect`.
    max_n
        Give up above this many seeds (returns ``None``).

    Returns
    -------
    int or None
        n ≥ 2; 2 when ``sd`` is 0; ``None`` when ``sd`` is ``None`` / not finite or more than
        ``max_n`` seeds would be needed.

    Raises
    ------
    CapeConfigError
        If ``effect`` ≤ 0, or ``level`` / ``power`` is outside (0, 1).
    """
    _check(level, power)
    if not effect > 0:
        raise CapeConfigError(f"effect: expected a number > 0, got {effect!r}")
    if sd is None or not math.isfinite(sd):
        return None
    if sd == 0:
        return 2
    from statsmodels.stats.power import TTestPower

    # the n at which the paired t-test reaches ``power`` (continuous), rounded up
    n = TTestPower().solve_power(effect_size=float(effect) / float(sd), alpha=1.0 - level, power=power,
                                 alternative="two-sided")
    if not math.isfinite(float(n)):
        return None
    n = max(2, math.ceil(float(n) - 1e-9))
    return n if n <= max_n else None


def _mean_sd(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample sd (``None`` for a single value: one seed gives no spread)."""
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), (float(arr.std(ddof=1)) if arr.size > 1 else None)


LOWER_IS_BETTER = ("mse", "medae", "mae")
"""Metric-name prefixes where smaller is better (everything else: larger is better)."""

NEGLIGIBLE = 1e-3
"""Mean paired differences smaller than this (in the metric's units) read as ``negligible``
even when their interval excludes 0: with near-identical arms the spread can be ~0."""

def higher_is_better(metric: str) -> bool:
    """Direction of a task metric (``mse*``, ``medae``, ``mae``: lower is better)."""
    return not metric.startswith(LOWER_IS_BETTER)


def paired_differences(results: list[Any], arm: str = "cape", baseline: str = "none", level: float = 0.95) -> list[dict[str, Any]]:
    """Paired differences ``arm − baseline`` per task and metric, over the seeds both ran.

    Runs of the two arms with the same (task, seed) share the data split, so the difference
    per seed removes the split's variance. The interval is scipy's paired t-interval of the
    mean difference (``scipy.stats.ttest_rel(arm, baseline).confidence_interval(level)``,
    ``mean ± t_{(1+level)/2, n−1} · sd / √n``); ``None`` for n = 1.

    Returns
    -------
    list of dict
        ``{task, metric, n, mean, sd, differences, ci_low, ci_high, higher_is_better, verdict}``
        (``differences``: the per-seed ``arm − baseline`` values); ``verdict``
        is ``better`` / ``worse`` when the interval excludes 0 (in the metric's direction for
        ``arm``), ``negligible`` when it does but ``|mean| <`` :data:`NEGLIGIBLE`, else
        ``unclear``.
    """
    runs: dict[tuple[str, str, int], dict[str, float]] = {}
    for r in results:
        runs[(r.task, arm_of(r.params), int(r.params.get("seed", 0)))] = r.metrics
    rows = []
    tasks = list(dict.fromkeys(t for t, _, _ in runs))
    for task in tasks:
        seeds = sorted(s for t, a, s in runs if t == task and a == arm and (task, baseline, s) in runs)
        if not seeds:
            continue
        metrics = [m for m in runs[(task, arm, seeds[0])] if not m.startswith("reference_")]
        for metric in metrics:
            a = np.array([runs[(task, arm, s)][metric] for s in seeds], dtype=np.float64)
            b = np.array([runs[(task, baseline, s)].get(metric, np.nan) for s in seeds], dtype=np.float64)
            ok = np.isfinite(a - b)
            if not ok.any():
                continue
            diff = a[ok] - b[ok]
            mean, sd = _mean_sd(list(diff))
            row = {"task": task, "metric": metric, "n": int(ok.sum()), "mean": mean, "sd": sd,
                   "higher_is_better": higher_is_better(metric), "differences": [float(v) for v in diff]}
            rows.append(_at_level(row, level))
    return rows


def _at_level(row: dict[str, Any], level: float) -> dict[str, Any]:
    """``row`` (``n``, ``mean``, ``sd``, ``higher_is_better``, ``differences``) with scipy's
    paired t-interval at ``level`` (``ci_low``, ``ci_high``; ``None`` for n = 1) and the
    ``verdict`` it gives. The paired t-test is the one-sample t-test of the per-seed
    differences (``scipy.stats.ttest_rel(a, b)`` ≡ ``ttest_1samp(a − b, 0)``)."""
    from scipy import stats

    lo = hi = None
    verdict = "unclear"
    n, mean, sd = row["n"], row["mean"], row["sd"]
    if n > 1 and sd is not None:
        if sd > 0:
            ci = stats.ttest_1samp(row["differences"], 0.0).confidence_interval(confidence_level=level)
            lo, hi = float(ci.low), float(ci.high)
        else:  # every seed moved by the same amount: a point interval
            lo = hi = mean
        if lo > 0 or hi < 0:
            verdict = ("better" if (lo > 0) == row["higher_is_better"] else "worse") if abs(mean) >= NEGLIGIBLE else "negligible"
    return {**row, "ci_low": lo, "ci_high": hi, "verdict": verdict}


def arm_differences(results: list[Any], baseline: str = "none", level: float = 0.95,
                    power: float = POWER) -> list[dict[str, Any]]:
    """Paired ``arm − baseline`` differences of every arm a run trained, with their minimum
    detectable effect: the rows of the report's forest plot.

    Parameters
    ----------
    results
        Task results (``.task``, ``.params["arm"]``, ``.params["seed"]``, ``.metrics``) of the
        train stage; an arm is the ``arm`` value (``cape``, ``cape-learned-scale``,
        ``none/no-id`` …; read by :func:`arm_of`).
    baseline
        The arm every other arm is compared with.
    level, power
        Interval level and the power of the minimum detectable effect.

    Returns
    -------
    list of dict
        One row per (arm, task, metric): the fields of
        :func:`~cape_pipeline.report.build.paired_differences` plus ``arm``, ``baseline``
        and ``mde`` (``None`` below 2 seeds). Arms in first-seen order; empty when the
        baseline was not trained.
    """
    arms = list(dict.fromkeys(arm_of(r.params) for r in results))
    if baseline not in arms:
        return []
    return [{"arm": arm, "baseline": baseline, **row,
             "mde": minimum_detectable_effect(row["sd"], row["n"], level=level, power=power)}
            for arm in arms if arm != baseline for row in paired_differences(results, arm, baseline, level)]


def power_table(rows: list[dict[str, Any]], targets: dict[str, float]) -> list[dict[str, Any]]:
    """For each row whose metric has a target effect, the seeds needed to detect it.

    ``targets`` maps a metric name (``accuracy``, ``ari`` …) to the effect to detect. Returns the
    rows (``arm``, ``task``, ``metric``, ``n``, ``sd``, ``mde``) with ``target`` and
    ``seeds_needed`` added (``None`` where the sd is unknown)."""
    out = []
    for r in rows:
        if r["metric"] in targets:
            eff = float(targets[r["metric"]])
            out.append({**{k: r.get(k) for k in ("arm", "task", "metric", "n", "sd", "mde")}, "target": eff,
                        "seeds_needed": seeds_needed(r["sd"], eff) if r.get("sd") is not None else None})
    return out


PRIMARY_METRICS = {
    "annotation": ("macro_f1", "accuracy"),
    "clustering": ("ari", "nmi"),
    "perturbation": ("mse_top20_single", "mse_top20_double", "mse_top20"),
    "age": ("medae",),
}
"""The main metrics of each task: the verdict reads them, and their intervals are adjusted for
their number (:func:`adjust_family`)."""


def is_primary(row: dict[str, Any]) -> bool:
    """Whether a difference row is one of its task's :data:`PRIMARY_METRICS`."""
    return row["metric"] in PRIMARY_METRICS.get(row["task"], ())


def adjust_family(rows: list[dict[str, Any]], level: float = 0.95, power: float = POWER) -> list[dict[str, Any]]:
    """The report's one interval per paired difference: ``rows`` (of :func:`paired_differences`
    or :func:`arm_differences`) with the intervals of each arm's main metrics
    (:data:`PRIMARY_METRICS`) Bonferroni-adjusted for their number k, each at
    ``1 − (1 − level) / k`` so that the k hold together at ``level``; the other metrics keep their
    ``level`` interval.

    Each row gains ``level`` (the interval's own level) and ``adjusted_for`` (k, or ``None`` when
    not adjusted); its ``verdict`` is read from that interval, and where the row has an ``mde``
    it is recomputed at that level. Rows keep their order.
    """
    k: dict[str, int] = {}
    for r in rows:
        if is_primary(r):
            k[r.get("arm", "")] = k.get(r.get("arm", ""), 0) + 1
    out = []
    for r in rows:
        fam = k.get(r.get("arm", ""), 0) if is_primary(r) else 0
        lv = 1.0 - (1.0 - level) / fam if fam > 1 else level
        row = {**_at_level(r, lv), "level": lv, "adjusted_for": fam if fam > 1 else None}
        if "mde" in r:
            row["mde"] = minimum_detectable_effect(r["sd"], r["n"], level=lv, power=power)
        out.append(row)
    return out


def fmt_difference(mean: float, lo: float | None, hi: float | None) -> str:
    """``+0.012 [-0.034, +0.056]``: a paired difference and its interval, 3 decimals (4 when
    every number is below 0.01 in size); the interval is left out when there is none."""
    vals = [abs(v) for v in (mean, lo, hi) if v is not None]
    spec = "+.4f" if max(vals, default=0.0) < 0.01 else "+.3f"
    return f"{mean:{spec}}" + ("" if lo is None or hi is None else f" [{lo:{spec}}, {hi:{spec}}]")
