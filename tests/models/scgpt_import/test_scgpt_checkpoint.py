"""Loading released scGPT checkpoints and CAPE rotary on their attention.

Reference outputs were made by scGPT 0.2.4's own ``TransformerModel`` (see the READMEs in
``tests/data/scgpt_tiny`` and ``tests/data/scgpt_other``).
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from cape_pipeline.encodings import CapeEncodings
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError
from cape_pipeline.models.scgpt_import.checkpoint import (
    SCGPT_CHECKPOINT_PES,
    ScGPTCheckpointModel,
    from_scgpt,
)

DATA = Path(__file__).resolve().parents[2] / "data"
TINY = DATA / "scgpt_tiny"
OTHER = DATA / "scgpt_other"
PRENORM = OTHER / "prenorm"
CHECKPOINTS = [TINY, OTHER, PRENORM]
TOL = 1e-5


def _ref(path: Path) -> dict:
    return torch.load(path / "reference.pt", weights_only=True)


def _encode(model: ScGPTCheckpointModel, ref: dict) -> torch.Tensor:
    with torch.no_grad():
        return model.encode(ref["gene_ids"], ref["values"], ref["src_key_padding_mask"])


def _genes(model: ScGPTCheckpointModel) -> list[str]:
    return [t for t in model.vocab if not (t.startswith("<") and t.endswith(">"))]


def _random_angles(model: ScGPTCheckpointModel, seed: int = 0, genes: list[str] | None = None) -> pd.DataFrame:
    genes = _genes(model) if genes is None else genes
    rng = np.random.default_rng(seed)
    vals = rng.uniform(-math.pi, math.pi, (len(genes), model.d_model // 2))
    return pd.DataFrame(vals, index=genes)


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    for f in dst.iterdir():
        f.chmod(0o644)
    return dst


# ---------------------------------------------------------------------- scGPT's own outputs
@pytest.mark.parametrize("path", CHECKPOINTS, ids=lambda p: p.name)
def test_encode_matches_scgpt_reference(path: Path) -> None:
    model = from_scgpt(path)
    ref = _ref(path)
    out = _encode(model, ref)
    keep = ~ref["src_key_padding_mask"]
    assert out.shape == ref["encoder_output"].shape
    assert (out - ref["encoder_output"])[keep].abs().max().item() < TOL
    assert not model.training


@pytest.mark.parametrize("path", CHECKPOINTS, ids=lambda p: p.name)
def test_cell_embedding_is_cls_row_and_matches_reference(path: Path) -> None:
    model = from_scgpt(path)
    ref = _ref(path)
    with torch.no_grad():
        cell = model.cell_embedding(ref["gene_ids"], ref["values"], ref["src_key_padding_mask"])
    assert torch.equal(cell, _encode(model, ref)[:, 0, :])
    assert (cell - ref["cell_embedding"]).abs().max().item() < TOL


def test_other_sizes_config_and_heads_match_reference() -> None:
    """3 layers, 2 heads, width 24, vocabulary 30, category values, explicit-zero-prob heads."""
    model = from_scgpt(OTHER)
    assert (model.nlayers, model.nhead, model.d_model, len(model.vocab)) == (3, 2, 24, 30)
    assert model.input_emb_style == "category"
    ref = _ref(OTHER)
    with torch.no_grad():
        out = model(ref["gene_ids"], ref["values"], ref["src_key_padding_mask"])
    keep = ~ref["src_key_padding_mask"]
    for key in ("mlm_output", "mlm_zero_probs", "mvc_output", "mvc_zero_probs"):
        assert (out[key] - ref[key])[keep].abs().max().item() < TOL, key


def test_prenorm_checkpoint_uses_pre_norm_layers() -> None:
    model = from_scgpt(PRENORM)
    assert model.norm_scheme == "pre" and model.mvc_decoder is None
    assert model.load_report == {"ignored": [], "missing": []}


def test_default_mask_is_pad_token() -> None:
    model = from_scgpt(OTHER)  # pad positions of this reference carry the <pad> id
    ref = _ref(OTHER)
    with torch.no_grad():
        a = model.encode(ref["gene_ids"], ref["values"])
    assert torch.equal(a, _encode(model, ref))


def test_torch_in_proj_names_load_like_wqkv(tmp_path: Path) -> None:
    """A checkpoint saved with torch's TransformerEncoderLayer names (in_proj_*) loads alike."""
    d = _copy(TINY, tmp_path)
    sd = torch.load(d / "best_model.pt", weights_only=True)
    sd = {k.replace("Wqkv.weight", "in_proj_weight").replace("Wqkv.bias", "in_proj_bias"): v for k, v in sd.items()}
    torch.save(sd, d / "best_model.pt")
    ref = _ref(TINY)
    keep = ~ref["src_key_padding_mask"]
    assert (_encode(from_scgpt(d), ref) - ref["encoder_output"])[keep].abs().max().item() < TOL


