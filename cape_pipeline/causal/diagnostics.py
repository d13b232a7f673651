"""Diagnostics of a discovered graph: edge count, features without an edge, and the warnings
that tell a user what to change (:func:`isolation_report`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["FEW_ROWS_RATIO", "ISOLATED_WARN_SHARE", "isolation_report"]


#: more than this share of features without an edge gets a warning (CapeWarning)
ISOLATED_WARN_SHARE = 0.5


FEW_ROWS_RATIO = 1.0
"""The learned algorithm warns when rows / features is below this (see :func:`isolation_report`)."""


def isolation_report(
    adj: sp.csr_array, m: int, *, threshold: float, method: str, algorithm: str | None, scores: np.ndarray | None,
    n_obs: int | None = None, min_effect: float | None = None,
) -> dict[str, Any]:
    """Edge count, isolated features and, when most features have no edge, a warning with the fix;
    with the learned algorithm on fewer rows than features, a warning that most edges may be false
    (measured: ``benchmarks/discover/counts/RESULTS.md``).

    The warning is issued here (``warnings.warn`` with :class:`~cape_pipeline.errors.CapeWarning`,
    so library callers see it) and recorded in ``params["warnings"]`` (the pipeline reports it).
    """
    import warnings

    from cape_pipeline.causal.graph import degree
    from cape_pipeline.errors import CapeWarning

    a = sp.csr_array(adj)
    n_iso = int((degree(a) == 0).sum())
    share = n_iso / max(m, 1)
    out: dict[str, Any] = {"n_edges": int(a.nnz), "n_isolated": n_iso, "isolated_share": round(share, 4)}
    msgs: list[str] = []
    if share > ISOLATED_WARN_SHARE:
        lower = threshold / 2 if threshold > 0 else 0.0
        if a.nnz == 0 and scores is not None and scores.size:
            top = float(np.abs(scores).max())
            lower = max(min(lower, top / 3), 1e-3)
        what = "no edge at all" if a.nnz == 0 else f"only {a.nnz} edge(s)"
        if method == "cape" and algorithm == "regression" and min_effect is not None:
            half = min_effect / 2
            msgs.append(
                f"discover: {n_iso} of {m} features ({share:.0%}) have no edge ({what} passed the edge test: "
                f"partial R² > {min_effect:g} at the FDR), so they get angle 0 and CAPE leaves them unrotated; "
                f"more cells give the test more power, or lower the effect floor (Python: regression={{'min_effect': "
                f"{half:g}}}; CLI: --set discover.regression.min_effect={half:g}), which admits weaker and more often "
                "false edges"
            )
        else:
            own = {"low-rank": "low_rank"}.get(algorithm or "", algorithm) if method == "cape" else None
            python = f"{own}={{'threshold': {lower:.3g}}}" if own else f"threshold={lower:.3g}"
            cli = f"discover.{own}.threshold" if own else "discover.threshold"
            fix = f"lower the threshold (Python: {python}; CLI: --set {cli}={lower:.3g})"
            if method == "cape" and algorithm in ("low-rank", "screened"):
                fix += "; or use the learned algorithm (algorithm='learned'; CLI: --set discover.algorithm=learned)"
            msgs.append(
                f"discover: {n_iso} of {m} features ({share:.0%}) have no edge ({what} passed threshold "
                f"{threshold:g}), so they get angle 0 and CAPE leaves them unrotated; to keep more edges, {fix}"
            )
    if method == "cape" and algorithm == "learned" and n_obs is not None and n_obs < FEW_ROWS_RATIO * m and a.nnz:
        msgs.append(
            f"discover: {n_obs} rows for {m} features: with fewer rows than features the learned algorithm "
            "over-calls edges (simulated counts with a known graph, 1,000 cells × 2,000 genes: 5 % of its "
            "6,150 edges were true, against 51 % at 3,000 cells; benchmarks/discover/counts/RESULTS.md); "
            "treat this graph as exploratory, give more cells, or use the regression algorithm "
            "(algorithm='regression'; CLI: --set discover.algorithm=regression)"
        )
    for msg in msgs:
        warnings.warn(msg, CapeWarning, stacklevel=4)
    out["warnings"] = msgs
    return out
