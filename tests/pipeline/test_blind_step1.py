"""Step I is kept blind to the perturbation task's test conditions: the discover
stage leaves their cells out whenever the run's train stage scores the perturbation task."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.pipeline.runner import build_stage_configs, resolve_stages

SPLIT = {"label_key": "condition", "split": "conditions", "test_fraction": 0.3, "unseen_gene_fraction": 0.15,
         "combo_seen2_test_fraction": 0.15}
#: a small perturb-sim (20 genes, 14 perturbations of 12 cells, 120 controls) and a tiny train stage
INGEST = {"n_genes": 20, "n_single": 8, "n_double": 6, "n_ctrl": 120, "cells_per_condition": 12}
TINY_TRAIN = {"n_seeds": 2, "n_layers": 1, "n_heads": 2, "max_tokens": 16, "pretrain_epochs": 1,
              "finetune_epochs": 1, "compare": ["none"], "save_models": False, "label_key": "perturbation_kind"}


def _split(overrides=None, source="perturb-sim", until=None, seed=0):
    cfgs = build_stage_configs(resolve_stages(until), overrides or {}, seed=seed, device=None, source=source)
    return cfgs["discover"].held_out_split


def test_the_split_step_i_is_blind_to_follows_the_train_stage() -> None:
    assert _split() == {**SPLIT, "seeds": [0, 1, 2]}
    # `--until discover` keys Step I as the whole run does (the Snakefile runs stage by stage)
    assert _split(until="discover") == _split()
    assert _split({"train": {"n_seeds": 1}}, seed=5) == {**SPLIT, "seeds": [5]}
    # train.label_key names annotation labels; the perturbation task always reads obs["condition"]
    assert _split({"train": {"label_key": "cell_type"}})["label_key"] == "condition"
    assert _split({"train": {"tasks": ["perturbation"]}}, source="sachs")["seeds"] == [0, 1, 2]
    # Step I that does not read the labels still sees the held-out cells' expression: blind too
    assert _split({"discover": {"regression.interventions": "none"}}) == _split()
    # nothing to be blind to: no perturbation task, ready encodings, the true graph, or the user's choice
    assert _split(source="sachs") == {}
    assert _split(source="/data/my_screen.h5ad") == {}
    assert _split({"train": {"tasks": ["annotation"]}}) == {}
    assert _split({"train": {"encodings": "/nowhere"}}) == {}
    assert _split({"discover": {"method": "true-dag"}}) == {}
    assert _split({"discover": {"hold_out_test_conditions": False}}) == {}
    from cape_pipeline.pipeline.config import parse_assignments

    assert _split(parse_assignments(["discover.hold_out_test_conditions=false"]), until="discover") == {}


def test_the_derived_split_cannot_be_set() -> None:
    """``held_out_split`` follows from the train stage: ``--set`` refuses it, naming the option
    that is the user's choice; its one earlier setting, ``{"seeds": []}``, maps onto that option."""
    with pytest.raises(CapeConfigError, match=r"discover.held_out_split is derived from the train stage .* "
                                              r"discover.hold_out_test_conditions=false"):
        _split({"discover": {"held_out_split": {**SPLIT, "seeds": [0]}}})
    with pytest.warns(FutureWarning, match=r"discover.held_out_split=\{'seeds': \[\]\} is now "
                                           r"discover.hold_out_test_conditions=false"):
        cfgs = build_stage_configs(resolve_stages(None), {"discover": {"held_out_split": {"seeds": []}}}, seed=0,
                                   device=None, source="perturb-sim")
    assert cfgs["discover"].hold_out_test_conditions is False and cfgs["discover"].held_out_split == {}
    with pytest.raises(CapeConfigError, match="give only discover.hold_out_test_conditions"):
        _split({"discover": {"held_out_split": {"seeds": []}, "hold_out_test_conditions": True}})
    with pytest.raises(CapeConfigError, match=r"discover.hold_out_test_conditions: expected true or false, got 'no'"):
        _split({"discover": {"hold_out_test_conditions": "no"}})


