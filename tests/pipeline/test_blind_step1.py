"""Step I is kept blind to the perturbation task's test conditions (issue 43): the discover
stage leaves their cells out whenever the run's train stage scores the perturbation task."""

from __future__ import annotations

import numpy as np
import pytest

from cape_pipeline.errors import CapeConfigError
from cape_pipeline.pipeline.runner import build_stage_configs, resolve_stages

SPLIT = {"label_key": "condition", "split": "conditions", "test_fraction": 0.3, "unseen_gene_fraction": 0.15,
         "combo_seen2_test_fraction": 0.15}


def _split(overrides=None, source="perturb-sim", until=None, seed=0):
    cfgs = build_stage_configs(resolve_stages(until), overrides or {}, seed=seed, device=None, source=source)
    return cfgs["discover"].held_out_split


def test_the_split_step_i_is_blind_to_follows_the_train_stage() -> None:
    assert _split() == {**SPLIT, "seeds": [0, 1, 2]}
    # `--until discover` keys Step I as the whole run does (the Snakefile runs stage by stage)
    assert _split(until="discover") == _split()
    assert _split({"train": {"n_seeds": 1}}, seed=5) == {**SPLIT, "seeds": [5]}
    assert _split({"train": {"label_key": "perturbation"}})["label_key"] == "perturbation"
    assert _split({"train": {"tasks": ["perturbation"]}}, source="sachs")["seeds"] == [0, 1, 2]
    # nothing to be blind to: no perturbation task, no labels read, or the user's choice
    assert _split(source="sachs") == {}
    assert _split(source="/data/my_screen.h5ad") == {}
    assert _split({"train": {"tasks": ["annotation"]}}) == {}
    assert _split({"discover": {"interventions": "none"}}) == {}
    assert _split({"discover": {"method": "true-dag"}}) == {}
    assert _split({"discover": {"held_out_split": {"seeds": []}}}) == {"seeds": []}
    with pytest.raises(CapeConfigError, match=r"discover.held_out_split.*missing \['combo_seen2_test_fraction'"):
        _split({"discover": {"held_out_split": {"label_key": "condition", "seeds": [0], "split": "conditions",
                                                "test_fraction": 0.3, "unseen_gene_fraction": 0.15}}})


def test_step_i_leaves_out_the_cells_of_every_condition_the_task_holds_out(tmp_path) -> None:
    from cape_pipeline._keys import condition_labels
    from cape_pipeline.pipeline.runner import _resolve, run_pipeline
    from cape_pipeline.tasks import run_task

    ingest = {"n_genes": 20, "n_single": 8, "n_double": 6, "n_ctrl": 120, "cells_per_condition": 12}
    res = run_pipeline("perturb-sim", until="discover", workdir=tmp_path / "w", overrides={"ingest": ingest}, seed=0)
    adata, graph = _resolve(res.outputs, "preprocess"), _resolve(res.outputs, "discover")
    held = set(graph.params["held_out_conditions"])
    labels = condition_labels(adata.obs, "condition", "")
    assert graph.params["held_out_cells"] == int(np.isin(labels, list(held)).sum()) > 0
    assert graph.params["n_obs"] == adata.n_obs - graph.params["held_out_cells"]
    assert "ctrl" not in held and len(held) < len(set(labels)) - 1  # controls and some training conditions seen
    # the task's own test conditions, seed by seed, are among those Step I never saw
    tiny = {"pretrain_epochs": 1, "finetune_epochs": 1, "n_eval_ctrl": 8,
            "model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "max_tokens": 16}}
    for seed in (0, 2):
        task = run_task("perturbation", adata, pe="default", config=tiny, seed=seed)
        assert set(task.params["test_conditions"]) <= held
    # the user's opt-out: Step I sees every cell
    res = run_pipeline("perturb-sim", until="discover", workdir=tmp_path / "w", seed=0,
                       overrides={"ingest": ingest, "discover": {"held_out_split": {"seeds": []}}})
    full = _resolve(res.outputs, "discover")
    assert full.params["n_obs"] == adata.n_obs and "held_out_conditions" not in full.params
