"""Start the bundled :class:`~cape_pipeline.models.ScGPT` backbone from a released scGPT checkpoint,
so the tasks fine-tune it like a backbone trained from scratch (paper 000's "scGPT + CAPE").

:func:`~cape_pipeline.models.from_scgpt` reads the checkpoint (and checks it); this module maps its
weights onto an :class:`ScGPT` over the data's features: the gene tokens of the features in the
vocabulary (``vocab.json``), scGPT's ``GeneEncoder`` LayerNorm, the value encoder, the post-norm
ReLU layers (stacked ``Wqkv`` onto ``in_proj``, same ``(three h d)`` layout), and the ``<cls>``
token, which scGPT feeds as the ``<cls>`` gene with value 0, so ours starts as
``GeneEncoder(<cls>) + ValueEncoder(0)``. With ``pe="none"`` the backbone's outputs for a cell's
genes equal the checkpoint's ``encode`` on the same genes and values (a test checks it).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.models.backbones.configs import ScGPTConfig
from cape_pipeline.models.backbones.scgpt import ScGPT
from cape_pipeline.models.scgpt_import.checkpoint import ScGPTCheckpointModel, from_scgpt

__all__ = ["init_from_scgpt", "scgpt_checkpoint_config", "vocabulary_genes"]

log = logging.getLogger(__name__)


def _checkpoint(path: Path) -> ScGPTCheckpointModel:
    """:func:`from_scgpt` of ``path``, read once per content (keyed by the files' sizes and
    modification times)."""
    stamp = tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(path.glob("*")) if f.is_file())
    return _checkpoint_cached(str(path.resolve()), stamp)


@lru_cache(maxsize=2)
def _checkpoint_cached(path: str, stamp: tuple[Any, ...]) -> ScGPTCheckpointModel:
    return from_scgpt(path)


def _value_encoder(args: dict[str, Any], where: str) -> str:
    emb, style = str(args.get("input_emb_style", "continuous")), str(args.get("input_style", "binned"))
    if emb == "category":
        return "binned"
    if emb == "continuous":
        return "continuous-bins" if style == "binned" else "continuous"
    raise CapeConfigError(f"{where}: input_emb_style={emb!r} cannot be fine-tuned here (continuous or category)")


def scgpt_checkpoint_config(path: str | Path, **overrides: Any) -> ScGPTConfig:
    """The :class:`ScGPTConfig` of a checkpoint: width, heads, layers and FFN width from
    ``args.json``, post-norm ReLU layers without a final LayerNorm, the checkpoint's value
    encoding (``input_style="binned"`` with a continuous encoder → ``continuous-bins``;
    ``category`` → ``binned``; ``n_bins``) and its ``max_seq_len`` as ``max_tokens``.

    Parameters
    ----------
    path
        The checkpoint directory (``args.json``, ``vocab.json``, ``best_model.pt``).
    **overrides
        Other :class:`ScGPTConfig` fields (e.g. ``dropout``; not the sizes).

    Raises
    ------
    CapeFileError
        Unreadable or inconsistent checkpoint (see :func:`from_scgpt`).
    CapeConfigError
        A pre-norm or ``scaling`` checkpoint, or an override of a size the weights fix.
    """
    return _config(_checkpoint(Path(path)), Path(path), overrides)


def _config(ckpt: ScGPTCheckpointModel, path: Path, overrides: dict[str, Any]) -> ScGPTConfig:
    if ckpt.norm_scheme != "post":
        raise CapeConfigError(f"{path}: a pre-norm scGPT checkpoint cannot be fine-tuned here (post-norm only)")
    layer = ckpt.transformer_encoder.layers[0]
    fixed = {
        "d_model": ckpt.d_model,
        "n_heads": ckpt.nhead,
        "n_layers": ckpt.nlayers,
        "d_hid": int(layer.linear1.out_features),
        "norm_scheme": "post",
        "activation": "relu",
        "value_encoder": _value_encoder(ckpt.args, str(path / "args.json")),
        "identity": True,
        "identity_init": "normal",
    }
    clash = sorted(k for k in overrides if k in fixed and overrides[k] != fixed[k])
    if clash:
        raise CapeConfigError(
            f"{path}: {', '.join(f'{k}={overrides[k]!r}' for k in clash)} differ from the checkpoint "
            f"({', '.join(f'{k}={fixed[k]!r}' for k in clash)}); the weights fix them"
        )
    cfg: dict[str, Any] = {**overrides, **fixed}
    if fixed["value_encoder"] in ("binned", "continuous-bins"):
        cfg["n_bins"] = int(ckpt.args.get("n_bins", 51))
    if "max_tokens" not in overrides and ckpt.args.get("max_seq_len"):
        cfg["max_tokens"] = int(ckpt.args["max_seq_len"]) - 1  # scGPT's length counts <cls>
    return ScGPTConfig(**cfg)


def vocabulary_genes(path: str | Path, feature_names: Any) -> np.ndarray:
    """``(M,)`` bool: which of ``feature_names`` are genes of the checkpoint's ``vocab.json``
    (special ``<...>`` tokens excluded).

    Raises
    ------
    CapeFileError
        The checkpoint cannot be read (see :func:`from_scgpt`).
    """
    names = np.asarray(feature_names).astype(str)
    special = np.char.startswith(names, "<") & np.char.endswith(names, ">")
    return np.isin(names, list(_checkpoint(Path(path)).vocab)) & ~special


@torch.no_grad()
def init_from_scgpt(model: ScGPT, path: str | Path, feature_names: Any) -> dict[str, Any]:
    """Copy a checkpoint's weights into ``model`` (built with :func:`scgpt_checkpoint_config`'s
    config over ``feature_names``). The PE, the <mask>/<missing> value vectors, the perturbation
    flags and the task heads keep their own initialization.

    Parameters
    ----------
    model
        An :class:`ScGPT` with ``n_features == len(feature_names)``.
    path
        The checkpoint directory.
    feature_names
        ``(M,)`` gene names of the model's features, each in ``vocab.json``.

    Returns
    -------
    dict
        ``{"checkpoint": str, "n_genes": M, "ignored_keys": [...], "missing_keys": [...]}``.

    Raises
    ------
    CapeDataError
        A feature not in the vocabulary (drop those first; see :func:`vocabulary_genes`).
    CapeConfigError
        ``model``'s sizes differ from the checkpoint's.
    """
    path = Path(path)
    ckpt = _checkpoint(path)
    expect = _config(ckpt, path, {})
    got = model.config
    for key in ("d_model", "n_heads", "n_layers", "d_hid", "norm_scheme", "activation", "value_encoder"):
        if getattr(got, key) != getattr(expect, key):
            raise CapeConfigError(
                f"{path}: model.{key}={getattr(got, key)!r} but the checkpoint has {getattr(expect, key)!r}"
            )
    names = np.asarray(feature_names).astype(str)
    if len(names) != model.n_features:
        raise CapeDataError(f"feature_names: {len(names)} names for a model of {model.n_features} features")
    absent = names[~vocabulary_genes(path, names)]
    if absent.size:
        raise CapeDataError(
            f"{path / 'vocab.json'}: {absent.size} feature(s) not in the vocabulary, e.g. {list(absent[:5])}; "
            "drop them first"
        )
    ids = torch.as_tensor([ckpt.vocab[n] for n in names], dtype=torch.long)
    if not model.use_identity:
        raise CapeConfigError("init_from_scgpt: the checkpoint's gene tokens need the backbone's identity (not /no-id)")
    model.gene_embed.weight.copy_(ckpt.encoder.embedding.weight[ids])
    model.gene_norm.load_state_dict(ckpt.encoder.enc_norm.state_dict())
    cls_id = ckpt.vocab.get(str(ckpt.args.get("cls_token", "<cls>")))
    if cls_id is None:
        raise CapeDataError(f"{path / 'vocab.json'}: no <cls> token")
    cls_gene = ckpt.encoder.enc_norm(ckpt.encoder.embedding.weight[cls_id])
    if model.config.value_encoder == "binned":
        n = min(model.bin_embed.num_embeddings, ckpt.value_encoder.embedding.num_embeddings, model.config.n_bins)
        model.bin_embed.weight[:n].copy_(ckpt.value_encoder.embedding.weight[:n])
        model.value_norm.load_state_dict(ckpt.value_encoder.enc_norm.state_dict())
        cls_value = model.value_norm(model.bin_embed.weight[0])
    else:
        ve = ckpt.value_encoder
        model.value_mlp[0].load_state_dict(ve.linear1.state_dict())
        model.value_mlp[2].load_state_dict(ve.linear2.state_dict())
        model.value_norm.load_state_dict(ve.norm.state_dict())
        cls_value = ve(torch.zeros(1, 1, dtype=ve.linear1.weight.dtype))[0, 0]
    model.cls_token.copy_(cls_gene + cls_value)
    for blk, layer in zip(model.blocks, ckpt.transformer_encoder.layers, strict=True):
        blk.attn.in_proj.load_state_dict(layer.self_attn.Wqkv.state_dict())
        blk.attn.out_proj.load_state_dict(layer.self_attn.out_proj.state_dict())
        blk.mlp.net[0].load_state_dict(layer.linear1.state_dict())
        blk.mlp.net[2].load_state_dict(layer.linear2.state_dict())
        blk.ln1.load_state_dict(layer.norm1.state_dict())
        blk.ln2.load_state_dict(layer.norm2.state_dict())
    report = {
        "checkpoint": str(path),
        "n_genes": int(len(names)),
        "ignored_keys": list(ckpt.load_report.get("ignored", [])),
        "missing_keys": list(ckpt.load_report.get("missing", [])),
    }
    log.info("scGPT checkpoint %s: %d genes initialised from the vocabulary", path, len(names))
    return report