@pytest.mark.parametrize(("split", "match"), [
    ({**SPLIT}, r"held_out_split.seeds: expected a list of integers >= 0, got None"),
    ({**SPLIT, "seeds": 3}, r"held_out_split.seeds: expected a list of integers >= 0, got 3"),
    ({**SPLIT, "seeds": [-1]}, r"held_out_split.seeds: expected a list"),
    ({**SPLIT, "seeds": "01"}, r"held_out_split.seeds: expected a list"),
    ({**SPLIT, "seeds": [0], "test_fraktion": 0.5}, r"held_out_split: expected the keys .*'test_fraction'.*got .*'test_fraktion'"),
    ({"seeds": [], "label_key": "condition"}, r"held_out_split: expected the keys .*'combo_seen2_test_fraction'"),
    ({**SPLIT, "seeds": [0], "label_key": 5}, r"held_out_split.label_key: expected an obs column name, got 5"),
    ({**SPLIT, "seeds": [0], "split": "bogus"}, r"held_out_split.split: expected one of"),
    ({**SPLIT, "seeds": [0], "test_fraction": 2.0}, r"held_out_split.test_fraction"),
])
def test_a_malformed_derived_split_is_refused(split, match) -> None:
    from cape_pipeline.pipeline.stages.discover import DiscoverStageConfig

    with pytest.raises(CapeConfigError, match=match):
        DiscoverStageConfig(held_out_split=split)


def test_a_split_that_cannot_be_drawn_says_how_to_go_on(tmp_path) -> None:
    from cape_pipeline.pipeline.runner import run_pipeline

    with pytest.raises(CapeDataError, match=r"discover: Step I is kept blind .* obs has no 'condition' column\. .*"
                                            r"--set discover.hold_out_test_conditions=false"):
        run_pipeline("sachs", until="discover", workdir=tmp_path / "w", seed=0,
                     overrides={"train": {"tasks": ["perturbation"]}, "discover": {"learned.epochs": 1, "low_rank.epochs": 1}})


def test_step_i_leaves_out_exactly_the_conditions_the_train_stage_tests_on(tmp_path, caplog) -> None:
    """Through the real train stage (its own label key set for annotation): the conditions Step I
    left out are the union of the task's test conditions over the run's seeds, no more, no less;
    the stage records the run as blind and does not warn; the user's opt-out is not blind."""
    from cape_pipeline._keys import condition_labels
    from cape_pipeline.pipeline.runner import _resolve, run_pipeline

    overrides = {"ingest": INGEST, "embed": {"dim": 8}, "train": {**TINY_TRAIN, "tasks": ["perturbation"]}}
    with caplog.at_level(logging.WARNING):
        res = run_pipeline("perturb-sim", until="train", workdir=tmp_path / "w", overrides=overrides, seed=0)
    adata, graph, train = (_resolve(res.outputs, s) for s in ("preprocess", "discover", "train"))
    held = graph.params["held_out_conditions"]
    tested = {c for r in train.results for c in r.params["test_conditions"]}
    assert {r.params["seed"] for r in train.results} == {0, 1}
    assert set(held) == tested
    labels = condition_labels(adata.obs, "condition", "")
    assert graph.params["held_out_cells"] == int(np.isin(labels, held).sum()) > 0
    assert graph.params["n_obs"] == adata.n_obs - graph.params["held_out_cells"]
    assert graph.params["held_out_share"] == pytest.approx(len(held) / 14)
    assert train.plan["step1_blind"] is True and "held-out conditions" not in caplog.text
    # the user's opt-out: Step I sees every cell, and the run says it was not blind
    caplog.clear()
    overrides["discover"] = {"hold_out_test_conditions": False}
    with caplog.at_level(logging.WARNING):
        res = run_pipeline("perturb-sim", until="train", workdir=tmp_path / "w", overrides=overrides, seed=0)
    graph, train = _resolve(res.outputs, "discover"), _resolve(res.outputs, "train")
    assert graph.params["n_obs"] == adata.n_obs and "held_out_conditions" not in graph.params
    assert train.plan["step1_blind"] is False and "held-out conditions" in caplog.text
    assert json.loads(json.dumps(train.plan))["step1_blind"] is False  # stored in results.json as it was
