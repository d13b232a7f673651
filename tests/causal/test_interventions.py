"""Perturbation labels as interventions in Step I: parsing GEARS-style conditions,
the masked likelihood of a perturbed gene, the orientation they identify, and the held-out
interventional score."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from cape_pipeline.causal import discover
from cape_pipeline.causal.interventions import (
    find_condition_column,
    intervention_targets,
    parse_condition,
)
from cape_pipeline.causal.metrics import dag_metrics, interventional_score
from cape_pipeline.causal.regression import partial_f
from cape_pipeline.causal.regression.orientation import greedy_likelihood_dag
from cape_pipeline.datasets import simulate_perturbation_data
from cape_pipeline.errors import CapeConfigError, CapeDataError


def test_condition_labels_in_the_fields_conventions(caplog):
    assert parse_condition("g3+ctrl") == ["g3"] and parse_condition("g3+g7") == ["g3", "g7"]
    assert parse_condition("ctrl") == [] and parse_condition("Non-Targeting") == []
    obs = pd.DataFrame({"condition": ["ctrl", "g1+ctrl", "g1+g2", "control", "gX+ctrl"]})
    assert find_condition_column(obs) == "condition"
    with caplog.at_level(logging.INFO):
        iv = intervention_targets(obs, ["g0", "g1", "g2"], "condition")
    assert iv.targets.toarray().astype(int).tolist() == [[0, 0, 0], [0, 1, 0], [0, 1, 1], [0, 0, 0], [0, 0, 0]]
    assert iv.n_control == 2 and iv.unknown == {"gX": 1} and "gX" in caplog.text
    assert iv.keep_cells.tolist() == [True, True, True, True, False]  # a guide for a gene not modelled
    assert iv.summary()["n_perturbed_features"] == 2
    cells, target = iv.single_targets  # the double perturbation and the left-out guide are not single
    assert cells.tolist() == [1] and target.tolist() == [1]


@pytest.mark.parametrize(
    ("obs", "match"),
    [
        (pd.DataFrame({"condition": ["g1+ctrl", "g2+ctrl"]}), "no control cells"),
        (pd.DataFrame({"condition": ["unassigned", None, " ", "g1"]}), "no control cells"),
        (pd.DataFrame({"condition": ["ctrl", None, "multiple"]}), "2 cells have no assigned perturbation"),
        (pd.DataFrame({"cond": ["ctrl", "g1"]}), "no such column"),
        (pd.DataFrame({"condition": ["ctrl", "gY+ctrl", "g1+gY"]}), "no perturbation label names only features"),
    ],
)
def test_bad_condition_columns_name_the_column(obs, match):
    with pytest.raises(CapeDataError, match=match):
        intervention_targets(obs, ["g0", "g1", "g2"], "condition")


def test_other_screens_spellings_of_controls_and_doubles():
    from cape_pipeline._keys import parse_targets

    for ctrl in ("NT", "ntc", "Safe-Targeting", "safe_targeting", "INTERGENIC", "NegCtrl", "negative_control"):
        assert parse_condition(ctrl) == [] and parse_condition(f"g1+{ctrl}") == ["g1"]
    features = {"g0", "g1", "g2", "g_3"}
    assert parse_targets("g1_g2", features) == ["g1", "g2"]  # scPerturb's double
    assert parse_targets("g1,g2", features) == ["g1", "g2"] and parse_targets("g2|NTC", features) == ["g2"]
    assert parse_targets("g_3", features) == ["g_3"]  # a feature whose name holds the separator stays whole
    assert parse_targets("gX_g1", features) == ["gX_g1"]  # split only where every part is a feature
    assert parse_targets("g1+g2", features) == ["g1", "g2"]
    # the same screen written as GEARS writes it and as another screen does: the same interventions
    gears = pd.DataFrame({"condition": ["ctrl", "g1+ctrl", "g1+g2", "g2+ctrl", "gX+ctrl"]})
    other = pd.DataFrame({"sgRNA_target": ["NTC", "g1", "g1_g2", "g2", "gX"], "sample": ["control"] * 5})
    assert find_condition_column(other) is None  # not a column looked at by name
    assert find_condition_column(other, var_names=["g0", "g1", "g2"]) == "sgRNA_target"
    assert find_condition_column(pd.DataFrame({"sample": ["control", "treated"]}), var_names=["g0"]) is None
    stim = pd.DataFrame({"condition": ["control", "IFN-beta"]})  # a stimulation, not genes
    assert find_condition_column(stim) == "condition" and find_condition_column(stim, var_names=["g0"]) is None
    a = intervention_targets(gears, ["g0", "g1", "g2"], "condition")
    b = intervention_targets(other, ["g0", "g1", "g2"], "sgRNA_target")
    assert (a.targets != b.targets).nnz == 0 and a.keep_cells.tolist() == b.keep_cells.tolist()
    assert a.kinds == b.kinds


def test_a_label_column_without_controls_is_named_in_a_warning(perturb):
    """Labels in a column Step I looks at, with controls under a name it does not know: the fit is
    observational, and the warning says why and how to label the controls."""
    from cape_pipeline.errors import CapeWarning

    a = perturb.copy()
    a.obs["perturbation"] = a.obs.pop("condition").astype(str).replace({"ctrl": "scrambled"})
    with pytest.warns(CapeWarning, match=r"obs\['perturbation'\] looks like perturbation labels"):
        g = discover(a, algorithm="regression", regression={"n_splits": 1})
    assert "intervention_column" not in g.params
    assert any("label the control cells 'control'" in w for w in g.params["warnings"])
    a.obs["perturbation"] = a.obs["perturbation"].replace({"scrambled": "control"})
    g = discover(a, algorithm="regression", regression={"n_splits": 1})
    assert g.params["intervention_column"] == "perturbation"
    assert not any("looks like perturbation labels" in w for w in g.params.get("warnings", []))
    # a stimulation or disease column (no label names a gene): observational, no error, no warning
    b = perturb[perturb.obs["condition"] == "ctrl"].copy()
    b.obs["condition"] = np.where(np.arange(b.n_obs) % 2, "control", "IFN-beta")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapeWarning)
        g = discover(b, algorithm="regression", regression={"n_splits": 1, "min_effect": 0.0})
    assert "intervention_column" not in g.params


def test_a_perturbed_feature_is_regressed_on_its_own_rows_only():
    """With ``keep``, feature 0's regression is OLS with an intercept on the rows it keeps."""
    import statsmodels.api as smx

    rng = np.random.default_rng(0)
    n = 500
    z = rng.normal(size=(n, 4))
    z[:, 0] = 0.6 * z[:, 1] - 0.4 * z[:, 2] + rng.normal(size=n)
    z[:200, 0] = 3.0  # do(x0 = 3) in the first 200 rows: not x0's conditional
    z = (z - z.mean(0)) / z.std(0)
    keep = np.ones((n, 4), dtype=bool)
    keep[:200, 0] = False
    parents = torch.tensor([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]])
    live = torch.ones(4, 3, dtype=torch.bool)
    f, _, dof = partial_f(torch.from_numpy(z), parents, live, ridge=0.0, keep=torch.from_numpy(keep))
    ols = smx.OLS(z[200:, 0], smx.add_constant(z[200:, 1:])).fit()
    np.testing.assert_allclose(f[0].numpy(), ols.tvalues[1:] ** 2, rtol=1e-8)
    assert float(dof[0]) == ols.df_resid
    # the other features keep every row: the unmasked statistics
    f_all, _, _ = partial_f(torch.from_numpy(z), parents, live, ridge=0.0)
    np.testing.assert_allclose(f[1:].numpy(), f_all[1:].numpy(), rtol=1e-8)


