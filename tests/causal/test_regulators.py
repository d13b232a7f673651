"""Regulators as prior knowledge of Step I (``DiscoverConfig.regulators``): with a list, every
candidate, tested pair and edge of the regression algorithm has a listed parent; without one the
fit is unchanged; the list is read from a file, a bundled name, a var column or a Python list."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import cape_pipeline as cape
from cape_pipeline.causal import CausalGraph, discover
from cape_pipeline.causal.config import DiscoverConfig
from cape_pipeline.causal.metrics import dag_metrics
from cape_pipeline.causal.regression.orientation import greedy_likelihood_dag
from cape_pipeline.causal.regulators import (
    bundled_path,
    listed_regulators,
    read_regulator_file,
    regulators_fingerprint,
    resolve_regulators,
)
from cape_pipeline.causal.screen import candidate_parents
from cape_pipeline.datasets import simulated_hill_counts
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError


@pytest.fixture(scope="module")
def hill():
    """600 cells × 80 genes of the Hill-kinetics generator; ``var["tf"]`` marks its regulators."""
    a = simulated_hill_counts(600, 80, n_types=3, seed=2)
    cape.pp.preprocess(a, min_genes=0)
    return a


def _sources(graph: CausalGraph) -> np.ndarray:
    return np.asarray(graph.feature_names)[sp.coo_array(graph.adjacency).row]


def _std(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(0)) / x.std(0)


def test_screen_picks_candidates_among_the_regulators_only():
    rng = np.random.default_rng(0)
    x = torch.from_numpy(_std(rng.normal(size=(200, 40))).astype(np.float32))
    reg = torch.tensor([1, 5, 6, 17, 30])
    table = candidate_parents(x, 3, regulators=reg)
    assert np.isin(table.numpy(), reg.numpy()).all()
    assert (table != torch.arange(40)[:, None]).all()  # a regulator is not its own candidate
    # every regulator is somebody's candidate here, the other features nobody's
    assert set(np.unique(table.numpy()).tolist()) == set(reg.tolist())
    # one regulator: its own row holds only itself (padding the fit masks out), every other row it
    lone = candidate_parents(x, 3, regulators=torch.tensor([7]))
    assert (lone == 7).all()


def test_screen_with_every_feature_listed_is_the_screen_without_a_list():
    rng = np.random.default_rng(1)
    x = torch.from_numpy(_std(rng.normal(size=(150, 30))).astype(np.float32))
    assert torch.equal(candidate_parents(x, 4), candidate_parents(x, 4, regulators=torch.arange(30)))


def test_orientation_points_a_regulator_gene_pair_from_the_regulator():
    rng = np.random.default_rng(2)
    n = 3000
    hub = rng.normal(size=n)
    z = _std(np.column_stack([hub, *[0.7 * hub + rng.normal(size=n) for _ in range(4)]]))
    a, b = np.zeros(4, dtype=np.int64), np.arange(1, 5)
    p, c = greedy_likelihood_dag(z, a, b)
    assert (p == 0).sum() >= 3  # the likelihood makes the hub the parent ...
    may = np.array([False, True, True, True, True])
    p, c = greedy_likelihood_dag(z, a, b, may_parent=may)
    assert set(p.tolist()) <= {1, 2, 3, 4} and set(c.tolist()) == {0} and p.size == 4  # ... the list overrules it
    p, c = greedy_likelihood_dag(z, a, b, may_parent=np.zeros(5, dtype=bool))
    assert p.size == 0  # neither endpoint may be a parent: the pair is left out


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("n_splits", [1, 2])
def test_every_edge_starts_at_a_listed_regulator(hill, n_splits):
    tf = hill.var_names[hill.var["tf"].to_numpy()]
    g0 = discover(hill, regression={"n_splits": n_splits})
    g = discover(hill, regression={"n_splits": n_splits, "regulators": "var:tf"})
    assert g.n_edges > 0 and g.is_dag()
    assert np.isin(_sources(g), tf).all()
    assert g.edge_scores["source"].isin(tf).all()  # every screened pair too
    assert not np.isin(_sources(g0), tf).all()  # without the list non-regulators get children
    assert g.params["regulators"] == {"source": "var:tf", "n_listed": len(tf), "n_among_features": len(tf),
                                      "hash": regulators_fingerprint(list(tf))}
    assert "listed regulators" in g.params["edge_rule"]
    truth = hill.varp["true_dag"]
    assert dag_metrics(g.adjacency, truth)["f1"] > dag_metrics(g0.adjacency, truth)["f1"]


@pytest.mark.filterwarnings("ignore")
def test_regulators_with_perturbation_labels_and_the_jackknife():
    a = simulated_hill_counts(500, 60, n_types=3, seed=1, knockdowns=10, knockdown_cells=30)
    cape.pp.preprocess(a, min_genes=0)
    g = discover(a, regression={"n_splits": 2, "regulators": "var:tf"})
    assert g.params["intervention_column"] == "condition" and g.is_dag()
    assert any(h["stage"] == "jackknife re-test" for h in g.history)
    assert np.isin(_sources(g), a.var_names[a.var["tf"].to_numpy()]).all()


@pytest.mark.filterwarnings("ignore")
def test_listing_every_feature_gives_the_fit_without_a_list(hill):
    """The restriction is a pure restriction: with every feature listed, the screen, the tests,
    the orientation and the vote make the same graph, bit for bit, as ``regulators=None``."""
    g0 = discover(hill, regression={"n_splits": 2})
    assert g0.params.get("regulators") is None
    g = discover(hill, regression={"n_splits": 2, "regulators": list(hill.var_names)})
    np.testing.assert_array_equal(g.adjacency.toarray(), g0.adjacency.toarray())
    assert g.edge_scores.equals(g0.edge_scores)


def test_regulator_file_skips_comments_and_blank_lines(tmp_path):
    f = tmp_path / "tfs.txt"
    f.write_text("# my TFs\n\nGATA1\n  SPI1  \n# CEBPA\nGATA1\nKLF1,erythroid\nTAL1\tbHLH\n")
    assert read_regulator_file(f) == ["GATA1", "SPI1", "KLF1", "TAL1"]
    (tmp_path / "empty.txt").write_text("# nothing\n\n")
    with pytest.raises(CapeFileError, match="empty.txt"):
        read_regulator_file(tmp_path / "empty.txt")
    with pytest.raises(CapeFileError, match="missing.txt"):
        read_regulator_file(tmp_path / "missing.txt")
    with pytest.raises(CapeFileError, match="directory"):
        read_regulator_file(tmp_path)


def test_bundled_lists_resolve():
    for name, gene in (("human", "SOX2"), ("mouse", "Sox2")):
        assert bundled_path(name).is_file()
        names, source = listed_regulators(name)
        assert source == name and len(names) > 1000 and gene in names
        assert not any(n.startswith("#") for n in names)
    assert regulators_fingerprint("human") != regulators_fingerprint("mouse")
    reg = resolve_regulators("human", ["SOX2", "GAPDH", "PAX6", "ACTB"])
    assert reg.index.tolist() == [0, 2] and reg.summary()["n_among_features"] == 2


@pytest.mark.filterwarnings("ignore")
def test_file_path_and_list_give_the_var_column_graph(hill, tmp_path, caplog):
    tf = list(hill.var_names[hill.var["tf"].to_numpy()])
    f = tmp_path / "tfs.txt"
    f.write_text("# regulators of the simulation\n" + "\n".join([*tf, "NOT_A_GENE"]) + "\n")
    with caplog.at_level(logging.INFO, logger="cape_pipeline.causal.regulators"):
        g_file = discover(hill, regression={"n_splits": 1, "regulators": f})  # a pathlib.Path
    assert f"{len(tf)} of {len(tf) + 1} listed" in caplog.text and f"the {hill.n_vars} features" in caplog.text
    assert g_file.params["regulators"]["source"] == str(f) and g_file.params["regulators"]["n_listed"] == len(tf) + 1
    g_var = discover(hill, regression={"n_splits": 1, "regulators": "var:tf"})
    g_list = discover(hill, regression={"n_splits": 1, "regulators": tf[::-1]})
    for g in (g_var, g_list):
        np.testing.assert_array_equal(g.adjacency.toarray(), g_file.adjacency.toarray())
    # the AnnData tool records the summary in uns
    b = hill.copy()
    cape.tl.discover(b, n_splits=1, regulators=str(f), progress=False)
    assert b.uns["cape"]["discover"]["regulators"]["n_among_features"] == len(tf)


def test_a_list_without_features_raises_naming_regulators(hill):
    with pytest.raises(ValueError, match="regulators") as info:
        discover(hill, regression={"regulators": ["NOPE1", "NOPE2"]})
    assert "NOPE1" in str(info.value) and repr(hill.var_names[0]) in str(info.value)
    with pytest.raises(ValueError, match="case is ignored"):
        discover(hill, regression={"regulators": [str(hill.var_names[0]).lower() + "X", str(hill.var_names[1]).swapcase()]})


@pytest.mark.parametrize("value", [3, "", "var:", [], ["A", ""], b"x", True])
def test_bad_values_are_refused(value):
    with pytest.raises(CapeConfigError, match="regulators"):
        DiscoverConfig(regression={"regulators": value})


def test_other_algorithms_and_methods_refuse_regulators(hill):
    with pytest.raises(CapeConfigError, match=r"regression\.regulators: not used by algorithm='learned'"):
        DiscoverConfig(algorithm="learned", regression={"regulators": "human"})
    with pytest.raises(CapeConfigError, match="regulators"):
        DiscoverConfig(algorithm="low-rank", regression={"regulators": "human"})
    with pytest.raises(CapeConfigError, match=r"regression\.regulators: only for method 'cape'"):
        discover(np.random.default_rng(0).normal(size=(50, 5)), method="correlation", regression={"regulators": ["x0"]})
    # "auto" resolving to another algorithm (not single-cell data): refused at run time
    rng = np.random.default_rng(3)
    with pytest.raises(CapeConfigError, match=r"regression\.regulators: used by algorithm='regression' only"):
        discover(rng.normal(size=(100, 30)), regression={"regulators": ["x0", "x1"]}, learned={"epochs": 1})
    # a var column on data without var, a missing column, a non-boolean one
    with pytest.raises(CapeDataError, match="no var table"):
        discover(rng.normal(size=(100, 30)), algorithm="regression", regression={"regulators": "var:tf"})
    with pytest.raises(CapeDataError, match="no column 'is_tf'"):
        discover(hill, regression={"regulators": "var:is_tf"})
    b = hill.copy()
    b.var["level"] = np.arange(b.n_vars, dtype=float)
    with pytest.raises(CapeDataError, match="boolean"):
        discover(b, regression={"regulators": "var:level"})
    with pytest.raises(CapeFileError, match="no_such_file.txt"):
        discover(hill, regression={"regulators": "no_such_file.txt"})


def test_a_path_and_a_list_are_stored_plainly():
    assert DiscoverConfig(regression={"regulators": Path("a/tfs.txt")}).regression.regulators == str(Path("a/tfs.txt"))
    assert DiscoverConfig(regression={"regulators": ["A", "B"]}).regression.regulators == ("A", "B")
    assert DiscoverConfig().regression.regulators is None


def test_pipeline_cache_key_follows_the_list_content(tmp_path):
    from cape_pipeline.pipeline.cache import stage_key
    from cape_pipeline.pipeline.runner import build_stage_configs, resolve_stages
    from cape_pipeline.pipeline.stages import STAGES
    from cape_pipeline.pipeline.stages._base import StageContext, config_params

    f = tmp_path / "tfs.txt"

    def key(overrides):
        cfg = build_stage_configs(resolve_stages("discover"), {"discover": overrides}, seed=0, device=None,
                                  source="sachs")["discover"]
        fp = STAGES["discover"].fingerprint(cfg, StageContext(source="sachs"))
        return cfg, stage_key("discover", config_params(cfg), {"preprocess": "k"}, fp)

    f.write_text("# v1\nRaf\nMek\n")
    cfg, k1 = key({"regression.regulators": str(f)})
    assert cfg.regression.regulators == str(f)
    assert key({"regression.regulators": str(f)})[1] == k1
    f.write_text("# v2, a comment only\nRaf\nMek\n")
    assert key({"regression.regulators": str(f)})[1] == k1  # the same names
    f.write_text("Raf\nMek\nErk\n")
    assert key({"regression.regulators": str(f)})[1] != k1  # same path, another list
    assert key({})[1] != k1
    assert key({"regression.regulators": "human"})[1] != key({"regression.regulators": "mouse"})[1]
    assert key({"regression.regulators": "var:tf"})[0].regression.regulators == "var:tf"
    with pytest.raises(CapeFileError, match="gone.txt"):
        key({"regression.regulators": str(tmp_path / "gone.txt")})
