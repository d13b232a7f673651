"""Make tests/data/scgpt_other with scGPT 0.2.4's own TransformerModel (model.py loaded alone)."""

import json
import pathlib
import sys

import torch
from _scgpt_src import load_model_module

model_mod = load_model_module()

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
torch.manual_seed(1)
genes = [f"G{i}" for i in range(27)]
vocab = {g: i for i, g in enumerate(genes)}
vocab.update({"<pad>": 27, "<cls>": 28, "<eoc>": 29})
n_bins = 11
args = {
    "embsize": 24,
    "nheads": 2,
    "d_hid": 40,
    "nlayers": 3,
    "n_layers_cls": 3,
    "dropout": 0.2,
    "pad_token": "<pad>",
    "pad_value": n_bins,
    "mask_value": n_bins + 1,
    "n_bins": n_bins,
    "input_style": "binned",
    "input_emb_style": "category",
    "max_seq_len": 1200,
    "fast_transformer": False,
    "MVC": True,
    "explicit_zero_prob": True,
}
m = model_mod.TransformerModel(
    ntoken=len(vocab),
    d_model=24,
    nhead=2,
    d_hid=40,
    nlayers=3,
    nlayers_cls=3,
    n_cls=1,
    vocab=vocab,
    dropout=0.2,
    pad_token="<pad>",
    pad_value=n_bins,
    do_mvc=True,
    input_emb_style="category",
    n_input_bins=n_bins + 2,
    explicit_zero_prob=True,
    use_fast_transformer=False,
    pre_norm=False,
)
with torch.no_grad():  # move every weight off its init so that each mapping is exercised
    for p in m.parameters():
        p.add_(0.2 * torch.randn_like(p))
m.eval()
B, S = 4, 9
gene_ids = torch.randint(0, 27, (B, S))
gene_ids[:, 0] = vocab["<cls>"]
values = torch.randint(0, n_bins, (B, S)).float()
values[:, 0] = 0
mask = torch.zeros(B, S, dtype=torch.bool)
mask[0, 6:] = True
mask[2, 4:] = True
gene_ids[mask] = vocab["<pad>"]
values[mask] = n_bins
with torch.no_grad():
    enc = m._encode(gene_ids, values, mask)
    fwd = m(gene_ids, values, mask, MVC=True)
sd = {
    k.replace("self_attn.in_proj_weight", "self_attn.Wqkv.weight").replace(
        "self_attn.in_proj_bias", "self_attn.Wqkv.bias"
    ): v
    for k, v in m.state_dict().items()
    if not k.startswith("cls_decoder.")
}
sd["flag_encoder.weight"] = torch.randn(2, 24)
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
        "mlm_output": fwd["mlm_output"],
        "mlm_zero_probs": fwd["mlm_zero_probs"],
        "mvc_output": fwd["mvc_output"],
        "mvc_zero_probs": fwd["mvc_zero_probs"],
        "scgpt_version": "0.2.4",
        "note": "TransformerModel._encode and forward(MVC=True), eval mode, use_fast_transformer=False",
    },
    out / "reference.pt",
)
print(sorted(sd), enc[:, :, 0])