def test_the_edge_test_of_a_perturbed_child_counts_its_own_rows():
    """The minimum-effect test's null noncentrality is ``N_c · f²`` with ``N_c`` the rows the
    child's regression used (here 300 of 500), not every row."""
    from cape_pipeline.causal.regression import fit_regression
    from cape_pipeline.causal.regression.edge_test import min_effect_pvalues

    rng = np.random.default_rng(0)
    n = 500
    z = rng.normal(size=(n, 4))
    z[:, 0] = 0.3 * z[:, 1] - 0.2 * z[:, 2] + rng.normal(size=n)
    z[:200, 0] = 3.0
    z = (z - z.mean(0)) / z.std(0)
    keep = np.ones((n, 4), dtype=bool)
    keep[:200, 0] = False
    fit = fit_regression(z, n_candidates=3, crossfit=False, intervened=~keep)
    parents = torch.tensor([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]])
    f, _, dof = partial_f(torch.from_numpy(z), parents, torch.ones(4, 3, dtype=torch.bool), keep=torch.from_numpy(keep))
    into0 = fit.child == 0
    order = np.searchsorted(parents[0].numpy(), fit.parent[into0])
    expect = min_effect_pvalues(f[0].numpy()[order], np.full(order.size, float(dof[0])), 300, 0.003)
    np.testing.assert_allclose(fit.pvalue[into0], expect, rtol=1e-10)
    wrong = min_effect_pvalues(f[0].numpy()[order], np.full(order.size, float(dof[0])), n, 0.003)
    assert not np.allclose(fit.pvalue[into0], wrong, rtol=1e-6)


