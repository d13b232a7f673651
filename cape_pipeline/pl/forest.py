"""Forest plot of paired differences arm − baseline with their intervals and minimum detectable
effects (the rows of :func:`cape_pipeline.report.power.arm_differences`)."""

from __future__ import annotations

from typing import Any

__all__ = ["forest_plot"]


def forest_plot(rows: list[dict[str, Any]], *, title: str = "Paired differences against the baseline") -> Any:
    """One line per (task, metric, arm): the mean paired difference (diamond), its interval
    (bar) and ± the minimum detectable effect (grey band), against 0.

    Parameters
    ----------
    rows
        Dicts with ``arm``, ``baseline``, ``task``, ``metric``, ``mean``, ``ci_low``,
        ``ci_high`` (``None`` below 2 seeds), ``mde`` (``None`` when unknown), ``n`` and
        ``higher_is_better``.
    title
        The figure title.

    Returns
    -------
    matplotlib.figure.Figure or None
        ``None`` when ``rows`` is empty. The caller saves and closes it.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if not rows:
        return None
    rows = sorted(rows, key=lambda r: (r["task"], r["metric"]))
    arms = list(dict.fromkeys(r["arm"] for r in rows))
    fig, ax = plt.subplots(figsize=(9.5, 0.9 + 0.32 * len(rows)))
    for i, r in enumerate(rows):
        y = len(rows) - 1 - i
        color = plt.cm.tab10(arms.index(r["arm"]) % 10)
        if r.get("mde") is not None:
            ax.fill_betweenx([y - 0.3, y + 0.3], -r["mde"], r["mde"], color="0.88", lw=0, zorder=0)
        if r.get("ci_low") is not None:
            ax.plot([r["ci_low"], r["ci_high"]], [y, y], color=color, lw=2, zorder=1)
        ax.scatter([r["mean"]], [y], marker="D", color=color, zorder=2, s=22)
    ax.axvline(0, color="k", lw=0.8)
    labels = [f"{'* ' if r.get('adjusted_for') else ''}{r['task']} {r['metric']}"
              f"{'' if r.get('higher_is_better', True) else ' (lower better)'} · {r['arm']} (n={r['n']})" for r in rows]
    ax.set_yticks(range(len(rows)), labels[::-1], fontsize=7)
    base = rows[0].get("baseline", "baseline")
    ax.set_xlabel(f"arm − {base}\ndiamond: mean over paired seeds; bar: {_interval_words(rows)}; grey: ± minimum "
                  "detectable effect (power 0.8)", fontsize=8)
    ax.set_title(title, fontsize=10)
    handles = [plt.Line2D([], [], color=plt.cm.tab10(k % 10), marker="D", lw=2, label=a) for k, a in enumerate(arms)]
    # beside the axes, not over the rows (with many arms "lower right" covered the last rows)
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="arm", title_fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def _interval_words(rows: list[dict[str, Any]]) -> str:
    """What the bars are: a 95 % interval, or (rows of
    :func:`~cape_pipeline.report.power.adjust_family`) which are Bonferroni-adjusted."""
    ks = sorted({r["adjusted_for"] for r in rows if r.get("adjusted_for")})
    if not ks:
        return "95 % interval"
    if len(ks) == 1:
        return f"interval, 95 % (* main metrics: {100 * (1 - 0.05 / ks[0]):.4g} % each, Bonferroni-adjusted for {ks[0]})"
    return "interval, 95 % (* main metrics: Bonferroni-adjusted for their number per arm)"
