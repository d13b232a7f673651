from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from cape_pipeline.encodings import apply_rotary
from cape_pipeline.models import RotaryMultiheadAttention

DT = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _block_rotation(phi: torch.Tensor) -> torch.Tensor:
    """Explicit R(φ) of Eq. 26 for one feature: (D/2,) → (D, D)."""
    blocks = [
        torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]], dtype=DT)
        for a in phi.tolist()
    ]
    return torch.block_diag(*blocks)


def test_equals_explicit_block_diagonal_matrix():
    x = torch.randn(3, 5, 8, generator=_gen(1), dtype=DT)
    phi = torch.rand(5, 4, generator=_gen(2), dtype=DT) * 2 - 1
    y = apply_rotary(x, phi)
    for m in range(5):
        ref = x[:, m, :] @ _block_rotation(phi[m]).T  # row vectors: (R x)ᵀ = xᵀ Rᵀ
        torch.testing.assert_close(y[:, m, :], ref)


def test_norm_preserved_and_zero_angle_identity():
    x = torch.randn(2, 7, 6, generator=_gen(3))
    phi = torch.rand(7, 3, generator=_gen(4)) * math.pi
    torch.testing.assert_close(apply_rotary(x, phi).norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(apply_rotary(x, torch.zeros(7, 3)), x)


def test_scores_depend_only_on_angle_differences():
    """Eq. 25: ⟨R(φ_m) q, R(φ_n) k⟩ = qᵀ R(φ_n − φ_m) k, so a common shift changes nothing."""
    q = torch.randn(6, 10, generator=_gen(5), dtype=DT)
    k = torch.randn(6, 10, generator=_gen(6), dtype=DT)
    phi = torch.rand(6, 5, generator=_gen(7), dtype=DT)
    scores = apply_rotary(q, phi) @ apply_rotary(k, phi).T
    shift = torch.rand(1, 5, generator=_gen(8), dtype=DT) * 3
    shifted = apply_rotary(q, phi + shift) @ apply_rotary(k, phi + shift).T
    torch.testing.assert_close(scores, shifted)
    m, n = 1, 4
    direct = q[m] @ _block_rotation(phi[n] - phi[m]) @ k[n]
    torch.testing.assert_close(scores[m, n], direct)


def test_dtype_device_autocast_and_array_input():
    x = torch.randn(2, 4, 8, generator=_gen(9)).to(torch.bfloat16)
    phi = torch.rand(4, 4, generator=_gen(10)).numpy()  # numpy angles accepted
    y = apply_rotary(x, phi)
    assert y.dtype == torch.bfloat16 and y.shape == x.shape
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = apply_rotary(x.float(), torch.from_numpy(phi))
    assert z.dtype == torch.float32
    ref = apply_rotary(x.float(), torch.from_numpy(phi))
    torch.testing.assert_close(z, ref)


def test_broadcast_per_sample_angles():
    x = torch.randn(3, 4, 6, generator=_gen(11))
    phi = torch.rand(3, 4, 3, generator=_gen(12))
    y = apply_rotary(x, phi)
    for b in range(3):
        torch.testing.assert_close(y[b], apply_rotary(x[b], phi[b]))


@pytest.mark.parametrize(
    ("xshape", "ashape", "match"),
    [
        ((2, 4, 7), (4, 3), "even"),
        ((2, 4, 8), (5, 4), "M=4"),
        ((2, 4, 8), (4, 3), "D/2"),
        ((2, 4, 8), (4,), "shape"),
    ],
)
def test_shape_errors(xshape, ashape, match):
    with pytest.raises(ValueError, match=match):
        apply_rotary(torch.zeros(xshape), torch.zeros(ashape))


# ------------------------------------------------------------------ attention module
def _manual(attn: RotaryMultiheadAttention, x, phi, mask=None):
    b, m, d = x.shape
    h, dh = attn.num_heads, attn.head_dim
    w, bias = attn.in_proj.weight, attn.in_proj.bias
    q, k, v = (x @ w.T + bias).split(d, dim=-1)
    outs = []
    for i in range(h):
        sl = slice(i * dh, (i + 1) * dh)
        ang = phi[:, i * dh // 2 : (i + 1) * dh // 2]
        qi = torch.stack(
            [
                torch.stack([_block_rotation(ang[t]) @ q[bb, t, sl] for t in range(m)])
                for bb in range(b)
            ]
        )
        ki = torch.stack(
            [
                torch.stack([_block_rotation(ang[t]) @ k[bb, t, sl] for t in range(m)])
                for bb in range(b)
            ]
        )
        s = qi @ ki.transpose(1, 2) / math.sqrt(dh)
        if mask is not None:
            s = s.masked_fill(mask[:, None, :], -math.inf)
        outs.append(torch.softmax(s, -1) @ v[:, :, sl])
    return attn.out_proj(torch.cat(outs, dim=-1))


@pytest.fixture()
def attn():
    with torch.random.fork_rng():  # seeded init without touching the global RNG
        torch.manual_seed(0)
        return RotaryMultiheadAttention(8, 2).to(DT).eval()


def test_attention_matches_manual(attn):
    x = torch.randn(2, 5, 8, generator=_gen(13), dtype=DT)
    phi = torch.rand(5, 4, generator=_gen(14), dtype=DT)
    torch.testing.assert_close(attn(x, phi), _manual(attn, x, phi))
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[0, 3:] = True
    torch.testing.assert_close(attn(x, phi, key_padding_mask=mask), _manual(attn, x, phi, mask))
    out, weights = attn(x, phi, key_padding_mask=mask, need_weights=True)
    torch.testing.assert_close(out, _manual(attn, x, phi, mask))
    assert weights.shape == (2, 2, 5, 5)
    assert torch.all(weights[0, :, :, 3:] == 0)


def test_attention_without_angles_is_plain_mha(attn):
    x = torch.randn(2, 5, 8, generator=_gen(15), dtype=DT)
    q, k, v = attn.in_proj(x).split(8, -1)
    q, k, v = (t.view(2, 5, 2, 4).transpose(1, 2) for t in (q, k, v))
    ref = attn.out_proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(2, 5, 8))
    torch.testing.assert_close(attn(x, None), ref)


def test_permutation_equivariance(attn):
    x = torch.randn(2, 6, 8, generator=_gen(16), dtype=DT)
    phi = torch.rand(6, 4, generator=_gen(17), dtype=DT)
    perm = torch.randperm(6, generator=_gen(18))
    torch.testing.assert_close(attn(x[:, perm], phi[perm]), attn(x, phi)[:, perm])


def test_angles_change_output(attn):
    x = torch.randn(1, 6, 8, generator=_gen(19), dtype=DT)
    phi = torch.rand(6, 4, generator=_gen(20), dtype=DT)
    assert not torch.allclose(attn(x, phi), attn(x, None))
    # a common shift of all angles leaves attention unchanged (Eq. 25)
    torch.testing.assert_close(attn(x, phi + 0.3), attn(x, phi))


def test_attention_errors():
    with pytest.raises(ValueError):
        RotaryMultiheadAttention(10, 3)
    with pytest.raises(ValueError, match="even"):
        RotaryMultiheadAttention(6, 2)
    a = RotaryMultiheadAttention(8, 2)
    with pytest.raises(ValueError):
        a(torch.zeros(1, 5, 8), torch.zeros(5, 3))
    with pytest.raises(ValueError):
        a(torch.zeros(1, 5, 8), torch.zeros(4, 4))
    with pytest.raises(ValueError):
        a(
            torch.zeros(1, 5, 8),
            torch.zeros(5, 4),
            key_padding_mask=torch.zeros(1, 4, dtype=torch.bool),
        )


def test_gradients_flow_and_dropout_train_mode():
    a = RotaryMultiheadAttention(8, 2, dropout=0.5)
    x = torch.randn(2, 5, 8, requires_grad=True)
    a.train()(x, torch.rand(5, 4)).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_query_key_value_call_says_how_to_call_it():
    """``RotaryMultiheadAttention(x, x, x)`` without angles fails with an error that says what to pass."""
    import pytest
    import torch

    from cape_pipeline.models.attention.rotary import RotaryMultiheadAttention

    attn = RotaryMultiheadAttention(embed_dim=8, num_heads=2)
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"nn.MultiheadAttention.*attn\(x, angles\)"):
        attn(x, x, x)
