"""Load a released scGPT checkpoint without the ``scgpt`` package, with CAPE rotary attention.

The ``scgpt`` package (0.2.x) cannot be imported with current torch (torchtext), so
:func:`from_scgpt` rebuilds the network from the checkpoint directory and reproduces
``TransformerModel._encode`` of scGPT (Cui et al., Nat. Methods 2024; ``bowang-lab/scGPT``,
``scgpt/model/model.py``) in eval mode: ``h = LayerNorm(Embedding(gene)) + value_encoder(x)``
(``continuous``: ``LayerNorm(Linear(ReLU(Linear(min(x, 512)))))``; ``category``:
``LayerNorm(Embedding(x))``; ``scaling``: ``gene * x``), then ``nlayers`` ReLU layers, post-norm
``norm2(y + ff(y)), y = norm1(x + attn(x))`` (or scGPT's pre-norm variant), whose attention takes
q, k, v from one stacked ``Wqkv`` laid out ``(three h d)`` (flash-attn ``FlashMHA``).

With ``pe="cape"`` the q and k of every layer are rotated per head by the CAPE angles of each
token's gene after the ``Wqkv`` split (paper 000 Eq. 24; values untouched) with
:func:`cape_pipeline.encodings.rope.apply_rotary`, head h taking angles ``[h·Dh/2, (h+1)·Dh/2)``
as in :class:`cape_pipeline.models.attention.rotary.RotaryMultiheadAttention`.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cape_pipeline.encodings.rope import apply_rotary
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError
from cape_pipeline.models.pe import PE_NAMES, resolve_pe

__all__ = ["ScGPTCheckpointModel", "from_scgpt", "SCGPT_CHECKPOINT_PES"]

logger = logging.getLogger(__name__)

SCGPT_CHECKPOINT_PES: tuple[str, ...] = ("none", "cape", "cape-input")
"""PEs a pretrained scGPT checkpoint supports without new trainable weights.

``none``: scGPT as released (its gene tokens are its only feature identity);
``cape``: rotary q/k in every layer (Eq. 24); ``cape-input``: the summed input embedding is
rotated once, ``R(φ) h`` (Eq. F.108). The other names of :data:`PE_NAMES` add parameters that a
released checkpoint does not have and are refused with :class:`CapeConfigError`.
"""

_MAX_VALUE = 512  # ContinuousValueEncoder's clamp


class _EmbedNorm(nn.Module):
    """scGPT ``GeneEncoder`` / ``CategoryValueEncoder``: ``(B, S)`` → ``LayerNorm(Embedding(long))``."""

    def __init__(self, n: int, d_model: int, padding_idx: int | None) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n, d_model, padding_idx=padding_idx)
        self.enc_norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, S)`` → ``(B, S, D)`` float."""
        return self.enc_norm(self.embedding(x.long()))


class _ContinuousValueEncoder(nn.Module):
    """scGPT ``ContinuousValueEncoder``: ``(B, S)`` float → ``(B, S, D)``, values clamped at 512."""

    def __init__(self, d_model: int, max_value: float = _MAX_VALUE) -> None:
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(1, d_model), nn.Linear(d_model, d_model)
        self.norm, self.max_value = nn.LayerNorm(d_model), max_value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, S)`` → ``(B, S, D)``."""
        x = torch.clamp(x.unsqueeze(-1).to(self.linear1.weight.dtype), max=self.max_value)
        return self.norm(self.linear2(F.relu(self.linear1(x))))


class _WqkvAttention(nn.Module):
    """flash-attn ``FlashMHA`` math: stacked ``Wqkv`` laid out ``(three h d)``; padded keys are
    excluded and padded query rows get a zero output before ``out_proj`` (FlashMHA's unpad/pad)."""

    def __init__(self, d_model: int, nhead: int) -> None:
        super().__init__()
        self.nhead, self.head_dim = nhead, d_model // nhead
        self.Wqkv, self.out_proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, pad: torch.Tensor | None, rot: torch.Tensor | None) -> torch.Tensor:
        """``x`` ``(B, S, D)``; ``pad`` ``(B, S)`` bool (True = pad) or None; ``rot``
        ``(B, H, S, Dh/2)`` complex rotations or None → ``(B, S, D)``."""
        b, s, d = x.shape
        qkv = self.Wqkv(x).view(b, s, 3, self.nhead, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv  # (B, H, S, Dh) each
        if rot is not None:
            q, k = apply_rotary(qkv[:2], rot)  # Eq. 24 on q and k, per head
        mask = None if pad is None else torch.zeros(b, 1, 1, s, dtype=q.dtype, device=q.device).masked_fill(
            pad.view(b, 1, 1, s), float("-inf"))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, S, Dh)
        if pad is not None:
            out = out.masked_fill(pad.view(b, 1, s, 1), 0.0)
        return self.out_proj(out.transpose(1, 2).reshape(b, s, d))


