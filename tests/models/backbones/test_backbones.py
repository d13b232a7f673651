from __future__ import annotations

import numpy as np
import pytest
import torch

from cape_pipeline.errors import CapeConfigError
from cape_pipeline.models import (
    ATTENTIONS,
    PE_NAMES,
    DotProductAttention,
    MethylGPTConfig,
    ScGPTConfig,
    build_backbone,
    config_for,
    preset,
    register_attention,
)
from cape_pipeline.models.loops import masked_pretrain
from cape_pipeline.models.positions import FeaturePositions

M = 10
SMALL = {"d_model": 16, "n_heads": 2, "n_layers": 1}


@pytest.mark.parametrize("identity", [True, False])
@pytest.mark.parametrize("backbone", ["scgpt", "scbert", "methylgpt"])
@pytest.mark.parametrize("pe", PE_NAMES)
def test_every_backbone_takes_every_pe(backbone, pe, identity):
    rng = np.random.default_rng(0)
    angles = rng.uniform(-0.7, 0.7, (M, 8))
    table = rng.normal(size=(M, 16))
    forest = np.array([-1, 0, 0, 1, -1, 4, 5, 5, 2, -1]), rng.uniform(0.1, 1, M)  # ape-tree's spanning forest
    pos = FeaturePositions(angles=angles, parent=forest[0], parent_weight=forest[1])
    cfg = {**SMALL, "max_tokens": 6, "identity": identity}
    model = build_backbone(backbone, cfg, n_features=M, pe=pe, angles=pos, static_table=table)
    assert model.use_identity == identity
    x = torch.rand(3, M)
    x[0, 2] = float("nan")
    x[1, :4] = 0.0
    model.fit_data(x.numpy())
    tok = model.tokenize(x)
    h = model(tok)
    assert h.shape == (3, 1 + 6, 16)
    assert torch.isfinite(h).all()
    h.sum().backward()


def test_paper_presets_and_config_checks():
    p = preset("scgpt-paper")
    assert (p.d_model, p.n_layers, p.n_heads) == (512, 4, 8)
    assert preset("scbert-paper").d_model == 200
    assert config_for("scgpt", None) == ScGPTConfig()
    assert config_for("methylgpt", {"d_model": 32}).d_model == 32
    with pytest.raises(CapeConfigError, match="divisible"):
        ScGPTConfig(d_model=20, n_heads=4)
    with pytest.raises(CapeConfigError, match="unknown field"):
        config_for("scgpt", {"width": 3})
    with pytest.raises(CapeConfigError, match="needs a ScGPTConfig"):
        config_for("scgpt", MethylGPTConfig())
    with pytest.raises(CapeConfigError, match="backbone"):
        config_for("geneformer", None)
    with pytest.raises(CapeConfigError, match="attention"):
        build_backbone("scgpt", SMALL, n_features=M, pe="none", attention="cone")


def test_attention_registry_is_extensible():
    class Scaled(DotProductAttention):
        pass

    register_attention("test-scaled", Scaled)
    try:
        m = build_backbone("scgpt", SMALL, n_features=M, pe="none", attention="test-scaled")
        assert isinstance(m.blocks[0].attn, Scaled)
        with pytest.raises(CapeConfigError, match="already"):
            register_attention("test-scaled", Scaled)
    finally:
        ATTENTIONS.pop("test-scaled")


def test_missing_values_are_masked_keys_in_methylgpt():
    torch.manual_seed(0)
    model = build_backbone("methylgpt", SMALL, n_features=M, pe="none").eval()
    x = torch.rand(2, M)
    x[:, 3] = float("nan")
    tok = model.tokenize(x)
    assert tok.missing[:, 3].all()
    h = model(tok)
    with torch.no_grad():
        model.missing_embed.add_(5.0)  # a masked key cannot influence the other tokens
    h2 = model(tok)
    keep = [i for i in range(M + 1) if i != 4]
    torch.testing.assert_close(h[:, keep], h2[:, keep])


def test_pretraining_reduces_reconstruction_loss():
    g = torch.Generator().manual_seed(0)
    z = torch.rand(200, 1, generator=g)
    x = (z * torch.linspace(0.5, 3.0, M)).round(decimals=1)  # strongly co-varying features
    torch.manual_seed(0)
    model = build_backbone("scgpt", {**SMALL, "tokens": "all"}, n_features=M, pe="none")
    model.fit_data(x.numpy())
    _, log = masked_pretrain(model, x, epochs=16, batch_size=32, lr=3e-3, mask_ratio=0.3, generator=g)
    assert len(log.losses) == 16 and log.n_seen == 16 * 200
    assert log.losses[-1] < 0.5 * log.losses[0]
