"""Make tests/data/scgpt_other/prenorm: scGPT 0.2.4's FlashTransformerEncoderLayer with
norm_scheme="pre" (pre_norm=True). flash-attn is not installable here, so FlashMHA is replaced
by a plain-torch stand-in with flash-attn 1.x FlashMHA's parameters and math (Wqkv output
rearranged 'b s (three h d) -> b s three h d', softmax scale 1/sqrt(d), key_padding_mask True =
keep, padded query rows zero, then out_proj)."""

import json
import math
import pathlib
import sys
import types

import torch
from _scgpt_src import load_model_module
from torch import nn


class FlashMHA(nn.Module):
    def __init__(
        self,
        embed_dim,
        num_heads,
        bias=True,
        batch_first=True,
        attention_dropout=0.0,
        causal=False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.num_heads, self.head_dim, self.batch_first = (
            num_heads,
            embed_dim // num_heads,
            batch_first,
        )
        self.Wqkv = nn.Linear(embed_dim, 3 * embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, x, key_padding_mask=None, need_weights=False):
        b, s, _ = x.shape
        qkv = self.Wqkv(x).reshape(b, s, 3, self.num_heads, self.head_dim)  # (three h d)
        q, k, v = qkv.unbind(2)  # (b, s, h, d)
        score = torch.einsum("bshd,bthd->bhst", q, k) / math.sqrt(self.head_dim)
        if key_padding_mask is not None:
            score = score.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        ctx = torch.einsum("bhst,bthd->bshd", torch.softmax(score, -1), v)
        if key_padding_mask is not None:
            ctx = ctx * key_padding_mask[:, :, None, None]
        return self.out_proj(ctx.reshape(b, s, -1)), None


fa = types.ModuleType("flash_attn")
fa.__path__ = []
fa_fa = types.ModuleType("flash_attn.flash_attention")
fa_fa.FlashMHA = FlashMHA
sys.modules["flash_attn"], sys.modules["flash_attn.flash_attention"] = fa, fa_fa

model_mod = load_model_module()
assert model_mod.flash_attn_available

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
torch.manual_seed(2)
vocab = {f"g{i}": i for i in range(17)}
vocab.update({"<pad>": 17, "<cls>": 18, "<eoc>": 19})
args = {
    "embsize": 16,
    "nheads": 2,
    "d_hid": 24,
    "nlayers": 2,
    "dropout": 0.2,
    "pad_token": "<pad>",
    "pad_value": -2,
    "mask_value": -1,
    "n_bins": 51,
    "input_emb_style": "continuous",
    "fast_transformer": True,
    "pre_norm": True,
    "MVC": False,
}
m = model_mod.TransformerModel(
    ntoken=20,
    d_model=16,
    nhead=2,
    d_hid=24,
    nlayers=2,
    vocab=vocab,
    dropout=0.2,
    pad_token="<pad>",
    pad_value=-2,
    do_mvc=False,
    input_emb_style="continuous",
    use_fast_transformer=True,
    fast_transformer_backend="flash",
    pre_norm=True,
)
assert m.transformer_encoder.layers[0].norm_scheme == "pre"
with torch.no_grad():
    for p in m.parameters():
        p.add_(0.2 * torch.randn_like(p))
m.eval()
B, S = 3, 6
gene_ids = torch.randint(0, 17, (B, S))
gene_ids[:, 0] = vocab["<cls>"]
values = torch.rand(B, S) * 600
values[:, 0] = 0  # some above the 512 clamp
mask = torch.zeros(B, S, dtype=torch.bool)
mask[1, 4:] = True
gene_ids[mask] = vocab["<pad>"]
values[mask] = -2
with torch.no_grad():
    enc = m._encode(gene_ids, values, mask)
sd = {k: v for k, v in m.state_dict().items() if not k.startswith("cls_decoder.")}
torch.save(sd, out / "best_model.pt")
(out / "args.json").write_text(json.dumps(args, indent=2))
(out / "vocab.json").write_text(json.dumps(vocab))
torch.save(
    {
        "gene_ids": gene_ids,
        "values": values,
        "src_key_padding_mask": mask,
        "encoder_output": enc,
        "cell_embedding": enc[:, 0, :].clone(),
        "scgpt_version": "0.2.4",
        "note": "TransformerModel._encode, pre_norm=True, FlashMHA stand-in (see README)",
    },
    out / "reference.pt",
)
print(enc[:, :, 0])