class _Layer(nn.Module):
    """scGPT ``FlashTransformerEncoderLayer`` (ReLU, LayerNorm eps 1e-5), post- or pre-norm."""

    def __init__(self, d_model: int, nhead: int, d_hid: int, norm_scheme: str) -> None:
        super().__init__()
        self.self_attn = _WqkvAttention(d_model, nhead)
        self.linear1, self.linear2 = nn.Linear(d_model, d_hid), nn.Linear(d_hid, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.norm_scheme = norm_scheme

    def forward(self, x: torch.Tensor, pad: torch.Tensor | None, rot: torch.Tensor | None) -> torch.Tensor:
        """``(B, S, D)`` → ``(B, S, D)``."""
        if self.norm_scheme == "pre":  # scGPT's pre-norm: the residual starts from the normed x
            x = self.norm1(x)
            x = self.norm2(x + self.self_attn(x, pad, rot))
            return x + self.linear2(F.relu(self.linear1(x)))
        x = self.norm1(x + self.self_attn(x, pad, rot))
        return self.norm2(x + self.linear2(F.relu(self.linear1(x))))


class _ExprDecoder(nn.Module):
    """scGPT ``ExprDecoder``: ``(B, S, D)`` → ``{"pred": (B, S)}`` (+ ``zero_probs``)."""

    def __init__(self, d_model: int, explicit_zero_prob: bool) -> None:
        super().__init__()

        def mlp() -> nn.Sequential:
            lin, act = nn.Linear, nn.LeakyReLU
            return nn.Sequential(lin(d_model, d_model), act(), lin(d_model, d_model), act(), lin(d_model, 1))

        self.fc = mlp()
        self.zero_logit = mlp() if explicit_zero_prob else None

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``(B, S, D)`` → dict of ``(B, S)`` tensors."""
        out = {"pred": self.fc(x).squeeze(-1)}
        if self.zero_logit is not None:
            out["zero_probs"] = torch.sigmoid(self.zero_logit(x).squeeze(-1))
        return out


class _MVCDecoder(nn.Module):
    """scGPT ``MVCDecoder``, "inner product" style: ``W(σ(gene2query(g))) · cell``."""

    def __init__(self, d_model: int, explicit_zero_prob: bool) -> None:
        super().__init__()
        self.gene2query, self.W = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model, bias=False)
        self.W_zero_logit = nn.Linear(d_model, d_model) if explicit_zero_prob else None

    def forward(self, cell_emb: torch.Tensor, gene_embs: torch.Tensor) -> dict[str, torch.Tensor]:
        """``cell_emb`` ``(B, D)``, ``gene_embs`` ``(B, S, D)`` → dict of ``(B, S)`` tensors."""
        query, c = torch.sigmoid(self.gene2query(gene_embs)), cell_emb.unsqueeze(2)
        out = {"pred": torch.bmm(self.W(query), c).squeeze(2)}
        if self.W_zero_logit is not None:
            out["zero_probs"] = torch.sigmoid(torch.bmm(self.W_zero_logit(query), c).squeeze(2))
        return out


class ScGPTCheckpointModel(nn.Module):
    """A released scGPT checkpoint rebuilt in plain torch, optionally with CAPE rotary attention.

    Built by :func:`from_scgpt`; put in eval mode (dropout off, as in scGPT's inference).

    Attributes
    ----------
    args, vocab
        The parsed ``args.json`` (dict) and ``vocab.json`` (``{token: id}``).
    pe, angle_table, n_angled
        ``"none"``/``"cape"``/``"cape-input"``; the ``(V, D/2)`` float32 angles
        per vocabulary token (0 where none; ``None`` without a CAPE pe); how many genes got one.
    load_report
        ``{"ignored": [...], "missing": [...]}``: checkpoint keys the model does not use and
        optional model keys the checkpoint did not fill (each also logged as a warning).
    pad_id, pad_value, input_emb_style, norm_scheme, d_model, nhead, nlayers
        Configuration read from ``args.json`` / the state_dict.
    """

    def __init__(
        self, *, ntoken: int, d_model: int, nhead: int, d_hid: int, nlayers: int,
        input_emb_style: str = "continuous", n_input_bins: int | None = None, pad_id: int = 0,
        pad_value: float = -2, norm_scheme: str = "post", with_decoder: bool = False,
        with_mvc: bool = False, explicit_zero_prob: bool = False,
    ) -> None:
        super().__init__()
        self.d_model, self.nhead, self.nlayers = d_model, nhead, nlayers
        self.input_emb_style, self.norm_scheme = input_emb_style, norm_scheme
        self.pad_id, self.pad_value = pad_id, pad_value
        self.encoder = _EmbedNorm(ntoken, d_model, pad_id)
        if input_emb_style == "continuous":
            self.value_encoder: nn.Module = _ContinuousValueEncoder(d_model)
        elif input_emb_style == "category":
            nb, pv = int(n_input_bins or 0), float(pad_value)
            pidx = int(pv) if pv.is_integer() and -nb <= pv < nb else None
            self.value_encoder = _EmbedNorm(nb, d_model, pidx)
        else:  # scaling: the values multiply the gene embedding (see encode)
            self.value_encoder = nn.Identity()
        self.transformer_encoder = nn.Module()  # keys: transformer_encoder.layers.{i}.*
        self.transformer_encoder.layers = nn.ModuleList(_Layer(d_model, nhead, d_hid, norm_scheme) for _ in range(nlayers))
        self.decoder = _ExprDecoder(d_model, explicit_zero_prob) if with_decoder else None
        self.mvc_decoder = _MVCDecoder(d_model, explicit_zero_prob) if with_mvc else None
        self.pe, self.n_angled = "none", 0
        self.register_buffer("angle_table", None, persistent=False)
        self.args, self.vocab = dict[str, Any](), dict[str, int]()
        self.load_report: dict[str, list[str]] = {"ignored": [], "missing": []}

    # ------------------------------------------------------------------ forward pieces
    def _inputs(
        self, gene_ids: torch.Tensor, values: torch.Tensor, src_key_padding_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        dev = self.encoder.embedding.weight.device
        gene_ids, values = torch.as_tensor(gene_ids, device=dev).long(), torch.as_tensor(values, device=dev)
        if gene_ids.ndim != 2 or values.shape != gene_ids.shape:
            raise CapeDataError(f"gene_ids and values: expected equal shapes (B, S), got {tuple(gene_ids.shape)} and {tuple(values.shape)}")
        ntoken = self.encoder.embedding.num_embeddings
        if gene_ids.numel() and (int(gene_ids.min()) < 0 or int(gene_ids.max()) >= ntoken):
            raise CapeDataError(f"gene_ids: ids must lie in [0, {ntoken}) (vocab.json size)")
        m = gene_ids == self.pad_id if src_key_padding_mask is None else src_key_padding_mask
        pad = torch.as_tensor(m, device=dev).to(torch.bool)
        if pad.shape != gene_ids.shape:
            raise CapeDataError(f"src_key_padding_mask: expected shape {tuple(gene_ids.shape)}, got {tuple(pad.shape)}")
        return gene_ids, values, (pad if bool(pad.any()) else None)

    def gene_embeddings(self, gene_ids: torch.Tensor) -> torch.Tensor:
        """Gene-token embeddings of scGPT (``GeneEncoder``), ``(B, S)`` long → ``(B, S, D)`` (``cur_gene_token_embs``)."""
        return self.encoder(torch.as_tensor(gene_ids, device=self.encoder.embedding.weight.device).long())

    def encode(
        self, gene_ids: torch.Tensor, values: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Transformer output, scGPT's ``TransformerModel._encode`` (plus the PE, if any).

        Parameters
        ----------
        gene_ids
            ``(B, S)`` integer vocabulary ids, ``<cls>`` first by scGPT's convention.
        values
            ``(B, S)`` float expression values (bin indices for ``category``).
        src_key_padding_mask
            ``(B, S)`` bool, True = padding; ``None`` takes ``gene_ids == vocab[pad_token]``.

        Returns
        -------
        torch.Tensor
            ``(B, S, D)`` float32. Rows of padded positions are set to 0 (scGPT leaves them
            undefined; compare non-pad rows only).

        Raises
        ------
        CapeDataError
            On mismatched shapes or ids outside the vocabulary.
        """
        gene_ids, values, pad = self._inputs(gene_ids, values, src_key_padding_mask)
        g = self.encoder(gene_ids)
        v = self.value_encoder(values)
        h = g * v.unsqueeze(-1) if self.input_emb_style == "scaling" else g + v
        rot = None
        if self.angle_table is not None:
            ang = self.angle_table[gene_ids]  # (B, S, D/2)
            if self.pe == "cape-input":
                h = apply_rotary(h, ang)  # Eq. F.108, once on the input
            else:
                b, s, _ = ang.shape
                ang = ang.reshape(b, s, self.nhead, -1).movedim(2, 1)  # (B, H, S, Dh/2)
                rot = torch.polar(torch.ones_like(ang), ang)  # e^{jφ}, shared by all layers
        for layer in self.transformer_encoder.layers:
            h = layer(h, pad, rot)
        if pad is not None:
            h = h.masked_fill(pad.unsqueeze(-1), 0.0)
        return h

    def cell_embedding(
        self, gene_ids: torch.Tensor, values: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The cell embedding of scGPT (``cell_emb_style="cls"``): the position-0 (``<cls>``) row of
        :meth:`encode`, ``(B, D)`` float32. Same arguments and errors as :meth:`encode`."""
        return self.encode(gene_ids, values, src_key_padding_mask)[:, 0, :]

    def forward(
        self, gene_ids: torch.Tensor, values: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """Encoder output and the pretrained heads present in the checkpoint.

        Returns
        -------
        dict
            ``"encoder_output"`` ``(B, S, D)``, ``"cell_emb"`` ``(B, D)``, and where the
            checkpoint has them ``"mlm_output"`` ``(B, S)`` (``ExprDecoder``) and
            ``"mvc_output"`` ``(B, S)`` (``MVCDecoder`` on the gene-token embeddings), plus
            ``*_zero_probs`` for ``explicit_zero_prob`` checkpoints.
        """
        h = self.encode(gene_ids, values, src_key_padding_mask)
        out = {"encoder_output": h, "cell_emb": (cell := h[:, 0, :])}
        if self.decoder is not None:
            out.update({f"mlm_{k}".replace("_pred", "_output"): t for k, t in self.decoder(h).items()})
        if self.mvc_decoder is not None:
            m = self.mvc_decoder(cell, self.gene_embeddings(gene_ids))
            out.update({f"mvc_{k}".replace("_pred", "_output"): t for k, t in m.items()})
        return out


# ---------------------------------------------------------------------- loading
def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise CapeFileError(f"{path}: file not found (an scGPT checkpoint directory needs it)")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CapeFileError(f"{path}: not valid JSON ({e})") from None


def _angle_table(angles: Any, vocab: dict[str, int], ntoken: int, half: int, special: set[str], pe: str) -> tuple[torch.Tensor, int]:
    """Align per-gene angles to the vocabulary: ``(V, D/2)`` float32 and the number of genes set."""
    import pandas as pd

    from cape_pipeline.encodings.export import CapeEncodings

    if isinstance(angles, CapeEncodings):
        names = [str(n) for n in np.asarray(angles.feature_names)]
        arr = np.asarray(angles.angles, dtype=np.float64)
    elif isinstance(angles, pd.DataFrame):
        names = [str(n) for n in angles.index]
        try:
            arr = angles.to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise CapeDataError(f"pe={pe!r} angles: the DataFrame has non-numeric columns") from None
    else:
        raise CapeDataError(f"pe={pe!r} angles: expected a pandas DataFrame indexed by gene name or a CapeEncodings, got {type(angles).__name__}")
    if arr.ndim != 2 or arr.shape[1] != half:
        raise CapeDataError(f"pe={pe!r} angles: {arr.shape[1] if arr.ndim == 2 else arr.shape} columns, but the checkpoint's embsize D={2 * half} needs D/2 = {half}")
    if not np.isfinite(arr).all():
        raise CapeDataError(f"pe={pe!r} angles: contain NaN or inf")
    if len(set(names)) != len(names):
        raise CapeDataError(f"pe={pe!r} angles: duplicate gene names in the index")
    table = np.zeros((ntoken, half), dtype=np.float32)
    row_of = {n: i for i, n in enumerate(names)}
    hits = [(idx, row_of[tok]) for tok, idx in vocab.items() if tok not in special and tok in row_of]
    for idx, r in hits:
        table[idx] = arr[r]
    return torch.from_numpy(table), len(hits)


def from_scgpt(
    path: str | Path, *, pe: str = "none", angles: Any = None, device: str | torch.device = "cpu"
) -> ScGPTCheckpointModel:
    """Load a released scGPT checkpoint directory into a :class:`ScGPTCheckpointModel`.

    The directory holds ``args.json`` (``embsize``, ``nheads``, ``d_hid``, ``nlayers``,
    ``input_emb_style``, ``n_bins``, ``pad_token``, ``pad_value``, optional ``pre_norm``),
    ``vocab.json`` (``{token: id}``) and ``best_model.pt`` (a bare state_dict; attention weights
    ``transformer_encoder.layers.{i}.self_attn.Wqkv.{weight,bias}`` stacked ``(three h d)``, or
    torch's ``in_proj_weight`` / ``in_proj_bias``, same layout). Source: scGPT (Cui et al.
    2024), ``scgpt/model/model.py``; the rotary is paper 000 Eq. 24.

    Parameters
    ----------
    path
        The checkpoint directory.
    pe
        One of :data:`SCGPT_CHECKPOINT_PES`: ``"none"`` (scGPT as released; ``"default"``, its
        earlier name, warns), ``"cape"`` (rotary q/k per head in every layer) or ``"cape-input"``
        (rotate the input embedding once).
    angles
        For ``cape``/``cape-input``: a pandas DataFrame indexed by gene name with D/2 numeric
        columns (radians), or a :class:`cape_pipeline.encodings.CapeEncodings`
        (``feature_names``, ``angles``). Aligned to ``vocab.json`` by token name; vocabulary
        tokens without an angle (``<pad>``, ``<cls>``, other special tokens, genes absent from
        ``angles``) get angle 0. The number of genes that got angles is logged (INFO).
    device
        Where to put the model.

    Returns
    -------
    ScGPTCheckpointModel
        In eval mode, float32, on ``device``.

    Raises
    ------
    CapeFileError
        Missing directory or file; ``args.json``/``vocab.json`` not valid JSON or missing a
        required key (``nheads``, the pad token); an unreadable ``best_model.pt``; a state_dict
        missing a required key or with a wrongly shaped tensor (the key is named); a vocabulary
        whose size differs from ``encoder.embedding.weight`` (both sizes named).
    CapeDataError
        ``angles`` missing, of the wrong type, with a column count other than D/2, NaN/inf or
        duplicate gene names.
    CapeConfigError
        ``pe`` not supported for a pretrained checkpoint, or an unknown ``input_emb_style``.
    """
    pe = resolve_pe(pe)
    if pe not in SCGPT_CHECKPOINT_PES:
        known = "a PE name" if pe not in PE_NAMES else "a PE that needs new trainable weights"
        raise CapeConfigError(f"pe={pe!r} ({known}) is not supported on a pretrained scGPT checkpoint; supported: {list(SCGPT_CHECKPOINT_PES)}")
    root = Path(path)
    if not root.is_dir():
        raise CapeFileError(f"{root}: scGPT checkpoint directory not found")
    args_path, vocab_path, model_path = root / "args.json", root / "vocab.json", root / "best_model.pt"
    if not isinstance(args := _read_json(args_path), dict):
        raise CapeFileError(f"{args_path}: expected a JSON object, got {type(args).__name__}")
    if not isinstance(vocab := _read_json(vocab_path), dict) or not all(isinstance(v, int) for v in vocab.values()):
        raise CapeFileError(f"{vocab_path}: expected a JSON object {{token: integer id}}")
    if not model_path.is_file():
        raise CapeFileError(f"{model_path}: file not found (an scGPT checkpoint directory needs it)")
    try:
        sd = torch.load(model_path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling/zip error means an unreadable file
        raise CapeFileError(f"{model_path}: cannot be read as a torch state_dict ({type(e).__name__}: {e})") from None
    sd = sd["model_state_dict"] if isinstance(sd, dict) and isinstance(sd.get("model_state_dict"), dict) else sd
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise CapeFileError(f"{model_path}: expected a bare state_dict {{name: tensor}}")
    # torch's TransformerEncoderLayer names (use_fast_transformer=False): same (three h d) layout
    sd = {re.sub(r"self_attn\.in_proj_(weight|bias)", r"self_attn.Wqkv.\1", k.removeprefix("module.")): v
          for k, v in sd.items()}

    emb_key = "encoder.embedding.weight"
    if emb_key not in sd:
        raise CapeFileError(f"{model_path}: state_dict has no key {emb_key!r} (required)")
    ntoken, d_model = (int(x) for x in sd[emb_key].shape)
    if len(vocab) != ntoken:
        raise CapeFileError(f"{vocab_path}: {len(vocab)} tokens, but {emb_key} in {model_path.name} has {ntoken} rows")
    if sorted(vocab.values()) != list(range(ntoken)):
        raise CapeFileError(f"{vocab_path}: token ids must be 0..{ntoken - 1}, each once")
    if "embsize" in args and int(args["embsize"]) != d_model:
        raise CapeFileError(f"{args_path}: embsize={args['embsize']}, but {emb_key} has width {d_model}")
    if "nheads" not in args:
        raise CapeFileError(f"{args_path}: missing required key 'nheads'")
    if (nhead := int(args["nheads"])) <= 0 or d_model % nhead:
        raise CapeFileError(f"{args_path}: nheads={nhead} does not divide embsize={d_model}")
    found = {int(m.group(1)) for k in sd if (m := re.match(r"transformer_encoder\.layers\.(\d+)\.", k))}
    nlayers = int(args.get("nlayers", max(found, default=-1) + 1))
    l1 = "transformer_encoder.layers.0.linear1.weight"
    d_hid = int(args.get("d_hid", sd[l1].shape[0] if l1 in sd else d_model))
    style = str(args.get("input_emb_style", "continuous"))
    if style not in ("continuous", "category", "scaling"):
        raise CapeConfigError(f"{args_path}: input_emb_style={style!r}; expected continuous, category or scaling")
    n_input_bins = None
    if style == "category":
        vk = "value_encoder.embedding.weight"
        if vk not in sd:
            raise CapeFileError(f"{model_path}: state_dict has no key {vk!r} (required for input_emb_style='category')")
        n_input_bins = int(sd[vk].shape[0])
    if (pad_token := str(args.get("pad_token", "<pad>"))) not in vocab:
        raise CapeFileError(f"{vocab_path}: has no pad token {pad_token!r} (args.json pad_token)")
    pre = bool(args.get("pre_norm", False)) or args.get("norm_scheme") == "pre"
    if any(k.startswith(("dsbn.", "bn.", "batch_encoder.")) for k in sd):
        logger.warning("%s: batch-label / domain-specific batchnorm weights are not used; encode() skips them", args_path)
    explicit_zero = any(k.startswith(("decoder.zero_logit.", "mvc_decoder.W_zero_logit.")) for k in sd)
    # a use_batch_labels decoder (input 2D) is not rebuilt: its keys are reported as ignored
    with_decoder = any(k.startswith("decoder.fc.") for k in sd) and (
        sd.get("decoder.fc.0.weight", torch.empty(0, 0)).shape[-1] == d_model)
    with_mvc = "mvc_decoder.gene2query.weight" in sd and sd.get(
        "mvc_decoder.W.weight", torch.empty(0)).shape == (d_model, d_model)

    model = ScGPTCheckpointModel(
        ntoken=ntoken, d_model=d_model, nhead=nhead, d_hid=d_hid, nlayers=nlayers, input_emb_style=style,
        n_input_bins=n_input_bins, pad_id=int(vocab[pad_token]), pad_value=args.get("pad_value", -2),
        norm_scheme="pre" if pre else "post", with_decoder=with_decoder, with_mvc=with_mvc,
        explicit_zero_prob=explicit_zero,
    )
    expected = model.state_dict()
    optional = ("decoder.", "mvc_decoder.")
    missing_opt: list[str] = []
    for key, ref in expected.items():
        if key not in sd:
            if key.startswith(optional):
                missing_opt.append(key)
                continue
            raise CapeFileError(f"{model_path}: state_dict has no key {key!r} (required)")
        if tuple(sd[key].shape) != tuple(ref.shape):
            raise CapeFileError(f"{model_path}: {key!r} has shape {tuple(sd[key].shape)}, expected {tuple(ref.shape)} from args.json/vocab.json")
    ignored = sorted(k for k in sd if k not in expected)
    if missing_opt:  # a partial head cannot be used: drop it rather than keep random weights
        for prefix, attr in (("decoder.", "decoder"), ("mvc_decoder.", "mvc_decoder")):
            if any(k.startswith(prefix) for k in missing_opt):
                setattr(model, attr, None)
                ignored += sorted(k for k in sd if k.startswith(prefix) and k not in ignored)
        expected = model.state_dict()
    model.load_state_dict({k: sd[k].to(torch.float32) for k in expected}, strict=True)
    for k in ignored:
        logger.warning("%s: ignored key %r (not used by the rebuilt model)", model_path, k)
    for k in missing_opt:
        logger.warning("%s: could not fill %r (absent from the checkpoint; head dropped)", model_path, k)
    model.load_report = {"ignored": ignored, "missing": missing_opt}
    model.args, model.vocab = dict(args), dict(vocab)

    if pe in ("cape", "cape-input"):
        if angles is None:
            raise CapeDataError(f"pe={pe!r} needs angles (a DataFrame indexed by gene or CapeEncodings)")
        if pe == "cape" and (d_model // nhead) % 2:
            raise CapeConfigError(f"pe='cape': head size embsize/nheads = {d_model // nhead} must be even for rotary pairs")
        special = {t for t in vocab if t.startswith("<") and t.endswith(">")} | {pad_token}
        table, n_set = _angle_table(angles, vocab, ntoken, d_model // 2, special, pe)
        logger.info("pe=%r: %d of %d vocabulary genes got CAPE angles (the rest, and special tokens, get 0)",
                    pe, n_set, ntoken - len(special))
        model.angle_table, model.n_angled = table, n_set
    elif angles is not None:
        logger.warning("pe=%r: angles given but not used", pe)
    model.pe = pe
    return model.eval().to(device)
