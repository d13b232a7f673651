"""The counts behind log-normalized single-cell values, where they can be read back exactly.

scanpy's ``normalize_total`` + ``log1p`` (and Seurat's ``LogNormalize``) store
``x = log(1 + c · s_i)`` for a cell i's counts c and its size factor ``s_i = target / library_i``.
Within one cell, ``expm1(x) / s_i`` are whole numbers, and the cell's smallest positive value is
one count wherever some gene has a single count in that cell, which in UMI data nearly every
cell has. So ``expm1(x)`` over its smallest positive value returns the counts; a cell whose
smallest count is 2–:data:`MAX_UNIT` is read with that unit instead. Values that are not of this
form (full-length reads normalized otherwise, TPM, values rounded to a few decimals, another
transform) do not come back as whole numbers, and nothing is recovered.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["MAX_UNIT", "WHOLE_TOL", "recover_counts"]

log = logging.getLogger("cape_pipeline.pp")

#: the largest count a cell's smallest positive value is tried as
MAX_UNIT = 4
#: a recovered value counts as whole within this distance of the nearest integer: float32
#: storage of x ≤ 30 moves ``expm1(x)`` by a relative 2⁻²⁴·30 ≈ 2e-6, so a count of 10,000
#: is read within 0.02
WHOLE_TOL = 0.05
#: the logarithm bases tried, in order: scanpy's and Seurat's natural log, then log2
BASES = (("e", np.expm1), ("2", lambda v: np.exp2(v) - 1.0))


def recover_counts(x: Any, *, quiet: bool = False) -> tuple[Any, dict[str, Any]] | None:
    """The counts of a cells × genes matrix of ``log(1 + counts · size factor)`` values.

    Parameters
    ----------
    x
        ``(N, M)`` dense array or scipy sparse matrix of non-negative log-normalized values
        (natural log or log2; any size factor per cell).
    quiet
        Do not log where nothing is recovered (a caller that checks blocks of a matrix logs once).

    Returns
    -------
    (counts, record) or None
        ``counts``: ``(N, M)`` float32 whole numbers, CSR where ``x`` is sparse, else dense;
        ``record``: ``base`` (``"e"`` or ``"2"``) and ``unit_shares`` (the share of cells whose
        smallest positive value is 1, 2, … counts). None (logged at INFO, with the share of cells
        that did not come back as whole numbers) when some cell's values are not whole multiples
        of a unit of :data:`MAX_UNIT` or fewer counts in either base. O(nnz · MAX_UNIT).
    """
    csr = sp.csr_array(x, dtype=np.float64) if sp.issparse(x) else sp.csr_array(np.asarray(x, dtype=np.float64))
    csr.eliminate_zeros()
    n = csr.shape[0]
    counts_per_row = np.diff(csr.indptr)
    live = counts_per_row > 0
    if not live.any() or (csr.data < 0).any() or not np.isfinite(csr.data).all():
        return None
    starts = csr.indptr[:-1][live]
    rows = np.repeat(np.arange(n), counts_per_row)
    worst_failed = 1.0
    for base, inverse in BASES:
        v = inverse(csr.data)
        smallest = np.full(n, np.nan)
        smallest[live] = np.minimum.reduceat(v, starts)
        unit = np.zeros(n, dtype=np.int64)  # 0: not yet read
        out = np.zeros_like(v)
        for m in range(1, MAX_UNIT + 1):
            todo = live & (unit == 0)
            if not todo.any():
                break
            c = v * (m / smallest[rows])
            dev = np.abs(c - np.rint(c))
            worst = np.zeros(n)
            worst[live] = np.maximum.reduceat(dev, starts)
            ok = todo & (worst <= WHOLE_TOL)
            unit[ok] = m
            sel = ok[rows]
            out[sel] = np.rint(c[sel])
        failed = float((live & (unit == 0)).mean())
        worst_failed = min(worst_failed, failed)
        if failed == 0.0:
            shares = {str(m): round(float((unit[live] == m).mean()), 6) for m in range(1, MAX_UNIT + 1)
                      if (unit[live] == m).any()}
            counts = sp.csr_array((out.astype(np.float32), csr.indices.copy(), csr.indptr.copy()), shape=csr.shape)
            return (sp.csr_matrix(counts) if sp.issparse(x) else counts.toarray()), {"base": base, "unit_shares": shares}
    if not quiet:
        log.info("preprocess: the log-normalized values do not invert to whole counts (%.1f %% of the cells are not "
                 "whole multiples of their smallest value); the counts stay unknown", 100 * worst_failed)
    return None