# ---------------------------------------------------------------------- load report
def test_ignored_key_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="cape_pipeline.models.scgpt_import.checkpoint"):
        model = from_scgpt(TINY)
    assert model.load_report == {"ignored": ["flag_encoder.weight"], "missing": []}
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 1 and "flag_encoder.weight" in lines[0] and "\n" not in lines[0]


def test_partial_head_is_dropped_and_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = _copy(TINY, tmp_path)
    sd = torch.load(d / "best_model.pt", weights_only=True)
    del sd["decoder.fc.4.weight"]
    torch.save(sd, d / "best_model.pt")
    with caplog.at_level(logging.WARNING, logger="cape_pipeline.models.scgpt_import.checkpoint"):
        model = from_scgpt(d)
    assert model.decoder is None and model.mvc_decoder is not None
    assert model.load_report["missing"] == ["decoder.fc.4.weight"]
    assert "decoder.fc.0.weight" in model.load_report["ignored"]
    assert any("decoder.fc.4.weight" in r.getMessage() for r in caplog.records)


def test_vocab_and_args_are_kept() -> None:
    model = from_scgpt(TINY)
    assert model.vocab["<cls>"] == 48 and model.vocab["<pad>"] == model.pad_id == 47
    assert model.args["embsize"] == 32 and model.norm_scheme == "post"


