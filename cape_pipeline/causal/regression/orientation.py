"""Orientation of an undirected skeleton by greedy likelihood insertion — CAM's IncEdge
(Bühlmann, Peters & Ernst 2014, *Ann. Statist.* 42:2526, Sec. 4.2) on the skeleton accepted by
the regression algorithm's edge test (:mod:`cape_pipeline.causal.regression`, step 4)."""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np

from cape_pipeline.causal.postprocess import reaches

__all__ = ["greedy_likelihood_dag"]


def _pair_covariances(z: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``(P,)`` ``mean(z[:, r] · z[:, c])`` for index pairs, in blocks of about 2²² entries."""
    n = z.shape[0]
    out = np.empty(rows.size)
    step = max(1, (1 << 22) // max(n, 1))
    for s in range(0, rows.size, step):
        out[s : s + step] = np.einsum("ij,ij->j", z[:, rows[s : s + step]], z[:, cols[s : s + step]]) / n
    return out


def greedy_likelihood_dag(
    z: np.ndarray, a: np.ndarray, b: np.ndarray, *, keep: np.ndarray | None = None,
    may_parent: np.ndarray | None = None, gram: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Orient an undirected skeleton by greedy likelihood insertion (CAM's IncEdge), acyclic.

    Every pair {a, b} may enter as a → b or b → a; the edge inserted next is the one whose
    Gaussian log-likelihood gain ``−(N/2)·log(RSS_c(pa(c) ∪ {p}) / RSS_c(pa(c)))`` is largest
    given the current parents of its child, unless it closes a cycle. Ties (two features
    without parents gain the same in both orientations) go to the orientation whose parent
    has the larger skeleton degree. Gains are recomputed lazily when a child's parents change.
    It uses the observed covariances even where the regressions are corrected for counting
    noise: corrected, a lone pair's two orientations no longer tie, and the noisier gene would
    win the parent's place whatever the truth.

    With ``keep`` (interventions), a feature's conditional is scored on the rows where it was not
    perturbed (the interventional likelihood of DCDI / SDCD with perfect interventions): if p
    was perturbed, p → c fits c's shifted values while c → p must explain p's, which did not
    follow c, so the direction the interventions support gains more.

    Parameters
    ----------
    z
        ``(N, M)`` standardized matrix.
    a, b
        ``(E,)`` int64 endpoints of the skeleton's pairs (each unordered pair once).
    keep
        ``(N, M)`` bool, the rows that count in each feature's conditional, or None (all).
    may_parent
        ``(M,)`` bool, the features that may be parents (the listed regulators,
        ``DiscoverConfig.regulators``), or None (all). A pair with one such endpoint can only
        point from it; between two, the gains decide as above.

    Returns
    -------
    parent, child
        ``(E',)`` int64 oriented edges, E' ≤ E (a pair is left out only when both orientations
        would close a cycle, which cannot happen for a pair that is not yet connected, or, with
        ``may_parent``, when neither endpoint may be a parent). With ``may_parent``, a
        regulator → non-regulator edge closes no cycle (a non-regulator has no children).
    gram
        ``(M, M)`` ``zᵀz`` (numpy or a torch tensor, :func:`~cape_pipeline.causal.regression.neighbourhood.gram_matrix`),
        or None: the covariances are read from it instead of a pass over ``z``'s columns (the
        same up to the order of the float64 sums). Not with ``keep``, whose perturbed children
        need their own rows.
    """
    n = z.shape[0]
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if a.size == 0:
        return a, b
    nodes, inv = np.unique(np.r_[a, b], return_inverse=True)
    la, lb = inv[: a.size], inv[a.size :]
    deg = np.bincount(np.r_[la, lb], minlength=nodes.size)
    nbrs: list[list[int]] = [[] for _ in range(nodes.size)]
    for u, v in zip(la.tolist(), lb.tolist(), strict=True):
        nbrs[u].append(v)
        nbrs[v].append(u)
    # covariances among {c} ∪ nbrs(c) for every c, computed once for the unique pairs needed
    need_r, need_c = [], []
    for c, nb in enumerate(nbrs):
        ids = [c, *nb]
        rr, cc = np.triu_indices(len(ids))
        need_r.append(np.asarray(ids)[rr])
        need_c.append(np.asarray(ids)[cc])
    pr, pc = np.concatenate(need_r), np.concatenate(need_c)
    key = np.minimum(pr, pc) * nodes.size + np.maximum(pr, pc)
    uniq = np.unique(key)
    if gram is not None and keep is None:
        g = gram.cpu().numpy() if hasattr(gram, "cpu") else np.asarray(gram)
        cov_u = g[nodes[uniq // nodes.size], nodes[uniq % nodes.size]] / n
    else:
        cov_u = _pair_covariances(z, nodes[uniq // nodes.size], nodes[uniq % nodes.size])
    cov = dict(zip(uniq.tolist(), cov_u.tolist(), strict=True))

    # a perturbed child: covariances among {c} ∪ nbrs(c) on its own rows, centred there
    own: dict[int, tuple[dict[int, float], int]] = {}
    if keep is not None:
        keep = np.asarray(keep)
        for c in np.flatnonzero(~keep[:, nodes].all(axis=0)).tolist():
            rows = keep[:, nodes[c]]
            n_c = int(rows.sum())
            ids = np.asarray([c, *nbrs[c]])
            sub = z[np.ix_(rows, nodes[ids])]
            sub = sub - sub.mean(axis=0)
            cm = sub.T @ sub / max(n_c, 1)
            own[c] = ({min(u, v) * nodes.size + max(u, v): float(cm[i, j])
                       for i, u in enumerate(ids.tolist()) for j, v in enumerate(ids.tolist())}, n_c)

    def cv(u: int, v: int, c: int) -> float:
        key = min(u, v) * nodes.size + max(u, v)
        return own[c][0][key] if c in own else cov[key]

    parents: list[list[int]] = [[] for _ in range(nodes.size)]
    version = [0] * nodes.size

    def rss(c: int, ps: list[int]) -> float:
        if not ps:
            return cv(c, c, c)
        g = np.array([[cv(u, v, c) for v in ps] for u in ps]) + 1e-9 * np.eye(len(ps))
        r = np.array([cv(u, c, c) for u in ps])
        return max(cv(c, c, c) - float(r @ np.linalg.solve(g, r)), 1e-12)

    current = [rss(c, []) for c in range(nodes.size)]  # RSS of each child given its parents so far

    def gain(c: int, p: int) -> float:
        return -0.5 * (own[c][1] if c in own else n) * math.log(rss(c, [*parents[c], p]) / current[c])

    heap: list[tuple[float, int, int, int, int]] = []
    ok = None if may_parent is None else np.asarray(may_parent, dtype=bool)[nodes]
    for c in range(nodes.size):
        for p in nbrs[c]:
            if ok is not None and not ok[p]:
                continue
            heapq.heappush(heap, (-round(gain(c, p), 9), int(deg[c] - deg[p]), c, p, 0))
    children: list[list[int]] = [[] for _ in range(nodes.size)]
    placed: set[tuple[int, int]] = set()
    out_p: list[int] = []
    out_c: list[int] = []
    while heap:
        neg, tie, c, p, ver = heapq.heappop(heap)
        if (min(c, p), max(c, p)) in placed:
            continue
        if ver != version[c]:
            heapq.heappush(heap, (-round(gain(c, p), 9), tie, c, p, version[c]))
            continue
        if reaches(children, c, p):  # c reaching p: p → c would close a cycle
            continue
        placed.add((min(c, p), max(c, p)))
        parents[c].append(p)
        children[p].append(c)
        version[c] += 1
        current[c] = rss(c, parents[c])
        out_p.append(p)
        out_c.append(c)
    return nodes[np.asarray(out_p, dtype=np.int64)], nodes[np.asarray(out_c, dtype=np.int64)]
