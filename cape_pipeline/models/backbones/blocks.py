"""Transformer building blocks shared by the backbones (nanoGPT-style: one concept per module).

:class:`TokenTransformer` is the common body of every backbone: value embedding (defined by
the subclass) → optional perturbation-flag embedding → input-side PE → prepend <cls> →
pre-norm blocks (attention with the PE's rotary angles / score bias) → final LayerNorm.
The native identity embedding (``embed_identity``) is added unless ``config.identity`` is false.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from cape_pipeline.models.attention import ATTENTIONS, build_attention
from cape_pipeline.models.backbones.configs import BackboneConfig
from cape_pipeline.models.backbones.tokens import TokenBatch, select_tokens
from cape_pipeline.models.pe import PE_ALIASES, build_pe, resolve_pe
from cape_pipeline.models.positions import FeaturePositions, as_positions, require

__all__ = ["MLP", "Block", "TokenTransformer", "special_values"]


def special_values(
    h: torch.Tensor, missing: torch.Tensor, hide: torch.Tensor | None, missing_embed: torch.Tensor, mask_embed: torch.Tensor
) -> torch.Tensor:
    """Substitute the learned <missing> and <mask> vectors into value embeddings.

    Parameters
    ----------
    h
        ``(B, T, D)`` float value embeddings.
    missing
        ``(B, T)`` bool, tokens whose value is missing (they get ``missing_embed``).
    hide
        ``(B, T)`` bool or ``None``, tokens hidden for pretraining (they get ``mask_embed``,
        which wins over ``missing_embed``).
    missing_embed, mask_embed
        ``(D,)`` float vectors.

    Returns
    -------
    Tensor
        ``(B, T, D)``, a new tensor (``h`` is not modified).
    """
    h = torch.where(missing[..., None], missing_embed, h)
    if hide is not None:
        h = torch.where(hide[..., None], mask_embed, h)
    return h


class MLP(nn.Module):
    """Position-wise feed-forward: Linear(D, hidden) → GELU or ReLU → Linear(hidden, D) → dropout;
    ``hidden`` = ``d_hid`` or round(``ratio`` × D)."""

    def __init__(
        self, d_model: int, ratio: float, dropout: float, *, activation: str = "gelu", d_hid: int | None = None
    ) -> None:
        super().__init__()
        hidden = d_hid if d_hid is not None else max(int(round(d_model * ratio)), 1)
        act = nn.ReLU() if activation == "relu" else nn.GELU()
        self.net = nn.Sequential(nn.Linear(d_model, hidden), act, nn.Linear(hidden, d_model), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) → (B, T, D)."""
        return self.net(x)


