"""Frozen configs of the bundled transformer backbones (paper 000, Supp. F.2 and F.4).

One dataclass per backbone sets every size. Defaults are small enough for a 2-core CPU; the
paper's sizes are available as presets (:func:`preset`): ``scgpt-paper`` (D 512, 4 layers,
8 heads), ``scbert-paper`` (D 200) and ``methylgpt-paper``.
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
        Dropout on attention weights and block outputs.
    max_tokens
        Longest feature sequence per observation (the <cls> token comes on top). When an
        observation has more features, its ``max_tokens`` highest values are kept (scGPT's
        ``max_seq_len``), gathered with their own PE rows/angles. ``0`` keeps all features.
    sigma
        Initial standard deviation of the ``learned-small-norm`` PE (paper 004: 0.1–0.2).
    rel_buckets
        Number of signed distance buckets of the ``trainable-relative`` PE (Eq. F.110).
    rel_max_distance
        Distances ``|i - j|`` at or beyond this share the outermost (log-spaced) bucket.
    perturbation_flags
        Add a learned embedding of a per-token 0/1 flag (the perturbed feature(s)), as scGPT's
        perturbation fine-tuning does. Set by the perturbation task.
    """

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    mlp_ratio: float = 2.0
    dropout: float = 0.0
    max_tokens: int = 128
    sigma: float = 0.1
    rel_buckets: int = 32
    rel_max_distance: int = 256
    perturbation_flags: bool = False

    def __post_init__(self) -> None:
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
        if self.max_tokens < 0:
            raise CapeConfigError(f"model.max_tokens: expected >= 0 (0 = all), got {self.max_tokens}")
        if not self.sigma > 0:
            raise CapeConfigError(f"model.sigma: expected > 0, got {self.sigma}")
        if self.rel_buckets < 2 or self.rel_max_distance < 2:
            raise CapeConfigError("model.rel_buckets and model.rel_max_distance must be >= 2")
        if not self.mlp_ratio > 0:
            raise CapeConfigError(f"model.mlp_ratio: expected > 0, got {self.mlp_ratio}")


@dataclass(frozen=True)
class ScGPTConfig(BackboneConfig):
    """scGPT-style backbone: value-bin embedding (per-cell quantile bins) + PE + <cls> token.

    Attributes
    ----------
    n_bins
        Value bins B; bin 0 is reserved for zero expression, bins 1..B-1 hold per-cell
        equal-count (quantile) bins of the non-zero values (scGPT's ``n_bins = 51``).
    gene_token_embedding
        Also add a separate trainable gene-token embedding. Off by default: in scGPT the gene
        embedding *is* the trainable absolute PE (paper 000 Eq. F.109), so the PE zoo replaces
        it; switching this on gives every PE a trainable identity on top.
    """

    n_bins: int = 51
    gene_token_embedding: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_bins < 3:
            raise CapeConfigError(f"model.n_bins: expected >= 3, got {self.n_bins}")


@dataclass(frozen=True)
class ScBERTConfig(BackboneConfig):
    """scBERT-style backbone: global absolute-value bins + PE added (Eqs. F.106–F.107).

    Attributes
    ----------
    n_bins
        Value bins B; bin 0 is zero, bins 1..B-1 are fixed intervals of the non-zero values
        (edges are quantiles of the training data's non-zero values, the same for every cell).
    """

    n_bins: int = 7
    max_tokens: int = 128

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_bins < 3:
            raise CapeConfigError(f"model.n_bins: expected >= 3, got {self.n_bins}")


@dataclass(frozen=True)
class MethylGPTConfig(BackboneConfig):
    """MethylGPT-style backbone: CpG-site tokens + continuous β-value embedding.

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
