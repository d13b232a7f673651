"""The bundled ScGPT backbone started from a released scGPT checkpoint: with
``pe="none"`` its outputs equal the checkpoint's own encoder on the same genes and values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.models import ScGPT, from_scgpt
from cape_pipeline.models.scgpt_import.warm_start import (
    init_from_scgpt,
    scgpt_checkpoint_config,
    vocabulary_genes,
)

DATA = Path(__file__).resolve().parents[2] / "data"


def _genes(path: Path) -> list[str]:
    vocab = from_scgpt(path).vocab
    return [g for g in vocab if not g.startswith("<")]


@pytest.mark.parametrize("name", ["scgpt_tiny", "scgpt_other"])
def test_backbone_from_checkpoint_equals_checkpoint_encoder(name):
    path = DATA / name
    genes = _genes(path)
    cfg = scgpt_checkpoint_config(path, dropout=0.0)
    assert cfg.norm_scheme == "post" and cfg.activation == "relu"
    torch.manual_seed(0)
    model = ScGPT(cfg, n_features=len(genes), pe="none")
    report = init_from_scgpt(model, path, genes)
    assert report["n_genes"] == len(genes)
    model.eval()
    rng = np.random.default_rng(0)
    x = rng.gamma(1.0, 2.0, size=(4, len(genes))) * (rng.random((4, len(genes))) < 0.5)
    x[1, :] = 0.0
    x[1, 3] = 1.5  # a cell with a single expressed gene
    xt = torch.as_tensor(x, dtype=torch.float32)
    tok = model.tokenize(xt)
    with torch.no_grad():
        ours = model(tok)  # (B, 1+T, D)
    ckpt = from_scgpt(path)
    vocab = ckpt.vocab
    ids = torch.as_tensor([vocab[g] for g in genes])[tok.idx]
    vals = tok.bins.float() if cfg.value_encoder in ("continuous-bins", "binned") else tok.values
    gene_ids = torch.cat([torch.full((4, 1), vocab["<cls>"]), ids], dim=1)
    values = torch.cat([torch.zeros(4, 1), vals], dim=1)
    pad = torch.cat([torch.zeros(4, 1, dtype=torch.bool), tok.pad], dim=1) if tok.pad is not None else None
    with torch.no_grad():
        ref = ckpt.encode(gene_ids, values, pad)
    keep = ~pad if pad is not None else torch.ones(gene_ids.shape, dtype=torch.bool)
    assert float((ours - ref)[keep].abs().max()) < 1e-5


def test_checkpoint_config_refuses_other_sizes_and_prenorm():
    with pytest.raises(CapeConfigError, match="d_model=64 differ"):
        scgpt_checkpoint_config(DATA / "scgpt_tiny", d_model=64)
    with pytest.raises(CapeConfigError, match="pre-norm"):
        scgpt_checkpoint_config(DATA / "scgpt_other" / "prenorm")


def test_genes_outside_the_vocabulary_are_refused():
    path = DATA / "scgpt_tiny"
    genes = _genes(path)[:5] + ["NOT_A_GENE"]
    assert vocabulary_genes(path, genes).tolist() == [True] * 5 + [False]
    model = ScGPT(scgpt_checkpoint_config(path), n_features=len(genes), pe="none")
    with pytest.raises(CapeDataError, match="NOT_A_GENE"):
        init_from_scgpt(model, path, genes)
