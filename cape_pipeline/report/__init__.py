"""The main job's report (``report.md`` / ``report.json``, written by the evaluate stage) and its
statistics: paired differences across seeds, their intervals and p-values (scipy), Holm's
step-down and the power of the comparison (statsmodels).

- :mod:`.build`: :class:`Report`, :func:`build_report`, :func:`render_markdown` and the
  aggregates they print (mean ± sd per PE × task, paired differences, verdicts);
- :mod:`.lead`: the report's opening (the verdict, the strongest classical baseline, where the
  encodings are and the lines that load them) and its table of paired differences, one interval
  per quantity;
- :mod:`.sections`: the report's text sections (what the run did, the DAG, the embedding, the
  hubs);
- :mod:`.power`: minimum detectable effect, seeds needed, paired differences per arm, and the
  Bonferroni adjustment of each arm's main metrics.

The pipeline (``pipeline.stages.evaluate``) calls it; it knows nothing of the pipeline.
"""

from __future__ import annotations

from cape_pipeline.report.build import (
    Report,
    aggregate_metrics,
    angle_quantiles,
    build_report,
    primary_differences,
    render_markdown,
    spearman_norm_pagerank,
    verdict_sentence,
)
from cape_pipeline.report.power import (
    arm_differences,
    minimum_detectable_effect,
    paired_differences,
    power_table,
    seeds_needed,
)

__all__ = [
    "Report",
    "aggregate_metrics",
    "angle_quantiles",
    "arm_differences",
    "build_report",
    "minimum_detectable_effect",
    "paired_differences",
    "power_table",
    "primary_differences",
    "render_markdown",
    "seeds_needed",
    "spearman_norm_pagerank",
    "verdict_sentence",
]
