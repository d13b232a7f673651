"""Perturbation labels that name neither a control nor only features: cells with no assigned
perturbation, guides for genes that are not features, and labels that mix both kinds of target.
Step I leaves their cells out, counts them and says so; they are never read as controls."""

from __future__ import annotations

import logging

import anndata as ad
import numpy as np
import pandas as pd
import pytest

from cape_pipeline.causal import discover
from cape_pipeline.causal.interventions import LABEL_KINDS, intervention_targets
from cape_pipeline.causal.metrics import interventional_score
from cape_pipeline.datasets import simulate_perturbation_data

LABELS = ["ctrl", "g1+ctrl", "g1+g2", "unassigned", "Multiple", None, np.nan, "", " doublet ", "gX", "g1+gX",
          "control", "gX+ctrl", "g2"]


def test_each_kind_of_label_gets_its_mask_and_its_count(caplog):
    obs = pd.DataFrame({"condition": LABELS})
    with caplog.at_level(logging.INFO, logger="cape_pipeline.causal.interventions"):
        iv = intervention_targets(obs, ["g0", "g1", "g2"], "condition")
    t = iv.targets.toarray().astype(int)
    assert t[[1, 2, 13]].tolist() == [[0, 1, 0], [0, 1, 1], [0, 0, 1]]
    assert not t[[0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]].any()  # controls and every left-out cell: no target
    assert iv.keep_cells.tolist() == [True, True, True] + [False] * 8 + [True, False, True]
    assert iv.kinds == {"control": 2, "perturbed": 3, "unmeasured_target": 2, "mixed": 1, "unassigned": 6}
    assert set(iv.kinds) == set(LABEL_KINDS) and sum(iv.kinds.values()) == len(LABELS)
    assert iv.unassigned == {"<missing>": 2, "": 1, " doublet ": 1, "Multiple": 1, "unassigned": 1}
    assert iv.unknown == {"gX": 3}
    # no assigned perturbation is never a control, here or in the check against perturbations
    assert iv.n_control == 2 and np.flatnonzero(iv.control_cells).tolist() == [0, 11]
    assert (iv.n_label_targets[3:9] == -1).all()
    s = iv.summary()
    assert s["n_control_cells"] == 2 and s["n_perturbed_cells"] == 3 and s["n_left_out_cells"] == 9
    assert s["label_kinds"] == iv.kinds and s["unassigned_labels"]["<missing>"] == 2
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("perturbation labels"))
    assert "2 control cells, 3 perturbed cells" in line
    assert "6 cells with no assigned perturbation left out: 2 '<missing>'" in line
    assert "2 cells target only genes that are not features and 1 cells target such a gene beside" in line


def test_a_clean_column_keeps_every_cell():
    obs = pd.DataFrame({"condition": ["ctrl", "g1+ctrl", "g1+g2", "non-targeting"]})
    iv = intervention_targets(obs, ["g0", "g1", "g2"], "condition")
    assert iv.keep_cells.all() and iv.n_left_out == 0 and iv.summary()["n_left_out_cells"] == 0
    assert iv.control_cells.tolist() == [True, False, False, True]


@pytest.fixture(scope="module")
def screens():
    """A small screen, and the same screen with cells of unusable labels appended (their
    expression drawn far from the data's, so that reading them would change the fit)."""
    a = simulate_perturbation_data(n_genes=15, n_single=8, n_double=2, n_ctrl=300, cells_per_condition=30, seed=2)
    a.obs["condition"] = a.obs["condition"].astype(str)
    rng = np.random.default_rng(0)
    extra_labels = ["unassigned"] * 40 + ["multiple"] * 20 + [None] * 10 + ["gX+ctrl"] * 30 + ["g1+gX"] * 10
    x = np.asarray(a.X.toarray() if hasattr(a.X, "toarray") else a.X)
    extra = rng.gamma(2.0, 2.0, size=(len(extra_labels), a.n_vars)).astype(x.dtype)
    b = ad.AnnData(np.vstack([x, extra]), obs=pd.DataFrame(
        {"condition": list(a.obs["condition"]) + extra_labels},
        index=[f"c{i}" for i in range(a.n_obs + len(extra_labels))]), var=a.var.copy())
    a = ad.AnnData(x, obs=b.obs.iloc[: a.n_obs].copy(), var=a.var.copy())
    return a, b


@pytest.mark.filterwarnings("ignore")
def test_left_out_cells_do_not_enter_step_one(screens, caplog):
    a, b = screens
    ga = discover(a, algorithm="regression")
    with caplog.at_level(logging.INFO, logger="cape_pipeline.causal.interventions"):
        gb = discover(b, algorithm="regression")
    assert (ga.adjacency != gb.adjacency).nnz == 0
    np.testing.assert_array_equal(ga.adjacency.toarray(), gb.adjacency.toarray())
    assert gb.params["n_obs"] == a.n_obs and gb.params["n_left_out_cells"] == 110
    assert gb.params["label_kinds"]["unassigned"] == 70 and gb.params["label_kinds"]["mixed"] == 10
    assert gb.params["unassigned_labels"] == {"unassigned": 40, "multiple": 20, "<missing>": 10}
    assert gb.params["n_control_cells"] == ga.params["n_control_cells"] == 300
    assert "70 cells with no assigned perturbation left out" in caplog.text
    assert b.n_obs == a.n_obs + 110  # the caller's data are not changed
    # read as observational cells, the appended rows would change the graph
    gn = discover(b, algorithm="regression", regression={"interventions": "none"})
    assert (gn.adjacency != discover(a, algorithm="regression", regression={"interventions": "none"}).adjacency).nnz > 0


@pytest.mark.filterwarnings("ignore")
def test_the_check_against_perturbations_counts_no_left_out_cell_as_a_control(screens):
    a, b = screens
    single = sorted({c.split("+")[0] for c in a.obs["condition"] if c.endswith("+ctrl")})
    w = np.zeros((a.n_vars, a.n_vars))
    w[[list(a.var_names).index(g) for g in single]] = 1.0  # every edge out of a single target
    np.fill_diagonal(w, 0.0)
    sa, sb = interventional_score(a, w, n_random=50), interventional_score(b, w, n_random=50)
    assert sb["n_control"] == sa["n_control"] == 300
    assert sb["n_testable"] == sa["n_testable"] > 0 and sb["share_shifted"] == sa["share_shifted"]


def test_the_report_says_how_each_kind_was_treated():
    from cape_pipeline.report.sections import dag_lines

    iv = {"intervention_column": "condition", "n_perturbed_cells": 30, "n_perturbed_features": 1,
          "n_control_cells": 20, "label_kinds": {"control": 20, "perturbed": 30, "unmeasured_target": 4, "mixed": 1,
                                                 "unassigned": 7},
          "unassigned_labels": {"unassigned": 5, "multiple": 2}, "unknown_targets": {"gX": 5}}
    text = "\n".join(dag_lines({"method": "cape", "n_edges": 3, "n_cycle_edges_dropped": 0, "interventions": iv}, 5))
    assert "7 cells with no assigned perturbation (5 'unassigned', 2 'multiple'), not read as controls" in text
    assert "5 cells whose label names a gene that is not a feature (e.g. gX)" in text
