"""pe="cape-learned-scale": starts at the paper's map, learns one factor per head, keeps Eq. 25."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cape_pipeline.errors import CapeConfigError
from cape_pipeline.models import ScGPTConfig, build_backbone, build_pe
from cape_pipeline.models.pe.cape import CapeLearnedScalePE

M, D, H = 10, 16, 2
CFG = ScGPTConfig(d_model=D, n_heads=H, n_layers=2, max_tokens=0, tokens="all")


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(3, M, generator=g) * 3
    angles = np.random.default_rng(seed).uniform(-math.pi / 4, math.pi / 4, (M, D // 2))
    return x, angles


def test_starts_exactly_at_cape():
    x, angles = _data()
    torch.manual_seed(0)
    cape = build_backbone("scgpt", CFG, n_features=M, pe="cape", angles=angles).eval()
    torch.manual_seed(0)
    learned = build_backbone("scgpt", CFG, n_features=M, pe="cape-learned-scale", angles=angles).eval()
    missing = learned.load_state_dict(cape.state_dict(), strict=False)
    assert missing.missing_keys == ["pe.log_scale"] and not missing.unexpected_keys
    with torch.no_grad():
        torch.testing.assert_close(learned(x), cape(x))
    np.testing.assert_allclose(learned.pe.head_scales().numpy(), [1.0, 1.0])


def test_each_head_scales_its_own_slice_and_learns():
    _, angles = _data()
    pe = build_pe("cape-learned-scale", n_features=M, d_model=D, n_heads=H, angles=angles)
    assert isinstance(pe, CapeLearnedScalePE)
    with torch.no_grad():
        pe.log_scale.copy_(torch.tensor([0.0, math.log(3.0)]))
    idx = torch.arange(M)[None]
    out = pe.rotary(idx)[0].detach().numpy()
    a = angles.astype(np.float32)
    np.testing.assert_allclose(out[:, :4], a[:, :4], rtol=1e-6)
    np.testing.assert_allclose(out[:, 4:], 3 * a[:, 4:], rtol=1e-5)
    # a gradient reaches the scale through a model's loss
    x, _ = _data(1)
    model = build_backbone("scgpt", CFG, n_features=M, pe="cape-learned-scale", angles=angles)
    model(x).pow(2).sum().backward()
    assert model.pe.log_scale.grad is not None and torch.isfinite(model.pe.log_scale.grad).all()
    assert model.pe.log_scale.grad.abs().sum() > 0


def test_heads_that_do_not_divide_the_angles_are_refused():
    with pytest.raises(CapeConfigError, match="n_heads=3"):
        build_pe("cape-learned-scale", n_features=M, d_model=D, n_heads=3, angles=np.zeros((M, D // 2)))