# ---------------------------------------------------------------------- CAPE rotary
@pytest.mark.parametrize("path", CHECKPOINTS, ids=lambda p: p.name)
def test_zero_angles_equal_pe_none_exactly(path: Path) -> None:
    base = from_scgpt(path)
    zeros = pd.DataFrame(0.0, index=_genes(base), columns=range(base.d_model // 2))
    ref = _ref(path)
    for pe in ("cape", "cape-input"):
        model = from_scgpt(path, pe=pe, angles=zeros)
        assert torch.equal(_encode(model, ref), _encode(base, ref)), pe


@pytest.mark.parametrize("path", CHECKPOINTS, ids=lambda p: p.name)
def test_nonzero_angles_change_outputs(path: Path) -> None:
    base = from_scgpt(path)
    ref = _ref(path)
    keep = ~ref["src_key_padding_mask"]
    for pe in ("cape", "cape-input"):
        out = _encode(from_scgpt(path, pe=pe, angles=_random_angles(base)), ref)
        assert torch.isfinite(out).all()
        assert (out - _encode(base, ref))[keep].abs().max().item() > 1e-3, pe


def test_rotary_acts_on_q_and_k_only_per_head() -> None:
    """Layer-0 attention equals a from-scratch attention that rotates q, k (2×2 blocks, head h
    taking angles [h·Dh/2, (h+1)·Dh/2)) and leaves v untouched (paper 000 Eq. 24)."""
    base = from_scgpt(TINY)
    model = from_scgpt(TINY, pe="cape", angles=_random_angles(base, seed=3))
    ref = _ref(TINY)
    ids, pad = ref["gene_ids"], ref["src_key_padding_mask"]
    x = torch.randn(*ids.shape, model.d_model, generator=torch.Generator().manual_seed(0))
    attn = model.transformer_encoder.layers[0].self_attn
    h, dh = model.nhead, model.d_model // model.nhead
    ang = model.angle_table[ids]  # (B, S, D/2)
    rot = torch.polar(torch.ones_like(ang), ang).reshape(*ids.shape, h, dh // 2).movedim(2, 1)
    with torch.no_grad():
        got = attn(x, pad, rot)
        w, bias = attn.Wqkv.weight.double(), attn.Wqkv.bias.double()
        qkv = x.double() @ w.T + bias
        d = model.d_model
        q, k, v = qkv[..., :d], qkv[..., d : 2 * d], qkv[..., 2 * d :]

        def rotate(t: torch.Tensor) -> torch.Tensor:
            a = ang.double()
            c, s = torch.cos(a), torch.sin(a)
            out = t.clone()
            out[..., 0::2] = t[..., 0::2] * c - t[..., 1::2] * s
            out[..., 1::2] = t[..., 0::2] * s + t[..., 1::2] * c
            return out

        q, k = rotate(q), rotate(k)
        heads = []
        for i in range(h):
            sl = slice(i * dh, (i + 1) * dh)
            score = q[..., sl] @ k[..., sl].transpose(1, 2) / math.sqrt(dh)
            score = score.masked_fill(pad[:, None, :], float("-inf"))
            heads.append(torch.softmax(score, -1) @ v[..., sl])
        o = torch.cat(heads, -1).masked_fill(pad[..., None], 0.0)
        want = o @ attn.out_proj.weight.double().T + attn.out_proj.bias.double()
    assert (got.double() - want).abs().max().item() < 1e-5


def test_angles_aligned_through_vocab(caplog: pytest.LogCaptureFixture) -> None:
    base = from_scgpt(TINY)
    genes = ["GENE3", "GENE10", "NOT_IN_VOCAB", "<cls>"]
    angles = _random_angles(base, seed=1, genes=genes)
    with caplog.at_level(logging.INFO, logger="cape_pipeline.models.scgpt_import.checkpoint"):
        model = from_scgpt(TINY, pe="cape", angles=angles)
    assert model.n_angled == 2
    assert any("2 of 47" in r.getMessage() for r in caplog.records)
    table = model.angle_table
    assert torch.allclose(table[model.vocab["GENE3"]], torch.tensor(angles.loc["GENE3"].to_numpy(), dtype=torch.float32))
    assert torch.allclose(table[model.vocab["GENE10"]], torch.tensor(angles.loc["GENE10"].to_numpy(), dtype=torch.float32))
    others = [i for t, i in model.vocab.items() if t not in ("GENE3", "GENE10")]
    assert torch.equal(table[others], torch.zeros(len(others), model.d_model // 2))


def test_cape_encodings_input_equals_dataframe() -> None:
    base = from_scgpt(TINY)
    df = _random_angles(base, seed=2)
    m, d = df.shape
    enc = CapeEncodings(
        feature_names=np.asarray(df.index, dtype=object),
        angles=df.to_numpy(),
        poincare=np.zeros((m, d)),
        hyperboloid=np.zeros((m, d + 1)),
        pagerank=np.full(m, 1.0 / m),
    )
    ref = _ref(TINY)
    a = _encode(from_scgpt(TINY, pe="cape", angles=enc), ref)
    b = _encode(from_scgpt(TINY, pe="cape", angles=df), ref)
    assert torch.equal(a, b)


# ---------------------------------------------------------------------- errors
def test_angles_wrong_columns() -> None:
    bad = pd.DataFrame(0.0, index=["GENE1"], columns=range(15))
    with pytest.raises(CapeDataError, match="D/2 = 16"):
        from_scgpt(TINY, pe="cape", angles=bad)


def test_angles_required_for_cape() -> None:
    with pytest.raises(CapeDataError, match="needs angles"):
        from_scgpt(TINY, pe="cape")


def test_unsupported_pe_lists_supported() -> None:
    with pytest.raises(CapeConfigError, match="supported") as e:
        from_scgpt(TINY, pe="trainable-relative")
    assert all(p in str(e.value) for p in SCGPT_CHECKPOINT_PES)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(CapeFileError, match="not found"):
        from_scgpt(tmp_path / "nope")


@pytest.mark.parametrize("name", ["args.json", "vocab.json", "best_model.pt"])
def test_missing_file(tmp_path: Path, name: str) -> None:
    d = _copy(TINY, tmp_path)
    (d / name).unlink()
    with pytest.raises(CapeFileError, match=name):
        from_scgpt(d)


def test_args_not_json(tmp_path: Path) -> None:
    d = _copy(TINY, tmp_path)
    (d / "args.json").write_text("{embsize: 32,")
    with pytest.raises(CapeFileError, match=r"args\.json: not valid JSON"):
        from_scgpt(d)


def test_missing_state_dict_key_is_named(tmp_path: Path) -> None:
    d = _copy(TINY, tmp_path)
    sd = torch.load(d / "best_model.pt", weights_only=True)
    del sd["transformer_encoder.layers.1.norm2.bias"]
    torch.save(sd, d / "best_model.pt")
    with pytest.raises(CapeFileError, match=r"transformer_encoder\.layers\.1\.norm2\.bias") as e:
        from_scgpt(d)
    assert "\n" not in str(e.value)


def test_vocab_size_mismatch_names_vocab_json(tmp_path: Path) -> None:
    d = _copy(TINY, tmp_path)
    vocab = json.loads((d / "vocab.json").read_text())
    vocab["EXTRA"] = len(vocab)
    (d / "vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(CapeFileError, match=r"vocab\.json: 51 tokens.*50 rows") as e:
        from_scgpt(d)
    assert "\n" not in str(e.value)


def test_wrong_shape_is_named(tmp_path: Path) -> None:
    d = _copy(TINY, tmp_path)
    args = json.loads((d / "args.json").read_text())
    args["d_hid"] = 48
    (d / "args.json").write_text(json.dumps(args))
    with pytest.raises(CapeFileError, match=r"transformer_encoder\.layers\.0\.linear1\.weight"):
        from_scgpt(d)
