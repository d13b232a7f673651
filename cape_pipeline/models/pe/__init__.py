"""The positional-encoding zoo: every PE plugs into every backbone by name.

Every PE is applied *on top of* the backbone's native feature identity (scGPT's gene tokens,
scBERT's gene2vec-style vector, MethylGPT's CpG tokens), as paper 000's own code applies CAPE
on top of scGPT's gene encoder; ``none`` is that identity alone. With the backbone config's
``identity=False`` (the literal reading of Eq. F.109) the PE replaces the identity.

``default`` is the earlier name of ``none`` (:data:`PE_ALIASES`): the same model, taken with a
:class:`FutureWarning` for one release. It turned the backbone's identity on even under
``identity=False``; the alias still does, so a model saved under that name loads as it was.

A PE sees the token embeddings ``h`` ``(B, T, D)`` and the feature index of each token ``idx``
``(B, T)`` (long, into the ``M`` features of the data), and may act in four places:

* :meth:`PositionalEncoding.embed` changes the input embeddings once (additive PEs, Eq. F.107;
  the rotated input of Eq. F.108);
* :meth:`PositionalEncoding.rotary` gives per-token angles ``(B, T, D/2)`` with which the
  attention rotates q and k in every layer (Eqs. 24–25);
* :meth:`PositionalEncoding.score_bias` gives a function of the per-head q, k that returns an
  additive attention-score bias (the relative PE of Eq. F.110).
* :meth:`PositionalEncoding.qk_transform` gives a per-token map of the per-head q and k (the
  orthogonal path maps of paper 002, ``ape-tree``).

The <cls> token is never given a position: zero angle, nothing added, no relative bias.

=====================  ==============================================================  ===========
name                   what it does                                                    equivariant
=====================  ==============================================================  ===========
``cape``               rotary on q/k with the CAPE angles φ (Eqs. 24–26)               yes
``cape-learned-scale`` ``cape`` with a learned per-head factor exp(s_h) on φ, s_h = 0 at   yes
                       start (ours; :mod:`.pe_cape`)
``cape-input``         rotate the token embedding once, R(φ) v (Eq. F.108)             yes
``cape-additive``      add Linear(e) (w/o-rotary ablation, any angle width d_e)        yes
``static-absolute``    add fixed per-feature vectors (co-expression SVD, gene2vec      yes
                       stand-in; Eq. F.107)
``trainable-absolute`` add a learned per-feature table drawn from N(0, 1) (scGPT,     yes
                       F.109)
``trainable-relative`` learned bias from the signed index distance (Eq. F.110)         no
``learned-small-norm`` learned table drawn from N(0, σ²) × learned scale σ (paper   yes
                       004)
``rank-value``         Geneformer: add a learned vector of the token's rank by value /  no
                       non-zero training median (:mod:`.rank_value`)
``ape-tree``           paper 002: orthogonal maps A_m of each feature's path in the   no
                       DAG's spanning forest on q and k (:mod:`.ape_tree`)
``none``               nothing on top of the backbone's native identity; with         yes
                       ``identity=False``, a permutation-invariant set of values
=====================  ==============================================================  ===========

"Equivariant" means: permuting the features of the data *together with* the PE's per-feature
rows (angles, table) permutes the token outputs the same way and leaves the <cls> output
unchanged. It holds for every PE whose only notion of position is a per-feature row. It fails
for ``trainable-relative``, whose bias depends on the features' order in ``var_names``
(``i - j``), which a permutation changes.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from torch import nn

from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.models.pe.base import PositionalEncoding, ScoreBias
from cape_pipeline.models.pe.cape import (
    CapeAdditivePE,
    CapeInputPE,
    CapeLearnedScalePE,
    CapeRotaryPE,
    check_angles,
)
from cape_pipeline.models.pe.coexpression import COEXPRESSION_EXACT_MAX, coexpression_embedding
from cape_pipeline.models.positions import FeaturePositions, require

__all__ = [
    "PE_NAMES",
    "PE_ALIASES",
    "resolve_pe",
    "ROTARY_PES",
    "ANGLE_PES",
    "PositionalEncoding",
    "NoPE",
    "DefaultPE",
    "CapeRotaryPE",
    "CapeInputPE",
    "CapeAdditivePE",
    "CapeLearnedScalePE",
    "StaticAbsolutePE",
    "TrainableAbsolutePE",
    "LearnedSmallNormPE",
    "TrainableRelativePE",
    "build_pe",
    "coexpression_embedding",
    "COEXPRESSION_EXACT_MAX",
    "check_angles",
    "relative_buckets",
]

PE_NAMES: tuple[str, ...] = (
    "cape",
    "cape-learned-scale",
    "cape-input",
    "cape-additive",
    "static-absolute",
    "trainable-absolute",
    "trainable-relative",
    "learned-small-norm",
    "none",
    "rank-value",
    "ape-tree",
)
"""Every PE name accepted by :func:`build_pe` (and by ``pe=`` of every backbone and task)."""

PE_ALIASES: dict[str, str] = {"default": "none"}
"""Earlier PE names → current ones, accepted with a :class:`FutureWarning` for one release."""


def resolve_pe(name: str) -> str:
    """The current name of PE ``name``: an earlier name (:data:`PE_ALIASES`) becomes its
    current one with a :class:`FutureWarning`; any other string is returned as it is (an
    unknown name is refused later, by :func:`build_pe` or the caller's check).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     resolve_pe("default"), resolve_pe("cape")
    ('none', 'cape')
    """
    current = PE_ALIASES.get(name) if isinstance(name, str) else None
    if current is None:
        return name
    warnings.warn(f"pe {name!r} is now called {current!r} (the same model); the earlier name will be removed",
                  FutureWarning, stacklevel=3)
    return current

ANGLE_PES: frozenset[str] = frozenset({"cape", "cape-learned-scale", "cape-input", "cape-additive"})
"""PEs that need CAPE angles (an ``(n_vars, d)`` array)."""

ROTARY_PES: frozenset[str] = frozenset({"cape", "cape-learned-scale", "cape-input"})
"""PEs that rotate dimension pairs and so need ``d == D / 2``."""



class NoPE(PositionalEncoding):
    """No positional encoding: the token set is permutation invariant (CAPE-null ablation)."""

    name = "none"


class DefaultPE(NoPE):
    """Earlier name of :class:`NoPE` (warns with a :class:`FutureWarning` when built)."""

    def __init__(self) -> None:
        warnings.warn("DefaultPE is now NoPE (pe 'none'); the earlier name will be removed", FutureWarning,
                      stacklevel=2)
        super().__init__()


class StaticAbsolutePE(PositionalEncoding):
    """Fixed per-feature vectors added to the embedding (scBERT's gene2vec slot, Eq. F.107).

    Parameters
    ----------
    table
        ``(M, D)`` float, e.g. from :func:`coexpression_embedding`; kept as a buffer.
    """

    name = "static-absolute"

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("table", table.clone())

    def embed(self, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """(B, T, D) + table[idx]."""
        return h + self.table[idx]


class TrainableAbsolutePE(PositionalEncoding):
    """A learned per-feature table drawn from N(0, 1) like ``nn.Embedding`` (scGPT's gene tokens, F.109)."""

    name = "trainable-absolute"

    def __init__(self, n_features: int, d_model: int, std: float = 1.0) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(n_features, d_model) * std)

    def embed(self, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """(B, T, D) + table[idx]."""
        return h + self.table[idx]


class LearnedSmallNormPE(TrainableAbsolutePE):
    """e^g·P, P trained from N(0, σ₀²) (paper 004 Sec. 3.1), σ = σ₀e^g learned via g (g starts at 0)."""

    name = "learned-small-norm"

    def __init__(self, n_features: int, d_model: int, sigma: float = 0.1) -> None:
        super().__init__(n_features, d_model, std=sigma)
        self.log_gain = nn.Parameter(torch.zeros(()))  # σ = sigma·e^g, g trained
        self._register_load_state_dict_pre_hook(lambda sd, p, *_: sd.setdefault(p + "log_gain", torch.zeros(())))

    def embed(self, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """(B, T, D) + e^g·P[idx]; pre-σ state_dicts (no ``log_gain``) load with g = 0."""
        return h + self.log_gain.exp() * self.table[idx]


def relative_buckets(delta: torch.Tensor, n_buckets: int, max_distance: int) -> torch.Tensor:
    """Map signed distances ``i - j`` to buckets in ``[0, n_buckets)``.

    Half the buckets per sign; within a sign, the first half are exact distances, the rest
    log-spaced up to ``max_distance`` (farther distances share the last bucket).

    Parameters
    ----------
    delta
        Any-shape long tensor of signed distances.

    Returns
    -------
    Tensor
        Same shape, long.
    """
    half = n_buckets // 2
    exact = max(half // 2, 1)
    sign_offset = (delta > 0).long() * half
    d = delta.abs()
    log_ratio = torch.log(d.float().clamp(min=1) / exact) / math.log(max(max_distance / exact, 1.0 + 1e-6))
    far = exact + (log_ratio * (half - exact)).long()
    far = far.clamp(max=half - 1)
    return sign_offset + torch.where(d < exact, d, far)


def _sinusoid(pos: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal vectors of (signed) positions: (n,) → (n, dim)."""
    i = torch.arange(0, dim, 2, dtype=torch.float32)
    freq = torch.exp(-math.log(10000.0) * i / dim)
    ang = pos.float()[:, None] * freq[None, :]
    out = torch.zeros(pos.shape[0], dim)
    out[:, 0::2] = torch.sin(ang)
    out[:, 1::2] = torch.cos(ang)[:, : out[:, 1::2].shape[1]]
    return out


class TrainableRelativePE(PositionalEncoding):
    """Transformer-XL relative PE (paper 000 Eq. F.110) over bucketed index distances.

    The score of query m and key n gets, besides the content term computed by attention,

    ``q_mᵀ Ŵ_k p̃_{b(m−n)} + uᵀ k_n + vᵀ Ŵ_k p̃_{b(m−n)}``  (scaled by 1/√Dh like the content),

    where ``m − n`` is the difference of the two tokens' feature indices (their order in
    ``var_names``), ``b(·)`` its bucket (:func:`relative_buckets`), ``p̃`` a sinusoid of the
    bucket's distance, ``Ŵ_k`` learned and ``u``, ``v`` learned per-head biases. One module is
    shared by all layers. Memory stays at O(B·H·T²) (no (T, T, D) tensor): the per-bucket keys
    ``Ŵ_k p̃`` are (n_buckets, D) and are gathered by bucket index.
    """

    name = "trainable-relative"
    equivariant = False

    def __init__(self, d_model: int, n_heads: int, n_buckets: int = 32, max_distance: int = 256) -> None:
        super().__init__()
        self.n_heads, self.n_buckets, self.max_distance = n_heads, n_buckets, max_distance
        dh = d_model // n_heads
        # representative signed distance of each bucket: the smallest |δ| that falls in it
        deltas = torch.arange(-max_distance, max_distance + 1)
        b = relative_buckets(deltas, n_buckets, max_distance)
        rep = torch.zeros(n_buckets)
        order = torch.argsort(deltas.abs(), descending=True, stable=True)
        rep[b[order]] = deltas[order].float()  # last write wins: smallest |δ| per bucket
        self.register_buffer("p_tilde", _sinusoid(rep, d_model))  # (nb, D)
        self.w_k_hat = nn.Linear(d_model, d_model, bias=False)
        self.u = nn.Parameter(torch.zeros(n_heads, dh))
        self.v = nn.Parameter(torch.zeros(n_heads, dh))

    def score_bias(self, idx: torch.Tensor) -> ScoreBias:
        """Bias function for tokens with feature indices ``idx`` (B, T); <cls> rows/cols are 0."""
        bsz, t = idx.shape
        bucket = relative_buckets(idx[:, :, None] - idx[:, None, :], self.n_buckets, self.max_distance)
        full = torch.full((bsz, t + 1, t + 1), self.n_buckets, dtype=torch.long, device=idx.device)
        full[:, 1:, 1:] = bucket  # (B, 1+T, 1+T); bucket n_buckets = "involves <cls>" → zero
        h = self.n_heads

        def bias(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
            dh = q.shape[-1]
            r = self.w_k_hat(self.p_tilde).view(self.n_buckets, h, dh).transpose(0, 1)  # (H, nb, Dh)
            r = torch.cat([r, r.new_zeros(h, 1, dh)], dim=1)  # (H, nb+1, Dh)
            qr = torch.einsum("bhtd,hnd->bhtn", q + self.v[None, :, None, :], r)  # (B, H, T', nb+1)
            index = full[:, None].expand(-1, h, -1, -1)  # (B, H, T', T')
            pos = torch.gather(qr, 3, index)  # (B, H, T', T'): (q_m + v)ᵀ Ŵ_k p̃_{b(m−n)}
            uk = torch.einsum("hd,bhtd->bht", self.u, k)[:, :, None, :]  # (B, H, 1, T')
            return (pos + uk) / math.sqrt(dh)

        return bias


def build_pe(
    name: str,
    *,
    n_features: int,
    d_model: int,
    n_heads: int,
    angles: np.ndarray | torch.Tensor | None = None,
    static_table: np.ndarray | torch.Tensor | None = None,
    sigma: float = 0.1,
    rel_buckets: int = 32,
    rel_max_distance: int = 256,
    positions: FeaturePositions | None = None,
    ape_branches: int = 4,
) -> PositionalEncoding:
    """Build a PE of the zoo by name.

    Parameters
    ----------
    name
        One of :data:`PE_NAMES` (an earlier name of :data:`PE_ALIASES` is taken with a
        :class:`FutureWarning`).
    n_features
        M, the number of features (rows of the per-feature tables).
    d_model, n_heads
        Model width D and heads H.
    angles
        ``(M, d)`` CAPE angles φ (radians); required for :data:`ANGLE_PES`; ``d = D/2`` for
        :data:`ROTARY_PES`.
    static_table
        ``(M, D)`` fixed vectors for ``static-absolute`` (see :func:`coexpression_embedding`).
    sigma
        Init std of ``learned-small-norm``.
    rel_buckets, rel_max_distance
        Bucketing of ``trainable-relative``.
    positions
        :class:`~cape_pipeline.models.positions.FeaturePositions` with the DAG's spanning
        forest (``parent``, ``parent_weight``; :func:`~cape_pipeline.models.pe.ape_tree.spanning_forest`);
        required for ``ape-tree``.
    ape_branches
        Branch generators κ of ``ape-tree``.

    Raises
    ------
    CapeConfigError
        Unknown ``name``.
    CapeDataError
        Missing or misshapen ``angles`` / ``static_table`` / forest.
    """
    name = resolve_pe(name)
    if name not in PE_NAMES:
        raise CapeConfigError(f"pe {name!r} unknown; expected one of {list(PE_NAMES)}")
    if name in ANGLE_PES:
        a = check_angles(angles, n_features, name=f"pe={name!r} angles")
        if name == "cape":
            return CapeRotaryPE(a, d_model)
        if name == "cape-input":
            return CapeInputPE(a, d_model)
        if name == "cape-learned-scale":
            return CapeLearnedScalePE(a, d_model, n_heads)
        return CapeAdditivePE(a, d_model)
    if name == "static-absolute":
        if static_table is None:
            raise CapeDataError("pe='static-absolute' needs static_table, an (n_vars, D) array")
        t = torch.as_tensor(np.asarray(static_table), dtype=torch.float32)
        if tuple(t.shape) != (n_features, d_model):
            raise CapeDataError(
                f"pe='static-absolute': static_table must be ({n_features}, {d_model}), got {tuple(t.shape)}"
            )
        return StaticAbsolutePE(t)
    if name == "trainable-absolute":
        return TrainableAbsolutePE(n_features, d_model)
    if name == "learned-small-norm":
        return LearnedSmallNormPE(n_features, d_model, sigma=sigma)
    if name == "trainable-relative":
        return TrainableRelativePE(d_model, n_heads, rel_buckets, rel_max_distance)
    if name == "rank-value":
        from cape_pipeline.models.pe.rank_value import (
            RankValuePE,  # lazy: rank_value imports this module
        )

        return RankValuePE(n_features, d_model)
    if name == "ape-tree":
        from cape_pipeline.models.pe.ape_tree import APETreePE  # lazy, like rank-value

        forest = require(positions, "parent", "pe='ape-tree'", n_features)
        return APETreePE(forest.parent, forest.parent_weight, d_model, n_heads, n_branches=ape_branches)
    return NoPE()
