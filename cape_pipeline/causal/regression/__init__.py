"""Step I for single-cell counts: covariate-adjusted neighbourhood regressions, a minimum-effect
likelihood-ratio test per edge, and a greedy likelihood DAG (``algorithm="regression"``).

On UMI counts the learned algorithm's rule — a fixed threshold on the first-layer norm of
per-feature MLPs — keeps fewer edges as cells are added (the output layer trades the norm
away while the fit still uses the edge) and ranks pairs worse than a correlation does
(``benchmarks/discover/counts/RESULTS.md``). This algorithm replaces the rule by a statistical
one on quantities the model cannot trade away:

0. **Covariates** (:mod:`cape_pipeline.causal.covariates`; applied by
   :func:`~cape_pipeline.causal.api.discover` before any algorithm). The log library size
   (when known) and, on request, cell states (k-means on the leading principal components,
   scikit-learn) are exogenous inputs of every feature's model; with a linear model that is the
   same as regressing them out of every feature first (Frisch–Waugh–Lovell).
1. **Screen** (:func:`~cape_pipeline.causal.screen.candidate_parents`): ``4k`` candidate
   parents per feature from correlation, residual and ``tanh`` rounds, O(N·M²) in row blocks,
   on a random half of the cells; the stages below use the other half ("screen and clean",
   Wasserman & Roeder 2009: a candidate chosen for its large sample correlation would
   otherwise enter its test with that noise in its favour).
2. **Neighbourhood regressions** (:func:`partial_f`): each feature is regressed on its
   candidates (ridge-stabilised least squares, batched over features); the statistic of
   candidate p of feature c is the partial F (the likelihood-ratio statistic of dropping p,
   Gaussian errors) and its effect size the partial R² — the share of c's covariate-
   adjusted variance that p explains beyond the other candidates. O(N·M·K²). On counts
   (``measurement_error``), the regressions are corrected for counting noise: each
   gene's noise share, measured by binomial thinning
   (:func:`~cape_pipeline.causal.covariates.count_reliability`), is taken off the diagonal of
   the candidates' Gram matrix (errors-in-variables, Fuller 1987). A regulator's mRNA is a
   noisy count of its activity; without the correction its targets, which measure that
   activity again, take its coefficient from one another (siblings look like edges, the
   regulator's own edges fail the test). On by default wherever the data hold
   counts (``measurement_error="auto"``); where genes share a hidden module activity, it makes one
   member stand for the module (``benchmarks/discover/counts/RESULTS.md``).
3. **Edge test** (:func:`~cape_pipeline.causal.regression.edge_test.min_effect_pvalues`): a pair is
   accepted when its partial R² exceeds ``min_effect`` at false-discovery rate ``fdr``
   (Benjamini–Hochberg over every screened pair; the null is the interval ``R² ≤ min_effect``,
   tested with the noncentral F distribution — a minimum-effect test, Murphy & Myors 1999). The
   rule's form does not depend on N: with more cells the estimates concentrate, so more true
   edges pass, and pairs whose true effect is below the floor (siblings seen through a noisy
   parent) pass less.
4. **Orientation** (:func:`~cape_pipeline.causal.regression.orientation.greedy_likelihood_dag`): the
   accepted pairs, as an undirected skeleton, are oriented by greedy insertion of the edge with
   the largest Gaussian log-likelihood gain given the child's current parents, skipping edges
   that close a cycle (the IncEdge search of CAM, Bühlmann, Peters & Ernst 2014, on a screened
   skeleton). Where both orientations gain the same (Markov-equivalent: two features without
   parents), the feature with more accepted neighbours is taken as the parent — regulators are
   the hubs of gene regulatory networks.
5. **Pruning** (CAM's last step): every edge of the DAG is tested again given its DAG
   parents only (same test, BH over the DAG's edges); the weight of a kept edge is
   ``|partial correlation|`` given its DAG parents, in (0, 1].
6. **Ordered re-test** (interventional data, ``order_rounds``;
   :mod:`~cape_pipeline.causal.regression.ordering`). The features a perturbation shifts are its
   descendants (:func:`~cape_pipeline.causal.regression.ordering.shift_tests`, one additive model
   of all perturbed and control rows); those pairs (at Benjamini–Hochberg level ``SHIFT_FDR``,
   and between screened candidates at the unadjusted ``CANDIDATE_SHIFT_ALPHA``) and the DAG give
   a causal order, and every feature's candidates from step 1 that precede it are tested again
   (step 3, on each half that step 3 tested on) and pruned (step 5). Step 2 conditions a parent's
   test on the child's own children and their other parents among the candidates, which takes
   much of the parent's partial R² away; given the order it conditions on predecessors only. An
   accepted edge whose parent was perturbed alone is dropped where the child's shift under it has
   p-value above ``SHIFT_CONSISTENCY_P`` (a direct child shifts with its parent; interventional
   faithfulness). Each round starts from the previous round's DAG.
7. **Split vote** (``n_splits``; :mod:`~cape_pipeline.causal.regression.split_vote`). Steps 1–6 are
   repeated on several random splits of the cells (8 by default), and an edge is kept where at
   least half the splits keep it: one split's screen-and-test keeps edges that rode on that
   split's noise: precision rises at equal recall, and the time is ``n_splits`` times.
8. **Jackknife re-test** (with ``n_splits`` > 1 and ``intervened``;
   :mod:`~cape_pipeline.causal.regression.jackknife`). Every edge of the voted DAG is tested
   again given its DAG parents (step 5's test), with its coefficient's variance from the
   delete-half jackknife over random halves of the cells in place of the least-squares formula,
   which understates it where the counting-noise correction does the most (a sibling seen through
   a noisy parent) and where the errors are heteroscedastic. On counts without perturbation
   labels it trades recall for precision at a loss of F1, so it runs only where the labels are
   read.
9. **Interventional edges** (with ``intervened`` and ``shift_edges``;
   :mod:`~cape_pipeline.causal.regression.shift_edges`). A perturbation's cells are few, so the
   variance it moves in its child is a small share of the child's, below ``min_effect`` where
   the observational signal is weak; the child's shift under the perturbation is the direct
   evidence. The shift pairs at the edge test's ``fdr`` that the control cells agree with in sign
   and that no two-step path through the DAG and the other shift pairs explains are inserted as
   edges before the DAG's own (greedy, no cycle): a DAG edge against a shift gives way. The
   shift tests' genomic-control inflation is recorded, and a warning issued above
   :data:`~cape_pipeline.causal.regression.shift_edges.INFLATION_WARNING`.

**Regulators** (``regulators``, :mod:`~cape_pipeline.causal.regulators`: transcription factors,
as GRNBoost2's ``tf_names``). Step 1 picks candidates among the R listed features only, in
O(N·M·R), so steps 2–8 see regulator → feature pairs only; step 4 orients a regulator–other pair
from the regulator, a pair of regulators by its rule.

What each step gains, measured on the count generators and the perturbation screens, is in
``benchmarks/discover/counts/RESULTS.md`` and ``benchmarks/discover/interventional/RESULTS.md``.

No ``M × M`` matrix is formed: every product is over the ``(M, K)`` candidate table.

The modules: :mod:`~cape_pipeline.causal.regression.fit` (:func:`fit_regression`, steps 1–8 over
the splits; :func:`fit_algorithm`), :mod:`~cape_pipeline.causal.regression.neighbourhood` (step 2),
:mod:`~cape_pipeline.causal.regression.edge_test` (steps 3 and 5),
:mod:`~cape_pipeline.causal.regression.orientation` (step 4),
:mod:`~cape_pipeline.causal.regression.ordering` (step 6),
:mod:`~cape_pipeline.causal.regression.split_vote` (step 7) and
:mod:`~cape_pipeline.causal.regression.jackknife` (step 8). The screen of step 1
(:mod:`cape_pipeline.causal.screen`) and the covariates of step 0 are shared with other algorithms.
"""

from __future__ import annotations

from cape_pipeline.causal.regression.config import (
    REGRESSION_N_CANDIDATES,
    ROWS_PER_CANDIDATE,
    RegressionConfig,
    resolve_candidates,
)
from cape_pipeline.causal.regression.fit import RegressionFit, fit_algorithm, fit_regression
from cape_pipeline.causal.regression.neighbourhood import partial_f
from cape_pipeline.causal.regression.split_vote import workers_ok

__all__ = [
    "REGRESSION_N_CANDIDATES", "ROWS_PER_CANDIDATE", "RegressionConfig", "resolve_candidates", "RegressionFit", "fit_regression", "fit_algorithm", "partial_f",
    "workers_ok",
]
