"""`cape run DATA --set train.init=scgpt:DIR` fine-tunes every arm from a released scGPT
checkpoint, here the tiny fixture with a vocabulary of pbmc68k_reduced genes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.pipeline import run_pipeline

DATA = Path(__file__).resolve().parents[1] / "data"
CKPT = DATA / "scgpt_tiny_pbmc"

FAST = {
    "discover": {"low_rank.epochs": 20, "learned.epochs": 20},
    "embed": {"dim": 16, "max_epochs": 20},
    "train": {
        "init": f"scgpt:{CKPT}", "compare": ["none"], "n_seeds": 1, "pretrain_epochs": 1, "finetune_epochs": 1,
        "tasks": ["annotation"],
    },
    "evaluate": {"umap": False},
}


def test_pbmc_fine_tunes_from_the_checkpoint_end_to_end(tmp_path):
    out = tmp_path / "out"
    r = run_pipeline("pbmc68k_reduced", workdir=tmp_path / "w", overrides=FAST, out=out, seed=0)
    train = r.output("train")
    assert train.checkpoint_genes == {
        "checkpoint": str(CKPT), "n_genes_used": 47, "n_genes_dropped": 765 - 47,
        "dropped_examples": train.checkpoint_genes["dropped_examples"],
    }
    assert train.d_model == 32 and train.arms == ["cape", "none"]
    # the fine-tuned backbone holds the checkpoint's sizes and started from its weights
    model = train.results[0].model.backbone
    assert model.config.norm_scheme == "post" and model.n_features == 47
    doc = json.loads((out / "report.json").read_text())
    assert doc["training"]["checkpoint_genes"]["n_genes_used"] == 47
    assert "starts from the scGPT checkpoint" in (out / "report.md").read_text()


def test_init_checks_fail_before_any_stage(tmp_path):
    bad_dim = {**FAST, "embed": {"dim": 8}}
    with pytest.raises(CapeConfigError, match=r"embed.dim = 16"):
        run_pipeline("pbmc68k_reduced", workdir=tmp_path / "w", overrides=bad_dim)
    no_id = {**FAST, "train": {**FAST["train"], "compare": ["none/no-id"]}}
    with pytest.raises(CapeConfigError, match="compare with none"):
        run_pipeline("pbmc68k_reduced", workdir=tmp_path / "w", overrides=no_id)
    with pytest.raises(CapeConfigError, match="expected scgpt:DIR"):
        run_pipeline("pbmc68k_reduced", workdir=tmp_path / "w", overrides={"train": {"init": str(CKPT)}})
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").iterdir())


def test_no_gene_in_the_vocabulary_is_a_clear_error(tmp_path):
    other = {**FAST, "train": {**FAST["train"], "init": f"scgpt:{DATA / 'scgpt_tiny'}"}}
    with pytest.raises(CapeDataError, match="none of the data's .* genes"):
        run_pipeline("pbmc68k_reduced", workdir=tmp_path / "w", overrides=other, until="train")