def test_with_cross_fitting_each_half_tests_on_its_own_rows_of_the_child(monkeypatch):
    """Cross-fitting: each half's edge test gets the child's unperturbed rows *of the test half*."""
    import cape_pipeline.causal.regression as reg
    import cape_pipeline.causal.regression.edge_test as edge_test

    seen = []
    real = edge_test.min_effect_pvalues

    def spy(f, dof, n, me):
        seen.append(np.broadcast_to(np.asarray(n), np.shape(f)).copy())
        return real(f, dof, n, me)

    monkeypatch.setattr(edge_test, "min_effect_pvalues", spy)  # called by edge_test.table_pvalues
    rng = np.random.default_rng(1)
    n = 600
    z = rng.normal(size=(n, 5))
    z[:, 0] += 0.5 * z[:, 1]
    keep = np.ones((n, 5), dtype=bool)
    keep[rng.random(n) < 0.3, 0] = False
    reg.fit_regression((z - z.mean(0)) / z.std(0), n_candidates=4, crossfit=True, intervened=~keep, seed=3)
    rows = np.random.default_rng(3).permutation(n)
    halves = (rows[n // 2:], rows[: n // 2])  # the first call tests on the second half
    for got, test_rows in zip(seen[:2], halves, strict=True):
        assert set(np.unique(got)) == {len(test_rows), int(keep[test_rows, 0].sum())}


@pytest.mark.parametrize("perturbed", ["parent", "child"])
def test_interventions_orient_a_lone_pair(perturbed):
    """x → y alone is Markov equivalent to y → x; a perturbation of either one tells them apart."""
    rng = np.random.default_rng(1)
    n = 4000
    hit = np.zeros(n, dtype=bool)
    hit[:800] = True
    x = rng.normal(size=n)
    if perturbed == "parent":
        x[hit] = 2.5
    y = 0.8 * x + 0.6 * rng.normal(size=n)
    if perturbed == "child":
        y[hit] = 2.5 + 0.6 * rng.normal(size=hit.sum())
    for order in ((0, 1), (1, 0)):  # the truth as column 0 → 1 and as column 1 → 0
        z = np.column_stack([x, y])[:, list(order)]
        z = (z - z.mean(0)) / z.std(0)
        keep = np.ones((n, 2), dtype=bool)
        keep[hit, order.index(0 if perturbed == "parent" else 1)] = False
        p, c = greedy_likelihood_dag(z, np.array([0]), np.array([1]), keep=keep)
        assert (int(p[0]), int(c[0])) == (order.index(0), order.index(1))


@pytest.fixture(scope="module")
def perturb():
    return simulate_perturbation_data(n_genes=60, n_single=40, n_double=20, n_ctrl=800, cells_per_condition=40, seed=3)


def _orientation(adj, truth) -> float:
    a, t = (adj != 0).toarray(), (truth != 0).toarray()
    found = a & (t | t.T)
    return float((a & t).sum() / max(found.sum(), 1))


@pytest.mark.filterwarnings("ignore")
def test_discover_uses_the_condition_column_and_orients_better(perturb):
    truth = perturb.varp["true_dag"]
    obs = discover(perturb, algorithm="regression", regression={"interventions": "none"})
    inter = discover(perturb, algorithm="regression")
    assert inter.params["intervention_column"] == "condition" and inter.params["n_perturbed_features"] == 40
    assert "intervention_column" not in obs.params
    assert _orientation(inter.adjacency, truth) > _orientation(obs.adjacency, truth) + 0.1
    assert dag_metrics(inter.adjacency, truth)["f1"] > dag_metrics(obs.adjacency, truth)["f1"]
    with pytest.raises(CapeDataError, match="guides"):
        discover(perturb, algorithm="regression", regression={"interventions": "guides"})
    with pytest.raises(CapeConfigError, match="interventions"):
        discover(perturb, regression={"interventions": "condition"})
    # no condition column: "auto" is the observational fit, bit for bit
    plain = perturb[perturb.obs["condition"] == "ctrl"].copy()
    del plain.obs["condition"]
    a, b = discover(plain, algorithm="regression"), discover(plain, algorithm="regression", regression={"interventions": "none"})
    assert (a.adjacency != b.adjacency).nnz == 0


@pytest.mark.filterwarnings("ignore")
def test_interventional_score_separates_true_from_random_pairs(perturb):
    s = interventional_score(perturb, perturb.varp["true_dag"], n_random=400)
    assert s["n_testable"] > 20 and s["n_control"] == 800
    assert s["share_shifted"] > s["random_share_shifted"] + 0.2
    assert s["mean_wasserstein"] > s["random_mean_wasserstein"]
    with pytest.raises(ValueError, match="adjacency"):
        interventional_score(perturb, np.zeros((3, 3)))


@pytest.mark.filterwarnings("ignore")
def test_preprocess_keeps_perturbed_genes_outside_the_hvgs():
    import cape_pipeline as cape
    from cape_pipeline.datasets import simulated_grn_counts

    a = simulated_grn_counts(400, 200, seed=2)
    b = a.copy()
    cape.pp.preprocess(b, n_top_features=50, min_genes=0)
    totals = np.asarray(a.X.sum(axis=0)).ravel()
    quiet = next(str(a.var_names[j]) for j in np.argsort(-totals) if a.var_names[j] not in set(b.var_names))
    a.obs["condition"] = ["ctrl"] * 300 + [f"{quiet}+ctrl"] * 100
    cape.pp.preprocess(a, n_top_features=50, min_genes=0)
    assert quiet in a.var_names and quiet not in b.var_names
    assert a.n_vars == 51 and b.n_vars == 50
    assert any("perturbed genes" in s for s in a.uns["cape_preprocess"]["steps"])


@pytest.mark.filterwarnings("ignore")
def test_the_pipeline_reads_the_labels_and_the_report_says_so(tmp_path, perturb):
    """An .h5ad screen through ``cape run --until discover``: preprocess keeps the labels, Step I
    uses them, the stage summary and the report's Step I section state them."""
    from cape_pipeline.pipeline import run_pipeline
    from cape_pipeline.report.sections import dag_lines

    path = tmp_path / "screen.h5ad"
    perturb.write_h5ad(path)
    r = run_pipeline(str(path), until="discover", workdir=tmp_path / "w",
                     overrides={"discover": {"algorithm": "regression"}})
    g = r.output("discover")
    assert g.params["intervention_column"] == "condition" and g.params["n_perturbed_features"] == 40
    rec = next(x for x in r.records if x.stage == "discover")
    assert rec.summary["intervention_column"] == "condition"
    from cape_pipeline.report.build import _interventions

    iv = _interventions(g, perturb)
    assert iv["n_testable"] > 0 and iv["share_shifted"] > iv["random_share_shifted"]
    text = "\n".join(dag_lines({"method": "cape", "n_edges": g.n_edges, "n_cycle_edges_dropped": 0,
                                "interventions": iv}, perturb.n_vars))
    assert "interventions from obs['condition']" in text and "interventional check (CausalBench)" in text


@pytest.mark.filterwarnings("ignore")
def test_interventions_and_the_counting_noise_correction_run_together():
    """On a screen's raw counts the default from 3,000 cells corrects for counting noise and reads
    the labels in the same regressions (the mask and the noise-corrected Gram meet in partial_f)."""
    import anndata as ad

    import cape_pipeline as cape

    a = simulate_perturbation_data(60, n_single=20, n_double=5, n_ctrl=2200, cells_per_condition=40, seed=1)
    x = np.asarray(a.X.toarray() if hasattr(a.X, "toarray") else a.X)
    b = ad.AnnData(np.rint(np.expm1(x)).astype(np.float32), obs=a.obs.copy(), var=a.var.copy())
    b.varp["true_dag"] = a.varp["true_dag"]
    cape.pp.preprocess(b, min_genes=0)
    assert b.n_obs >= 3000
    g = discover(b)
    assert g.params["measurement_error_used"] == "count thinning" and g.params["n_perturbed_features"] == 20
    assert g.params["covariates_used"] == "library"
    m = dag_metrics(g.adjacency, b.varp["true_dag"])
    assert g.n_edges > 10 and m["precision"] >= 0.55, m  # 0.68 at 47 edges here


def test_the_hill_generator_simulates_a_knockdown_screen_beside_the_same_controls():
    """``simulated_hill_counts(knockdowns=K)``: the control cells are those of the run without a
    screen; K TFs with targets, each knocked down in its own cells (lower there), labelled in
    GEARS' convention, which Step I reads as interventions."""
    from cape_pipeline.datasets import simulated_hill_counts

    base = simulated_hill_counts(400, 80, n_types=2, seed=1)
    a = simulated_hill_counts(400, 80, n_types=2, seed=1, knockdowns=5, knockdown_cells=30)
    assert a.n_obs == 400 + 5 * 30
    np.testing.assert_array_equal(a.X[:400].toarray(), base.X.toarray())
    cond = a.obs["condition"].astype(str).to_numpy()
    assert (cond[:400] == "ctrl").all() and len(set(cond[400:])) == 5
    x, truth = a.X.toarray(), a.varp["true_dag"].toarray() != 0
    for g in set(cond[400:]):
        j = list(a.var_names).index(g)
        assert truth[j].any() and a.var["tf"].iloc[j]  # a TF with targets
        assert x[cond == g, j].mean() < 0.5 * x[cond == "ctrl", j].mean()
    iv = intervention_targets(a.obs, list(a.var_names), "condition")
    assert iv.summary()["n_perturbed_features"] == 5 and iv.summary()["n_perturbed_cells"] == 150
