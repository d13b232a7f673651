"""The regression algorithm's fit: the steps of :mod:`cape_pipeline.causal.regression` on one or
several random splits of the cells (:func:`fit_regression`), and the algorithm behind Step I's
common signature (:func:`fit_algorithm`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from cape_pipeline._progress import progress_task
from cape_pipeline.causal.covariates import unit_sd_rows, unit_sd_torch
from cape_pipeline.causal.regression.edge_test import (
    bh,
    candidate_pvalues,
    combine_halves,
    prune_given_parents,
)
from cape_pipeline.causal.regression.jackknife import jackknife_retest
from cape_pipeline.causal.regression.moments import split_moments
from cape_pipeline.causal.regression.neighbourhood import _live_mask, gram_matrix, partial_f
from cape_pipeline.causal.regression.ordering import (
    CANDIDATE_SHIFT_ALPHA,
    SHIFT_CONSISTENCY_P,
    SHIFT_FDR,
    causal_order,
    shift_tests,
)
from cape_pipeline.causal.regression.orientation import greedy_likelihood_dag
from cape_pipeline.causal.regression.shift_edges import add_shift_edges
from cape_pipeline.causal.regression.split_vote import SPLIT_VOTE, check_workers, fit_splits, vote
from cape_pipeline.causal.regulators import parent_mask
from cape_pipeline.causal.screen import candidate_parents, tanh_round_runs

__all__ = ["RegressionFit", "fit_regression", "fit_algorithm", "partial_f"]

logger = logging.getLogger(__name__)


@dataclass
class RegressionFit:
    """Output of :func:`fit_regression`.

    Attributes
    ----------
    parent, child
        ``(E,)`` int64: every screened pair ``parent → child`` (repeats removed) of the last
        edge test: step 3's, or after ordered re-tests (step 6) the last round's, whose pairs
        are those with the parent before the child in that round's order. With several splits
        of the rows, the union over the splits (:func:`~cape_pipeline.causal.regression.split_vote.vote`,
        which also says how the statistics below are combined).
    f_stat, partial_r2, pvalue, qvalue
        ``(E,)`` float64: the pair's partial F and partial R² in the child's regression on its
        candidates (after step 6: the preceding ones), the minimum-effect p-value and its
        Benjamini–Hochberg q-value.
    accepted
        ``(E,)`` bool: the pair passed that edge test (step 3: either orientation enters the
        skeleton; step 6: the pair enters the pruning — less the pairs the shift-consistency
        check removed, so ``accepted`` is then not ``qvalue ≤ fdr``).
    n_tests
        ``(E,)`` int64: on how many halves the pair was screened and tested (1 or 2; with
        cross-fitting its statistics are the means and its p-value the Stouffer combination).
    adjacency
        ``(M, M)`` sparse float64 DAG: the oriented, pruned edges, weight ``|partial
        correlation|`` given the child's DAG parents.
    history
        One record per stage: ``stage``, ``seconds`` and its counts.
    n_oriented, n_pruned
        Edges after step 4's orientation, and edges the last DAG-level test removed (with
        several splits: the mean over the splits, or with ``intervened`` the jackknife
        re-test's, step 8).
    n_splits
        Random splits of the rows the fit was made on and voted over (1: one fit).
    """

    parent: np.ndarray
    child: np.ndarray
    f_stat: np.ndarray
    partial_r2: np.ndarray
    pvalue: np.ndarray
    qvalue: np.ndarray
    accepted: np.ndarray
    n_tests: np.ndarray
    adjacency: sp.csr_array
    history: list[dict[str, Any]] = field(default_factory=list)
    n_oriented: int = 0
    n_pruned: int = 0
    n_splits: int = 1

    def scores(self, m: int) -> np.ndarray:
        """Dense ``(M, M)`` partial R² of every screened pair (0 elsewhere), for AUPRC at small M."""
        out = np.zeros((m, m))
        np.maximum.at(out, (self.parent, self.child), self.partial_r2)
        return out


def fit_regression(
    z: np.ndarray,
    *,
    n_candidates: int = 10,
    min_effect: float = 0.003,
    fdr: float = 0.05,
    ridge: float = 1e-2,
    crossfit: bool = True,
    n_splits: int = 1,
    workers: str | None = None,
    reliability: np.ndarray | None = None,
    intervened: sp.csr_array | np.ndarray | None = None,
    order_rounds: int = 0,
    label_targets: np.ndarray | None = None,
    shift_edges: bool = False,
    regulators: np.ndarray | None = None,
    seed: int = 0,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> RegressionFit:
    """Screen, neighbourhood regressions, edge test, greedy DAG and pruning (the steps of
    :mod:`cape_pipeline.causal.regression`).

    The covariates (stage 0) are the caller's: :func:`~cape_pipeline.causal.api.discover`
    regresses the library size (and, on request, the cell states) out first
    (:func:`~cape_pipeline.causal.covariates.residualize`).

    Parameters
    ----------
    z
        ``(N, M)`` float64 matrix, standardized columns (covariate-adjusted expression), no NaN.
    n_candidates
        k of :func:`~cape_pipeline.causal.screen.candidate_parents` (≤ 4k candidates each; 10).
    min_effect
        Floor on an edge's partial R² (0.003: the edge explains at least 0.3 % of its child's
        covariate-adjusted variance beyond the other candidates).
    fdr
        Benjamini–Hochberg level of the edge test and of the pruning (0.05).
    ridge
        Ridge λ of the regressions (correlation scale).
    crossfit
        Screen on one random half of the rows and test on the other, both ways, and combine
        a pair's (one or two) p-values by Stouffer's method (True). Screening and testing on the
        same rows (False) makes the test anti-conservative: the screen keeps the candidates whose
        sample correlation is largest, noise included, and on few cells most kept edges are then
        false.
    n_splits
        Random splits of the rows the whole fit (steps 1–6, cross-fitted on each) is repeated
        on; with more than one, an edge is kept where at least
        :data:`~cape_pipeline.causal.regression.split_vote.SPLIT_VOTE` of the splits keep it
        (:func:`~cape_pipeline.causal.regression.split_vote.vote`); with ``intervened``, the kept edges
        are then tested again with the jackknife variance
        (:func:`~cape_pipeline.causal.regression.jackknife.jackknife_retest`, seeded by ``seed``). 1: one
        split, no re-test (the fit without the vote). Needs
        ``crossfit`` and at least 20 rows; otherwise one fit.
    workers
        Where the splits' fits run (:func:`~cape_pipeline.causal.regression.split_vote.fit_splits`).
    reliability
        ``(M,)`` float64 in (0, 1]: the share of each feature's (covariate-adjusted) variance
        that is not measurement noise (:func:`~cape_pipeline.causal.covariates.count_reliability`
        on counts), or None. Given, the regressions, the orientation and the pruning use the
        errors-in-variables Gram matrix (:func:`partial_f`); the screen is unchanged.
    intervened
        ``(N, M)`` bool (sparse or dense): ``intervened[i, j]`` ⇔ feature j was perturbed in row
        i (:func:`~cape_pipeline.causal.interventions.intervention_targets`), or None. A
        perturbed feature's own regression, test and orientation leave those rows out (perfect
        interventions); as a candidate parent it keeps them — its perturbations are what
        identify its children. The screen uses every row.
    order_rounds
        With ``intervened``: rounds of the ordered re-test (step 6 of
        :mod:`cape_pipeline.causal.regression`; 0: none). Without it the option does nothing.
    label_targets
        ``(N,)`` int, how many targets each row's label names, features or not (0: a control),
        for the shift tests of step 6
        (:func:`~cape_pipeline.causal.regression.ordering.shift_tests`), or None.
    shift_edges
        With ``intervened``: add the perturbations' direct shifts, at Benjamini–Hochberg level
        ``fdr``, as edges (step 9,
        :func:`~cape_pipeline.causal.regression.shift_edges.add_shift_edges`). Without it the
        option does nothing.
    regulators
        ``(R,)`` int indices of the features that may be parents (prior knowledge: a list of
        transcription factors; :func:`~cape_pipeline.causal.regulators.resolve_regulators`), or
        None (every feature, the fit without the option). Given, every candidate, tested pair
        and edge has a listed parent (:mod:`cape_pipeline.causal.regression`, "Regulators").
    seed
        Seeds the splits of the rows: split 0 from ``seed`` alone (the one split of
        ``n_splits=1``), split b from ``(seed, b)``.
    device
        Where the screen, the regressions with their counting-noise correction, the pruning and
        the jackknife run (``"cpu"``, ``"cuda[:i]"`` or a ``torch.device``), in float64 (the
        screen's correlations in float32, as on the CPU); the greedy orientation, the p-values and
        the vote run on the CPU. On CUDA the batches are sized to the free memory
        (:func:`~cape_pipeline._utils.batch_entries`) and the two cross-fitting halves are
        standardized there.
    progress
        Log each stage's counts at INFO, and with more than one split show a progress bar over
        the splits (:func:`~cape_pipeline._progress.progress_task`).

    Returns
    -------
    RegressionFit

    Raises
    ------
    CapeDataError
        Fewer than 10 rows or 2 features.
    CapeConfigError
        ``reliability`` is not ``(M,)`` with values in (0, 1], ``n_splits`` is not an integer ≥ 1,
        ``workers`` is not None, ``"local"``, ``"local:N"`` or an address, or ``regulators`` is empty or holds an index outside ``[0, M)``.
    """
    from cape_pipeline.errors import CapeConfigError, CapeDataError

    n, m = z.shape
    if n < 10 or m < 2:
        raise CapeDataError(f"discover: algorithm='regression' needs at least 10 rows and 2 features, got {n} × {m}")
    if isinstance(n_splits, bool) or not isinstance(n_splits, (int, np.integer)) or n_splits < 1:
        raise CapeConfigError(f"n_splits: expected an integer >= 1, got {n_splits!r}")
    workers = check_workers(workers)
    noise_np = None
    if reliability is not None:
        rel = np.asarray(reliability, dtype=np.float64)
        if rel.shape != (m,) or not (np.isfinite(rel).all() and (rel > 0).all() and (rel <= 1).all()):
            raise CapeConfigError(f"reliability: expected ({m},) values in (0, 1], got shape {rel.shape}")
        noise_np = 1.0 - rel
    noise = None if noise_np is None else torch.from_numpy(noise_np)
    keep = None
    if intervened is not None:
        keep = ~(intervened.toarray() if sp.issparse(intervened) else np.asarray(intervened, dtype=bool))
        if keep.shape != (n, m):
            raise CapeConfigError(f"intervened: expected an ({n}, {m}) bool matrix, got {keep.shape}")
        if keep.all():
            keep = None
    may_parent = None if regulators is None else parent_mask(regulators, m)
    dev = torch.device(device)
    zt = torch.from_numpy(np.ascontiguousarray(z, dtype=np.float64)).to(dev)
    splits = int(n_splits) if crossfit and n // 2 >= 10 else 1
    opts = {"n_candidates": int(n_candidates), "min_effect": min_effect, "fdr": fdr, "ridge": ridge,
            "crossfit": crossfit, "noise": noise, "keep": keep, "order_rounds": int(order_rounds),
            "label_targets": label_targets, "progress": progress, "may_parent": may_parent,
            "full_gram": gram_matrix(zt)}  # the pruning's moments: the same rows in every split
    # split 0 is the single split's (n_splits=1 gives the same fit as before splits were repeated)
    row_sets = [np.random.default_rng(seed if b == 0 else [seed, b]).permutation(n) for b in range(splits)]
    with progress_task("Step I: regressions on random splits of the cells", splits, unit="splits",
                       show=progress and splits > 1) as bar:
        fits = fit_splits(_fit_split, z, zt, row_sets, opts, workers, lambda: bar.update(advance=1))
    fit = fits[0] if splits == 1 else vote(fits, m, fdr)
    if keep is None:  # steps 8 and 9 run where perturbation labels are read
        return fit
    if splits > 1:
        adj, record = jackknife_retest(z, fit.adjacency, min_effect=min_effect, fdr=fdr, ridge=ridge, noise=noise,
                                       keep=keep, seed=seed, device=dev)
        fit.history.append(record)
        fit = replace(fit, adjacency=adj, n_pruned=record["n_dropped"])
    if shift_edges:
        adj, record = add_shift_edges(z, zt, fit.adjacency, keep, fdr=fdr, ridge=ridge, noise=noise,
                                      label_targets=label_targets, may_parent=may_parent, gram=opts["full_gram"])
        fit.history.append(record)
        if progress:
            logger.info("Step I regression: %d interventional edges added", record["n_added"])
        fit = replace(fit, adjacency=adj)
    return fit


def _fit_split(
    z: np.ndarray, zt: torch.Tensor, rows: np.ndarray, *, n_candidates: int, min_effect: float, fdr: float,
    ridge: float, crossfit: bool, noise: torch.Tensor | None, keep: np.ndarray | None, order_rounds: int,
    label_targets: np.ndarray | None, progress: bool, may_parent: np.ndarray | None = None,
    full_gram: torch.Tensor | None = None,
) -> RegressionFit:
    """Steps 1–6 of :mod:`cape_pipeline.causal.regression` on one random split of the rows
    (``rows``, a permutation of ``range(N)``: its first half and the rest are the cross-fitting
    halves); ``may_parent`` ``(M,)`` bool marks the regulators (None: every feature may be a
    parent); ``full_gram`` ``(M, M)`` is ``ztᵀzt`` for the pruning's regressions and the
    orientation (:func:`~cape_pipeline.causal.regression.neighbourhood.gram_matrix`; None: they
    gather ``zt``'s columns). Where it is given, without ``keep`` and with at least as many rows
    in a half as features, the halves are never copied: the screen and the edge test read their
    moments (:func:`~cape_pipeline.causal.regression.moments.split_moments`); otherwise each half
    is a standardized copy of its rows."""
    n, m = z.shape
    history: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    half = n // 2
    dev = zt.device
    reg = None if may_parent is None else torch.from_numpy(np.flatnonzero(may_parent)).to(dev)
    # each test: (rows or None, their keep, ZᵀZ or None, row count where the rows are not held)
    if crossfit and half >= 10 and keep is None and full_gram is not None and half >= m:
        # every step reads moments: each half's Gram matrix, summed over row blocks of zt (no copy of a half)
        in_first = torch.zeros(n, dtype=torch.bool, device=dev)
        in_first[torch.from_numpy(rows[:half]).to(dev)] = True
        ma, mb = split_moments(zt, in_first, full_gram, pool=reg,
                               tanh=tanh_round_runs(m, int(n_candidates), None if reg is None else reg.numel()))
        cands = [candidate_parents(None, int(n_candidates), regulators=reg, gram=h.gram, n_rows=h.n,
                                   tanh_cross=h.tanh_cross) for h in (ma, mb)]
        tests = [(None, None, mb.gram, mb.n), (None, None, ma.gram, ma.n)]
        del ma, mb
    else:
        if crossfit and half >= 10:
            # cross-fitting: screen on one half, test on the other, then the other way round
            za, zb = _halves(z, zt, rows)
            ka, kb = (None, None) if keep is None else (keep[rows[:half]], keep[rows[half:]])
            screens, tests = [za, zb], [(zb, kb), (za, ka)]
        else:
            screens, tests = [zt], [(zt, keep)]
        cands = [_screen(zs.to(torch.float32), int(n_candidates), reg) for zs in screens]
        del screens
        # each test half's ZᵀZ (None with many features), made once; without
        # cross-fitting the test's rows are all of zt, whose ZᵀZ is full_gram
        tests = [(z_t, k_t, full_gram if z_t is zt else gram_matrix(z_t), None) for z_t, k_t in tests]
    lives = [_live_mask(c) for c in cands]
    if reg is not None:  # a lone regulator's row holds itself as padding
        lives = [lv & (c != torch.arange(m, device=dev)[:, None]) for c, lv in zip(cands, lives, strict=True)]

    def screen_test(rank: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """Every half's live candidates (with ``rank``: only those preceding their child) tested."""
        parts = []
        for cand, live, (z_test, k_test, g, n_t) in zip(cands, lives, tests, strict=True):
            if rank is not None:
                live = live & torch.from_numpy(rank[cand.cpu().numpy()] < rank[:, None]).to(dev)
            parts.append(candidate_pvalues(z_test, cand, live, ridge, min_effect, noise, k_test, gram=g, n_rows=n_t))
        return combine_halves(parts, m)

    history.append({"stage": "screen", "crossfit": len(tests) == 2,
                    "n_candidate_pairs": int(sum(lv.sum() for lv in lives)), "seconds": time.perf_counter() - t0})
    t0 = time.perf_counter()
    parent, child, f_e, r2_e, p_e, n_tests = screen_test()
    acc, q_e = bh(p_e, fdr)
    history.append({"stage": "edge test", "n_pairs": int(parent.size), "n_accepted": int(acc.sum()),
                    "seconds": time.perf_counter() - t0})
    if progress:
        logger.info("Step I regression: %d of %d screened pairs accepted", int(acc.sum()), int(parent.size))
    t0 = time.perf_counter()
    # the skeleton: each accepted unordered pair once
    lo, hi = np.minimum(parent[acc], child[acc]), np.maximum(parent[acc], child[acc])
    pairs = np.unique(lo * m + hi) if lo.size else np.zeros(0, dtype=np.int64)
    dag_p, dag_c = greedy_likelihood_dag(z, pairs // m, pairs % m, keep=keep, may_parent=may_parent,
                                         gram=full_gram)  # read without keep only
    history.append({"stage": "orientation", "n_skeleton": int(pairs.size), "n_oriented": int(dag_p.size),
                    "seconds": time.perf_counter() - t0})
    t0 = time.perf_counter()
    prune = {"ridge": ridge, "min_effect": min_effect, "fdr": fdr, "noise": noise, "keep": keep, "gram": full_gram}
    adj, n_pruned = prune_given_parents(zt, dag_p, dag_c, m, **prune)
    history.append({"stage": "pruning", "n_pruned": n_pruned, "n_edges": int(adj.nnz),
                    "seconds": time.perf_counter() - t0})
    if order_rounds and keep is not None:
        t0 = time.perf_counter()
        # every screened pair in both directions: its shift p-value orders the pair and checks its edge
        both = [np.c_[c.cpu().numpy()[lv.cpu().numpy()], np.nonzero(lv.cpu().numpy())[0]]
                for c, lv in zip(cands, lives, strict=True)]
        code = np.unique(np.concatenate([np.r_[b[:, 0] * m + b[:, 1], b[:, 1] * m + b[:, 0]] for b in both]))
        shifts = shift_tests(z, keep, SHIFT_FDR, label_targets=label_targets, pairs=(code // m, code % m))
        near = shifts.pair_pvalue <= CANDIDATE_SHIFT_ALPHA  # NaN (untested) compares False
        order_pairs = (np.r_[shifts.source, code[near] // m], np.r_[shifts.target, code[near] % m],
                       np.r_[shifts.pvalue, shifts.pair_pvalue[near]])
        history.append({"stage": "perturbation shifts", "n_shift_pairs": int(shifts.source.size),
                        "n_candidate_shift_pairs": int(near.sum()), "n_targets": shifts.n_targets,
                        "shift_inflation": shifts.inflation if np.isfinite(shifts.inflation) else None,
                        "combinations_used": shifts.combinations_used, "seconds": time.perf_counter() - t0})
        for r in range(order_rounds):
            t0 = time.perf_counter()
            coo = adj.tocoo()
            rank = causal_order(m, coo.row, coo.col, *order_pairs)
            # the pairs returned are this round's: those whose parent precedes the child
            parent, child, f_e, r2_e, p_e, n_tests = screen_test(rank)
            acc, q_e = bh(p_e, fdr)
            # shift consistency: a child does not go unshifted when its parent alone is perturbed
            p_shift = shifts.pair_pvalue[np.searchsorted(code, parent * m + child)]
            unshifted = acc & (p_shift > SHIFT_CONSISTENCY_P)
            acc &= ~unshifted
            adj, n_pruned = prune_given_parents(zt, parent[acc], child[acc], m, **prune)
            history.append({"stage": f"ordered re-test {r + 1}", "n_pairs": int(parent.size),
                            "n_accepted": int(acc.sum()), "n_unshifted": int(unshifted.sum()),
                            "n_pruned": n_pruned, "n_edges": int(adj.nnz), "seconds": time.perf_counter() - t0})
    return RegressionFit(
        parent=parent, child=child, f_stat=f_e, partial_r2=r2_e, pvalue=p_e, qvalue=q_e, accepted=acc,
        n_tests=n_tests, adjacency=adj, history=history, n_oriented=int(dag_p.size), n_pruned=n_pruned,
    )


def _screen(zs: torch.Tensor, k: int, reg: torch.Tensor | None) -> torch.Tensor:
    """The candidate table of a half ``zs`` ``(N, M)`` float32 (:func:`candidate_parents`), its
    products read from the half's ``ZᵀZ`` where :func:`gram_matrix` makes one and there are at
    least as many rows as features (with fewer, the residuals' O(M²·k) products from the Gram
    matrix cost more than the O(N·M·k²) passes over the rows)."""
    n, m = zs.shape
    return candidate_parents(zs, k, regulators=reg, gram=gram_matrix(zs) if n >= m else None)


def _halves(z: np.ndarray, zt: torch.Tensor, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """The two cross-fitting halves ``rows[:N//2]`` and the rest, each centred and scaled to unit
    sd on its own rows (:func:`~cape_pipeline.causal.covariates.unit_sd`), as float64 tensors on
    ``zt``'s device (computed there off the CPU)."""
    half = z.shape[0] // 2
    if zt.device.type == "cpu":
        return torch.from_numpy(unit_sd_rows(z, rows[:half])), torch.from_numpy(unit_sd_rows(z, rows[half:]))
    ia, ib = (torch.from_numpy(r).to(zt.device) for r in (rows[:half], rows[half:]))
    return unit_sd_torch(zt[ia]), unit_sd_torch(zt[ib])


def fit_algorithm(x: np.ndarray, cfg: Any, inputs: Any) -> Any:
    """Algorithm ``"regression"`` behind Step I's common signature
    (:func:`~cape_pipeline.causal.algorithms.fit_algorithm`): :func:`fit_regression` on the
    covariate-adjusted ``(N, M)`` float64 ``x`` with the options of ``cfg``, a
    :class:`~cape_pipeline.causal.regression.config.RegressionConfig`, every screened pair as
    ``edge_scores``."""
    import pandas as pd

    from cape_pipeline._utils import resolve_device
    from cape_pipeline.causal.algorithms import ORDER_ROUNDS, AlgorithmFit
    from cape_pipeline.causal.postprocess import cap_rows
    from cape_pipeline.causal.regression.config import resolve_candidates

    device = resolve_device(inputs.device)
    rounds = ORDER_ROUNDS if cfg.order_rounds == "auto" else cfg.order_rounds
    rounds = int(rounds) if inputs.intervened is not None else 0
    k = resolve_candidates(cfg.n_candidates, x.shape[0])
    fit = fit_regression(
        x, n_candidates=k, min_effect=float(cfg.min_effect), fdr=float(cfg.fdr),
        n_splits=int(cfg.n_splits), workers=cfg.workers, reliability=inputs.reliability, intervened=inputs.intervened,
        order_rounds=rounds, label_targets=inputs.label_targets, shift_edges=bool(cfg.shift_edges),
        regulators=inputs.regulators, seed=int(inputs.seed),
        device=device, progress=inputs.progress,
    )
    adj = cap_rows(fit.adjacency, inputs.max_per_row)
    names = inputs.names
    edge_scores = pd.DataFrame({
        "source": names[fit.parent].astype(str), "target": names[fit.child].astype(str),
        "score": fit.partial_r2, "f_stat": fit.f_stat, "qvalue": fit.qvalue, "accepted": fit.accepted,
        "n_tests": fit.n_tests,
    })
    params: dict[str, Any] = {"unused_options": inputs.unused} if inputs.unused else {}
    params.update({
        "device": str(device),
        "edge_rule": (
            f"partial R² > {float(cfg.min_effect):g} at FDR {float(cfg.fdr):g} (minimum-effect F test, "
            "Benjamini–Hochberg"
            + (", regressions corrected for counting noise measured by binomial thinning"
               if inputs.reliability is not None else "")
            + "), oriented by greedy likelihood, re-tested given the DAG parents"
            + (f"; {rounds} round(s) re-tested in the causal order of the DAG and the perturbation shifts"
               if rounds else "")
            + (f"; kept where at least {SPLIT_VOTE:.0%} of {fit.n_splits} random splits of the cells keep the edge"
               if fit.n_splits > 1 else "")
            + ("; re-tested given the DAG parents with a delete-half jackknife variance"
               if any(r["stage"] == "jackknife re-test" for r in fit.history) else "")
            + (f"; with the perturbations' direct shifts (FDR {float(cfg.fdr):g}) as edges"
               if any(r["stage"] == "interventional edges" for r in fit.history) else "")
            + (f"; parents among {inputs.regulators.size:,} listed regulators" if inputs.regulators is not None else "")
        ),
        "n_candidate_pairs": int(fit.parent.size),
        "n_accepted_pairs": int(fit.accepted.sum()),
        "n_oriented": int(fit.n_oriented),
        "n_pruned": int(fit.n_pruned),
        "n_splits_used": int(fit.n_splits),
        "n_candidates_used": k,
    })
    if inputs.intervened is not None:
        params["order_rounds_used"] = rounds
        added = [r for r in fit.history if r["stage"] == "interventional edges"]
        params["n_shift_edges"] = added[0]["n_added"] if added else 0
        params["shift_inflation"] = added[0].get("shift_inflation") if added else None
        params["warnings"] = [added[0]["warning"]] if added and added[0].get("warning") else []
    return AlgorithmFit(adjacency=adj, history=fit.history, scores=fit.scores(x.shape[1]) if inputs.dense_scores else None,
                      edge_scores=edge_scores, params=params)
