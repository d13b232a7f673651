"""Frozen configs of the bundled transformer backbones (paper 000, Supp. F.2 and F.4).

One dataclass per backbone sets every size. Defaults are small enough for a 2-core CPU; the
paper's sizes are available as presets (:func:`preset`): ``scgpt-paper`` (D 512, 4 layers,
8 heads), ``scbert-paper`` (D 200) and ``methylgpt-paper``.

Feature identity. Each backbone keeps its native per-feature embedding (``identity=True``, the
default): scGPT's trainable gene tokens, scBERT's static gene2vec-style vector, MethylGPT's
trainable CpG tokens. With PE ``none`` that identity is the only feature position, and every other PE is
applied on top of it, as paper 000's own code applies CAPE on top of scGPT's gene encoder.
``identity=False`` is the literal reading of Eq. F.109, where the PE *replaces* the identity.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from cape_pipeline.errors import CapeConfigError

__all__ = [
    "BackboneConfig",
    "ScGPTConfig",
    "ScBERTConfig",
    "MethylGPTConfig",
    "BACKBONE_CONFIGS",
    "PRESETS",
    "preset",
    "config_for",
]


@dataclass(frozen=True)
class BackboneConfig:
    """Sizes shared by every backbone.

    Attributes
    ----------
    d_model
        Model width D. Rotary PEs (``cape``, ``cape-input``) need angles with d = D/2 columns.
    n_layers
        Number of pre-norm transformer blocks.
    n_heads
        Attention heads H; ``d_model`` must be divisible by ``2 * n_heads`` (rotary pairs per head).
    mlp_ratio
        Hidden width of each block's MLP as a multiple of D.
    dropout
        Dropout on the block outputs (attention and MLP residual branches).
    attn_dropout
        Dropout on the attention probabilities. Off by default: on a CPU it forces the
        unfused attention path, a large share of a training step's time.
    identity
        Keep the backbone's native per-feature identity embedding (see the module docstring).
        ``False`` is the literal reading of Eq. F.109: the PE replaces the identity, so with
        ``pe="none"`` a token carries its value only.
    tokens
        Which features become tokens: ``expressed`` (the non-zero, non-missing values of each
        observation, as scGPT; shorter rows are padded and the padding is masked out of
        attention, pooling and losses) or ``all`` (every feature, zeros included).
    max_tokens
        Cap on the feature tokens per observation (the <cls> token comes on top); scGPT's
        ``max_seq_len``. An observation with more keeps its ``max_tokens`` highest values,
        gathered with their own PE rows/angles. ``0`` = no cap. Attention costs O(T²) per
        layer, so on a CPU the cap sets the price: pbmc68k_reduced has 183–409 expressed genes
        per cell (median 243), all under the default 512.
    sigma
        Initial standard deviation of the ``learned-small-norm`` PE (paper 004: 0.1–0.2).
    rel_buckets
        Number of signed distance buckets of the ``trainable-relative`` PE (Eq. F.110).
    rel_max_distance
        Distances ``|i - j|`` at or beyond this share the outermost (log-spaced) bucket.
    ape_branches
        Number of branch generators κ of the ``ape-tree`` PE (paper 002 Sec. 3.3): the κ − 1
        strongest children of a node get their own branch, the others share the last.
    perturbation_flags
        Add a learned embedding of a per-token 0/1 flag (the perturbed feature(s)), as scGPT's
        perturbation fine-tuning does. Set by the perturbation task.
    norm_scheme
        ``pre`` (default: ``x + attn(LN(x))``, then a final LayerNorm) or ``post`` (torch's and a
        released scGPT's ``LN(x + attn(x))``, no final LayerNorm).
    activation
        Activation of each block's MLP: ``gelu`` (default) or ``relu`` (scGPT's).
    d_hid
        Hidden width of each block's MLP; ``None`` = ``mlp_ratio`` × D (a checkpoint sets it).
    """

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    mlp_ratio: float = 2.0
    dropout: float = 0.1
    attn_dropout: float = 0.0
    identity: bool = True
    tokens: str = "expressed"
    max_tokens: int = 512
    sigma: float = 0.1
    rel_buckets: int = 32
    rel_max_distance: int = 256
    ape_branches: int = 4
    perturbation_flags: bool = False
    norm_scheme: str = "pre"
    activation: str = "gelu"
    d_hid: int | None = None

    def __post_init__(self) -> None:
        if self.norm_scheme not in ("pre", "post"):
            raise CapeConfigError(f"model.norm_scheme: expected 'pre' or 'post', got {self.norm_scheme!r}")
        if self.activation not in ("gelu", "relu"):
            raise CapeConfigError(f"model.activation: expected 'gelu' or 'relu', got {self.activation!r}")
        if self.d_hid is not None and self.d_hid < 1:
            raise CapeConfigError(f"model.d_hid: expected >= 1 or None, got {self.d_hid}")
        if self.d_model < 2 or self.n_heads < 1 or self.n_layers < 1:
            raise CapeConfigError(
                f"model: d_model >= 2, n_heads >= 1 and n_layers >= 1 required, got "
                f"d_model={self.d_model}, n_heads={self.n_heads}, n_layers={self.n_layers}"
            )
        if self.d_model % (2 * self.n_heads) != 0:
            raise CapeConfigError(
                f"model: d_model ({self.d_model}) must be divisible by 2 * n_heads "
                f"({2 * self.n_heads}) so each head gets whole rotary pairs"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise CapeConfigError(f"model.dropout: expected in [0, 1), got {self.dropout}")
        if not 0.0 <= self.attn_dropout < 1.0:
            raise CapeConfigError(f"model.attn_dropout: expected in [0, 1), got {self.attn_dropout}")
        if self.tokens not in ("expressed", "all"):
            raise CapeConfigError(f"model.tokens: expected 'expressed' or 'all', got {self.tokens!r}")
        if self.max_tokens < 0:
            raise CapeConfigError(f"model.max_tokens: expected >= 0 (0 = all), got {self.max_tokens}")
        if not self.sigma > 0:
            raise CapeConfigError(f"model.sigma: expected > 0, got {self.sigma}")
        if self.rel_buckets < 2 or self.rel_max_distance < 2:
            raise CapeConfigError("model.rel_buckets and model.rel_max_distance must be >= 2")
        if self.ape_branches < 1:
            raise CapeConfigError(f"model.ape_branches: expected >= 1, got {self.ape_branches}")
        if not self.mlp_ratio > 0:
            raise CapeConfigError(f"model.mlp_ratio: expected > 0, got {self.mlp_ratio}")


VALUE_ENCODERS = ("continuous", "binned", "continuous-bins")
"""Value encoders of :class:`ScGPTConfig`."""


@dataclass(frozen=True)
class ScGPTConfig(BackboneConfig):
    """scGPT-style backbone: gene token + value embedding + PE, <cls> token.

    The identity is scGPT's ``GeneEncoder`` (a trainable ``nn.Embedding`` followed by
    LayerNorm); the value embedding is scGPT's ``ContinuousValueEncoder`` (Linear(1, D) → ReLU →
    Linear(D, D) → LayerNorm) or its ``CategoryValueEncoder`` over value bins.

    Attributes
    ----------
    value_encoder
        ``continuous`` (the log-normalized value itself; default), ``binned`` (bin embedding,
        the ``scgpt-binned`` preset) or ``continuous-bins`` (the per-cell value bin, as a number,
        into the continuous encoder: how the released whole-human scGPT was pretrained,
        ``input_style="binned"`` with ``input_emb_style="continuous"``). ``continuous`` is the
        default because it annotates pbmc68k_reduced better than ``binned``
        (``benchmarks/tasks/RESULTS.md``).
    identity_init
        Initial gene tokens: ``coexpression`` (default: the top eigenvectors of the training
        data's gene–gene correlation, :func:`~cape_pipeline.models.pe.coexpression_embedding`,
        set by ``fit_data``; still trained) or ``normal`` (scGPT's N(0, 1)). A released scGPT
        starts fine-tuning from gene tokens pretrained on millions of cells; without such a
        checkpoint the co-expression start stands in for them: on pbmc68k_reduced it
        annotates better than N(0, 1), which first sits for several epochs at the class-prior
        loss (``benchmarks/tasks/RESULTS.md``). Only with ``identity``.
    n_bins
        Value bins B for ``binned``; bin 0 is reserved for zero expression, bins 1..B-1 hold
        per-cell equal-count (quantile) bins of the non-zero values (scGPT's ``n_bins = 51``).
    """

    value_encoder: str = "continuous"
    identity_init: str = "coexpression"
    n_bins: int = 51

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_bins < 3:
            raise CapeConfigError(f"model.n_bins: expected >= 3, got {self.n_bins}")
        if self.identity_init not in ("normal", "coexpression"):
            raise CapeConfigError(f"model.identity_init: expected 'normal' or 'coexpression', got {self.identity_init!r}")
        if self.value_encoder not in VALUE_ENCODERS:
            raise CapeConfigError(
                f"model.value_encoder: expected one of {', '.join(VALUE_ENCODERS)}, got {self.value_encoder!r}"
            )


@dataclass(frozen=True)
class ScBERTConfig(BackboneConfig):
    """scBERT-style backbone: global absolute-value bins + static gene vector + PE (Eqs. F.106–F.107).

    The identity is scBERT's gene2vec vector, fixed during training; without gene2vec here,
    its stand-in is :func:`~cape_pipeline.models.pe.coexpression_embedding` of the training data
    (set by ``fit_data``).

    Attributes
    ----------
    n_bins
        Value bins B; bin 0 is zero, bins 1..B-1 are fixed intervals of the non-zero values
        (edges are quantiles of the training data's non-zero values, the same for every cell).
    """

    n_bins: int = 7

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_bins < 3:
            raise CapeConfigError(f"model.n_bins: expected >= 3, got {self.n_bins}")


@dataclass(frozen=True)
class MethylGPTConfig(BackboneConfig):
    """MethylGPT-style backbone: CpG-site tokens + continuous β-value embedding.

    The identity is a trainable CpG-site embedding (``nn.Embedding`` + LayerNorm). Every site
    is a token (``tokens="all"``: β = 0 is a measurement); missing β values are masked.

    Attributes
    ----------
    value_hidden
        Hidden width of the 1 → hidden → D MLP that embeds each β value.
    mask_missing_keys
        Exclude missing CpG values from attention as keys (key padding); they still get a
        learned "missing" value embedding so every token has an input.
    """

    value_hidden: int = 32
    mask_missing_keys: bool = True
    tokens: str = "all"
    max_tokens: int = 0


BACKBONE_CONFIGS: dict[str, type[BackboneConfig]] = {
    "scgpt": ScGPTConfig,
    "scbert": ScBERTConfig,
    "methylgpt": MethylGPTConfig,
}
"""Backbone name → its config class."""

PRESETS: dict[str, BackboneConfig] = {
    "scgpt-cpu": ScGPTConfig(),
    "scgpt-paper": ScGPTConfig(d_model=512, n_layers=4, n_heads=8, mlp_ratio=4.0, dropout=0.2, max_tokens=1200),
    "scgpt-binned": ScGPTConfig(value_encoder="binned"),
    "scbert-cpu": ScBERTConfig(),
    "scbert-paper": ScBERTConfig(d_model=200, n_layers=6, n_heads=10, mlp_ratio=4.0, max_tokens=0),
    "methylgpt-cpu": MethylGPTConfig(),
    "methylgpt-paper": MethylGPTConfig(d_model=64, n_layers=6, n_heads=4, mlp_ratio=4.0, dropout=0.1),
}
"""Named configs: ``*-cpu`` are the defaults, ``*-paper`` the sizes of paper 000 Supp. F.4."""


def preset(name: str) -> BackboneConfig:
    """Return a named backbone config (see :data:`PRESETS`).

    Raises
    ------
    CapeConfigError
        If ``name`` is not a known preset.
    """
    if name not in PRESETS:
        raise CapeConfigError(f"model preset {name!r} unknown; expected one of {sorted(PRESETS)}")
    return PRESETS[name]


def config_for(backbone: str, config: BackboneConfig | dict[str, Any] | str | None = None) -> BackboneConfig:
    """Resolve a backbone config from a name plus an instance, a dict of overrides or a preset.

    Parameters
    ----------
    backbone
        ``scgpt``, ``scbert`` or ``methylgpt``.
    config
        ``None`` (CPU defaults), a config instance of the right class, a preset name, or a dict
        of field overrides applied to the CPU defaults.

    Raises
    ------
    CapeConfigError
        Unknown backbone, preset of another backbone, wrong config class or unknown field.
    """
    if backbone not in BACKBONE_CONFIGS:
        raise CapeConfigError(f"backbone {backbone!r} unknown; expected one of {sorted(BACKBONE_CONFIGS)}")
    cls = BACKBONE_CONFIGS[backbone]
    if config is None:
        return cls()
    if isinstance(config, str):
        config = preset(config)
    if isinstance(config, dict):
        known = {f.name for f in fields(cls)}
        bad = sorted(set(config) - known)
        if bad:
            raise CapeConfigError(f"{backbone} config: unknown field(s) {bad}; known: {sorted(known)}")
        return replace(cls(), **config)
    if type(config) is not cls:
        raise CapeConfigError(
            f"backbone {backbone!r} needs a {cls.__name__}, got {type(config).__name__}"
        )
    return config