class Block(nn.Module):
    """Transformer block. Pre-norm (default): ``x + attn(LN(x))`` then ``x + MLP(LN(x))``;
    post-norm (``config.norm_scheme="post"``, torch's and scGPT's): ``LN₁(x + attn(x))`` then
    ``LN₂(x + MLP(x))``."""

    def __init__(self, config: BackboneConfig, attention: str) -> None:
        super().__init__()
        d = config.d_model
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = build_attention(attention, d, config.n_heads, dropout=config.attn_dropout)
        self.drop = nn.Dropout(config.dropout)
        self.mlp = MLP(d, config.mlp_ratio, config.dropout, activation=config.activation, d_hid=config.d_hid)
        self.post_norm = config.norm_scheme == "post"

    def forward(
        self,
        x: torch.Tensor,
        *,
        angles: torch.Tensor | None,
        score_bias: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None,
        key_padding_mask: torch.Tensor | None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(B, T, D) → (B, T, D); arguments as in :class:`~cape_pipeline.models.attention.rotary.RotaryMultiheadAttention`;
        ``positions`` ``(B, T, d+1)`` hyperboloid points go to attentions with ``needs_positions``."""
        extra = {"positions": positions} if positions is not None else {}
        if self.post_norm:
            x = self.ln1(x + self.drop(self.attn(x, angles, key_padding_mask, score_bias=score_bias, **extra)))
            return self.ln2(x + self.mlp(x))
        x = x + self.drop(self.attn(self.ln1(x), angles, key_padding_mask, score_bias=score_bias, **extra))
        return x + self.mlp(self.ln2(x))


class TokenTransformer(nn.Module):
    """Common body of the bundled backbones (subclasses define the value and identity embeddings).

    Token of feature j in observation i: ``value(x_ij) [+ identity_j] [+ flag] [+ PE_j]``
    (the additive PEs; ``cape-input`` rotates this sum instead), then <cls> is prepended and
    the pre-norm blocks run with the PE's rotary angles / score bias (paper 000 Supp. F.2).

    Subclasses set :attr:`config_class` and create their own embedding modules in
    :meth:`build_embeddings`, which runs at the end of ``__init__`` (after the shared modules,
    so the order of parameter creation, hence seeded initial weights and ``state_dict`` keys,
    is fixed).

    Parameters
    ----------
    config
        The backbone's frozen config; ``config.identity`` keeps the native per-feature
        identity embedding (the default reading), ``False`` drops it (literal Eq. F.109).
        ``None`` takes ``config_class()`` (the backbone's defaults).
    n_features
        M, number of features of the data (rows of per-feature tables).
    pe
        PE name (:data:`cape_pipeline.models.pe.PE_NAMES`); ``none`` (the default) is the
        identity alone. The earlier name ``default`` is taken as ``none`` with a
        :class:`FutureWarning`, and switches the identity on even when ``config.identity`` is
        false (as it did; the model's ``config`` then says ``identity=True``).
    attention
        Attention name (:data:`cape_pipeline.models.attention.ATTENTIONS`).
    angles
        ``(M, d)`` CAPE angles for ``cape*`` PEs (``d = D/2`` for the rotary ones), or a
        :class:`~cape_pipeline.models.positions.FeaturePositions` that also carries the DAG's
        spanning forest (``pe="ape-tree"``) and the hyperboloid points (attentions with
        ``needs_positions``, ``riemann``).
    static_table
        ``(M, D)`` fixed vectors for ``static-absolute``.

    Raises
    ------
    CapeConfigError, CapeDataError
        Unknown PE/attention; angles or table missing or of the wrong shape.
    """

    missing_key_padding: bool = False
    config_class: type[BackboneConfig] = BackboneConfig
    """Config class of the backbone; ``config=None`` builds its defaults."""

    def __init__(
        self,
        config: BackboneConfig | None = None,
        *,
        n_features: int,
        pe: str = "none",
        attention: str = "dot",
        angles: np.ndarray | torch.Tensor | FeaturePositions | None = None,
        static_table: np.ndarray | torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        config = self.config_class() if config is None else config
        if pe in PE_ALIASES and not config.identity:  # the earlier name ``default`` forced the identity on
            config = dataclasses.replace(config, identity=True)
        pe = resolve_pe(pe)
        self.config, self.n_features, self.pe_name, self.attention_name = config, n_features, pe, attention
        self.use_identity = bool(config.identity)
        d = config.d_model
        pos = as_positions(angles)
        self.pe = build_pe(
            pe,
            n_features=n_features,
            d_model=d,
            n_heads=config.n_heads,
            angles=None if pos is None else pos.angles,
            static_table=static_table,
            sigma=config.sigma,
            rel_buckets=config.rel_buckets,
            rel_max_distance=config.rel_max_distance,
            positions=pos,
            ape_branches=config.ape_branches,
        )
        self.register_buffer("hyperboloid", None)  # (M, d+1) float32 for attentions with needs_positions
        if getattr(ATTENTIONS.get(attention), "needs_positions", False):
            points = require(pos, "hyperboloid", f"attention={attention!r}", n_features).hyperboloid
            self.register_buffer("hyperboloid", torch.as_tensor(points, dtype=torch.float32))
        self.cls_token = nn.Parameter(torch.randn(d) * 0.02)
        self.flag_embed = nn.Embedding(2, d) if config.perturbation_flags else None
        self.blocks = nn.ModuleList(Block(config, attention) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(d) if config.norm_scheme == "pre" else nn.Identity()
        self.build_embeddings()

    # --- subclasses -------------------------------------------------------------------------
    def build_embeddings(self) -> None:
        """Create the subclass's value and identity embedding modules (from ``self.config``,
        ``self.n_features`` and ``self.use_identity``); called once, last in ``__init__``."""

    def bins(self, x: torch.Tensor, idx: torch.Tensor, values: torch.Tensor) -> torch.Tensor | None:
        """Value-bin ids ``(B, T)`` of the tokens, or ``None`` for continuous-value backbones."""
        return None

    def embed_values(self, tokens: TokenBatch, hide: torch.Tensor | None) -> torch.Tensor:
        """Value embedding ``(B, T, D)``; ``hide`` ``(B, T)`` bool replaces values by <mask>."""
        raise NotImplementedError

    def embed_identity(self, idx: torch.Tensor) -> torch.Tensor:
        """Native per-feature identity embedding ``(B, T, D)`` of feature indices ``(B, T)``."""
        raise NotImplementedError

    # --- shared -----------------------------------------------------------------------------
    def tokenize(self, x: torch.Tensor) -> TokenBatch:
        """Tokens of a batch ``x`` ``(B, M)`` float (NaN = missing); see :mod:`.tokens`.

        Raises
        ------
        ValueError
            If ``x`` does not have ``n_features`` columns.
        """
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"tokenize: expected (B, {self.n_features}) values, got {tuple(x.shape)}")
        idx, pad = select_tokens(x, self.config.max_tokens, expressed_only=self.config.tokens == "expressed")
        values = torch.gather(x, 1, idx)
        if pad is not None:
            values = values.masked_fill(pad, 0.0)
        missing = torch.isnan(values)
        b = self.bins(x, idx, values)
        if b is not None and pad is not None:
            b = b.masked_fill(pad, 0)
        return TokenBatch(idx=idx, values=values, missing=missing, bins=b, pad=pad)

    def forward(
        self,
        tokens: TokenBatch | torch.Tensor,
        *,
        hide: torch.Tensor | None = None,
        flags: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Encode tokens.

        Parameters
        ----------
        tokens
            From :meth:`tokenize` (T tokens per observation), or a ``(B, M)`` float tensor of
            values (NaN = missing), which is tokenized here.
        hide
            ``(B, T)`` bool, tokens whose value is replaced by the <mask> embedding
            (masked-value pretraining).
        flags
            ``(B, M)`` long in {0, 1}, perturbation flags per feature (needs
            ``config.perturbation_flags``); gathered to the tokens.

        Returns
        -------
        Tensor
            ``(B, 1 + T, D)``; position 0 is the <cls> token. Padding positions hold values
            that must be ignored (``tokens.pad``).
        """
        if isinstance(tokens, torch.Tensor):
            tokens = self.tokenize(tokens)
        h = self.embed_values(tokens, hide)  # (B, T, D)
        if self.use_identity:
            h = h + self.embed_identity(tokens.idx)
        if flags is not None:
            if self.flag_embed is None:
                raise ValueError("flags given but the config has perturbation_flags=False")
            h = h + self.flag_embed(torch.gather(flags, 1, tokens.idx))
        if getattr(self.pe, "needs_values", False):  # value-dependent PEs (rank-value)
            h = self.pe.embed(h, tokens.idx, values=tokens.values, pad=tokens.pad, hide=hide)
        else:
            h = self.pe.embed(h, tokens.idx)  # (B, T, D)
        bsz = h.shape[0]
        h = torch.cat([self.cls_token.expand(bsz, 1, -1), h], dim=1)  # (B, 1+T, D)
        angles = self.pe.rotary(tokens.idx)  # (B, T, D/2) or None
        if angles is not None:
            from cape_pipeline.encodings.rope import rotations

            angles = torch.cat([angles.new_zeros(bsz, 1, angles.shape[-1]), angles], dim=1)
            angles = rotations(angles)  # e^{jφ} once for all layers: (B, 1+T, D/2) complex
        qk = self.pe.qk_transform(tokens.idx)  # per-token maps of q, k (ape-tree) or None
        if qk is not None:
            angles = qk  # the attention applies a callable in place of a rotation
        positions = None
        if self.hyperboloid is not None:  # riemann: the tokens' points, <cls> at the origin
            pts = self.hyperboloid[tokens.idx]  # (B, T, d+1)
            origin = pts.new_zeros(bsz, 1, pts.shape[-1])
            origin[..., 0] = 1.0
            positions = torch.cat([origin, pts], dim=1)  # (B, 1+T, d+1)
        bias = self.pe.score_bias(tokens.idx)
        masked = tokens.pad
        if self.missing_key_padding and bool(tokens.missing.any()):
            masked = tokens.missing if masked is None else masked | tokens.missing
        kpm = None if masked is None else torch.cat([masked.new_zeros(bsz, 1), masked], dim=1)  # (B, 1+T)
        for blk in self.blocks:
            h = blk(h, angles=angles, score_bias=bias, key_padding_mask=kpm, positions=positions)
        return self.norm(h)

    def fit_data(self, x: np.ndarray) -> None:
        """Fit data-dependent buffers (e.g. scBERT's bin edges) on training data ``(N, M)``;
        also the PE's, if it has a ``fit_data`` (rank-value's medians). Subclasses that
        override this call ``super().fit_data(x)``."""
        fit = getattr(self.pe, "fit_data", None)
        if fit is not None:
            fit(x)
