"""Step II: embed a causal DAG on the hyperboloid H^d (paper 000, Sec. 3.4, Eqs. 11–21).

The objective (Eq. 15) is, per anchor feature m,

    L_con(p_m) = − Σ_{n ∈ N_k^+(m)} w_mn · log( e^{−d_mn} / (e^{−d_mn} + Σ_{n' ∈ N_k^-(m)} e^{−d_mn'}) )   (Eq. 16)
    Ω(p_m)     = π_m · d_l(p_m, p_o)                                                                   (Eq. 17)

averaged over anchors, ``L = mean_m [L_con(p_m) + λ_g Ω(p_m)]``. Positives are nodes joined to m by
a directed path of length ≤ k in either direction, weighted by the strongest such path (max
product of |A| along it; |A_mn| for a direct edge). π is PageRank on the reversed graph (Eq. 18).
Points are ``geoopt.ManifoldParameter`` on ``geoopt.Lorentz`` in float64, optimized with Riemannian
SGD (Eqs. 19–21) or Riemannian Adam.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.errors import CapeConfigError, CapeFitError
from cape_pipeline.hyperbolic import lorentz

__all__ = [
    "HyperbolicEmbedding",
    "check_options",
    "embed",
    "k_hop_positives",
    "causal_pagerank",
    "auto_batch_size",
    "has_plateaued",
    "plateau_window",
    "DEFAULT_LR",
    "EUCLIDEAN_MAX_NORM",
    "MAX_RADIUS",
    "RADIUS_CLIP",
    "RSGD_MAX_STEP",
]

log = logging.getLogger(__name__)

#: Default learning rate per optimizer (``lr=None``): Riemannian Adam and RSGD on H^d, Adam for
#: the Euclidean ablation. Chosen on held-out graphs in ``benchmarks/embed`` (README there).
DEFAULT_LR: dict[str, float] = {"radam": 0.05, "rsgd": 0.1, "adam": 0.05}

#: Default κ of the curvature −κ (paper 000 Eq. 11 fixes κ = 1; see ``curvature`` in :func:`embed`).
DEFAULT_CURVATURE = 1.0

#: Euclidean points are read as tangent vectors at the origin and clipped to this norm before
#: ``expmap0`` so that the Poincaré image stays strictly inside the unit ball in float64.
EUCLIDEAN_MAX_NORM = 30.0

#: RSGD moves no point farther than this (hyperbolic distance) in one step: each point's
#: Riemannian gradient is clipped to norm ``RSGD_MAX_STEP / lr`` (a hub collects the gradient of
#: every anchor it is a positive of; unclipped, one step can overflow cosh).
RSGD_MAX_STEP = 1.0

#: Points are kept within this hyperbolic distance of the origin (unit hyperboloid) after every
#: step: ‖e‖ ≤ tanh(6) = 1 − 1.2e-5, Nickel & Kiela's (2017) boundary ε = 1e-5. Farther out,
#: x⁰ = cosh r exceeds 1e5 and the Minkowski products of nearby points lose their digits to
#: cancellation (measured: NaN after 301 epochs at M = 500, d = 2 without it).
RADIUS_CLIP = 12.0

#: Overflow guard: a hyperbolic point farther than this from the origin stops training with a
#: :class:`~cape_pipeline.errors.CapeFitError` (beyond ~37, ‖e‖ = tanh(r/2) rounds to 1 in float64).
MAX_RADIUS = 30.0

#: :func:`auto_batch_size` makes an epoch at most this many optimizer steps.
MAX_STEPS_PER_EPOCH = 20

#: The stopping rule's window holds at least this many optimizer steps ...
WINDOW_MIN_STEPS = 200
#: ... and at least this many epochs.
WINDOW_MIN_EPOCHS = 10

_INIT_SCALE = 1e-3


# ---------------------------------------------------------------------------------------- result
@dataclass
class HyperbolicEmbedding:
    """Positions of M features on H^d, the output of :func:`embed`.

    Attributes
    ----------
    hyperboloid
        ``(M, d+1)`` float64; points p with ⟨p, p⟩_l = −1, p⁰ > 0 (Eq. 11). For
        ``geometry="euclidean"``: ``expmap0`` of the Euclidean points (each x ∈ R^d read as the
        tangent vector (0, x) at the origin, norm clipped to :data:`EUCLIDEAN_MAX_NORM`), so that
        direction and norm order are kept and ``d_l(p, p_o) = ‖x‖``.
    poincare
        ``(M, d)`` float64, e = p̃ / (p⁰ + 1) (Eq. A.22), ‖e‖ < 1. For the Euclidean ablation this
        is ``tanh(‖x‖/2) · x/‖x‖``.
    pagerank
        ``(M,)`` float64, π of Eq. 18 (sums to 1; roots collect mass).
    feature_names
        ``(M,)`` object array of str, row order of every array.
    loss_history
        Mean training loss per epoch (Eq. 15), one float per epoch run.
    params
        Every argument of :func:`embed` plus derived values (``steps_per_epoch``, ``epochs_run``,
        ``converged``, ``n_isolated``, ``n_positive_pairs``, ``runtime_s``) and ``quality``
        (:func:`cape_pipeline.hyperbolic.quality.embedding_quality`).
    geometry
        ``"hyperbolic"`` or ``"euclidean"``.
    graph
        The :class:`~cape_pipeline.causal.graph.CausalGraph` that was embedded.
    euclidean
        ``(M, d)`` float64 raw Euclidean points for ``geometry="euclidean"``, else ``None``.
    """

    hyperboloid: np.ndarray
    poincare: np.ndarray
    pagerank: np.ndarray
    feature_names: np.ndarray
    loss_history: list[float] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    geometry: str = "hyperbolic"
    graph: CausalGraph | None = None
    euclidean: np.ndarray | None = None

    @property
    def dim(self) -> int:
        """Dimension d of the manifold (number of Poincaré coordinates)."""
        return int(self.poincare.shape[1])

    @property
    def n_features(self) -> int:
        """Number of embedded features M."""
        return int(self.poincare.shape[0])

    def distances(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Geodesic distances from ``rows`` (default: all) to every point, ``(len(rows), M)``.

        Hyperbolic: ``arcosh(−⟨p, q⟩_l) / √κ`` for curvature −κ (``params["curvature"]``, 1 when
        absent), the distance the loss was trained on.
        For the Euclidean ablation this returns Euclidean distances between the raw points.
        Dense in M columns: call with a subset of rows for large M.
        """
        idx = np.arange(self.n_features) if rows is None else np.asarray(rows)
        if self.geometry == "euclidean" and self.euclidean is not None:
            x = torch.from_numpy(self.euclidean)
            return _euclid_pairwise(x[idx], x).numpy()
        p = torch.from_numpy(self.hyperboloid)
        kappa = float(self.params.get("curvature") or 1.0)
        return (lorentz.pairwise_dist(p[idx], p) / math.sqrt(kappa)).numpy()

    def __repr__(self) -> str:
        return (
            f"HyperbolicEmbedding(n_features={self.n_features}, dim={self.dim}, "
            f"geometry={self.geometry!r}, epochs={len(self.loss_history)})"
        )


# ---------------------------------------------------------------------------------------- graph
def _max_product(left: sp.csr_array, right: sp.csr_array) -> sp.csr_array:
    """Sparse max-product ``C[m, n] = max_j left[m, j] · right[j, n]`` (non-negative inputs).

    Enumerates the (m, j, n) triples of the join (Σ_j nnz(left[:, j]) · nnz(right[j, :]) of
    them), then max-reduces duplicates; memory is O(#triples), never O(M²).
    """
    m = left.shape[0]
    lc = left.tocoo()
    counts = np.diff(right.indptr)[lc.col]
    total = int(counts.sum())
    if total == 0:
        return sp.csr_array(left.shape, dtype=np.float64)
    rows = np.repeat(lc.row.astype(np.int64), counts)
    lw = np.repeat(lc.data, counts)
    first = np.cumsum(counts) - counts
    idx = np.repeat(right.indptr[lc.col].astype(np.int64), counts) + (
        np.arange(total, dtype=np.int64) - np.repeat(first, counts)
    )
    cols = right.indices[idx].astype(np.int64)
    w = lw * right.data[idx]
    key = rows * m + cols
    order = np.argsort(key, kind="stable")
    key, w = key[order], w[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    wmax = np.maximum.reduceat(w, starts)
    ukey = key[starts]
    return sp.csr_array((wmax, (ukey // m, ukey % m)), shape=left.shape)


def k_hop_positives(adjacency: Any, k: int = 2) -> sp.csr_array:
    """Positive pairs N_k^+ of Eq. 16 with their strongest-path weights, computed sparsely.

    ``W[m, n] = max over directed paths between m and n (either direction) of length ≤ k of the
    product of |A| along the path``; for a direct edge this is ``|A_mn|``. The diagonal is zero.

    Parameters
    ----------
    adjacency
        ``(M, M)`` scipy.sparse or dense array, ``A[m, n] ≠ 0`` ⇔ m → n.
    k
        Maximum path length (paper default 2).

    Returns
    -------
    scipy.sparse.csr_array
        ``(M, M)`` symmetric float64 matrix of positive weights (> 0 exactly on positive pairs).

    Raises
    ------
    CapeConfigError
        If ``k < 1``.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[0, 2.0, 0], [0, 0, 0.5], [0, 0, 0]])
    >>> k_hop_positives(a, k=2).toarray()
    array([[0. , 2. , 1. ],
           [2. , 0. , 0.5],
           [1. , 0.5, 0. ]])
    """
    if int(k) < 1:
        raise CapeConfigError(f"k_hop: expected an integer ≥ 1, got {k!r}")
    a = sp.csr_array(abs(sp.csr_array(adjacency, dtype=np.float64)))
    a.eliminate_zeros()
    a.sort_indices()
    strongest = a.copy()
    power = a
    for _ in range(int(k) - 1):
        power = _max_product(power, a)
        if power.nnz == 0:
            break
        strongest = sp.csr_array(strongest.maximum(power))
    both = sp.csr_array(strongest.maximum(strongest.T)).tolil()
    both.setdiag(0.0)
    out = sp.csr_array(both)
    out.eliminate_zeros()
    out.sort_indices()
    return out


def causal_pagerank(graph: CausalGraph, *, restart: float = 0.15) -> np.ndarray:
    """PageRank π of Eq. 18: a walk from each node to its parents, so roots collect mass.

    Computed with ``networkx.pagerank`` on the *reversed* graph with weights |A| and
    ``alpha = 1 − restart``; dangling nodes (roots, in the reversed graph) restart uniformly.

    Parameters
    ----------
    graph
        The causal DAG.
    restart
        Restart weight w of Eq. 18, in (0, 1).

    Returns
    -------
    numpy.ndarray
        ``(M,)`` float64, positive, sums to 1, in ``graph.feature_names`` order.

    Raises
    ------
    CapeConfigError
        If ``restart`` is not in (0, 1).
    """
    import networkx as nx

    if not 0.0 < float(restart) < 1.0:
        raise CapeConfigError(f"restart: expected a value in (0, 1), got {restart!r}")
    g = nx.DiGraph()
    m = graph.n_features
    g.add_nodes_from(range(m))
    coo = graph.adjacency.tocoo()
    # reversed edges child → parent, weight |A|
    g.add_weighted_edges_from(
        zip(coo.col.tolist(), coo.row.tolist(), np.abs(coo.data).tolist(), strict=True)
    )
    pr = nx.pagerank(g, alpha=1.0 - float(restart), weight="weight", max_iter=1000, tol=1e-12)
    return np.array([pr[i] for i in range(m)], dtype=np.float64)


# ---------------------------------------------------------------------------------------- loss
def _euclid_pairwise(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    sq = (x * x).sum(-1, keepdim=True) + (y * y).sum(-1) - 2.0 * (x @ y.T)
    return torch.sqrt(torch.clamp_min(sq, 1e-24))


def _euclid_dist(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    diff = x - y
    return torch.sqrt(torch.clamp_min((diff * diff).sum(-1), 1e-24))


def _euclid_norm(x: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(torch.clamp_min((x * x).sum(-1), 1e-24))


@dataclass
class _Pairs:
    """Positive pairs of the trained nodes as torch tensors (local node indices 0..n−1)."""

    indptr: torch.Tensor  # (n+1,) long
    indices: torch.Tensor  # (nnz,) long
    weights: torch.Tensor  # (nnz,) float64
    keys: torch.Tensor  # (nnz,) long, row·n + col, ascending (CSR order)
    n_neg: torch.Tensor  # (n,) float64, |N^-(m)| = n − 1 − |N^+(m)|
    n: int

    @classmethod
    def build(cls, positives: sp.csr_array, device: torch.device) -> _Pairs:
        pos = sp.csr_array(positives)
        pos.sort_indices()
        n = pos.shape[0]
        indptr = torch.as_tensor(pos.indptr.astype(np.int64), device=device)
        indices = torch.as_tensor(pos.indices.astype(np.int64), device=device)
        rows = torch.repeat_interleave(torch.arange(n, device=device), indptr[1:] - indptr[:-1])
        deg = (indptr[1:] - indptr[:-1]).to(torch.float64)
        return cls(
            indptr=indptr,
            indices=indices,
            weights=torch.as_tensor(pos.data, dtype=torch.float64, device=device),
            keys=rows * n + indices,
            n_neg=(n - 1) - deg,
            n=n,
        )


def _batch_loss(
    points: torch.Tensor,
    anchors: torch.Tensor,
    pairs: _Pairs,
    pagerank: torch.Tensor,
    *,
    lambda_g: float,
    negatives: int | None,
    hyperbolic: bool,
    generator: torch.Generator,
    scale: float = 1.0,
) -> torch.Tensor:
    """Eq. 15 restricted to a batch of anchors: the *sum* over anchors of L_con + λ_g Ω.

    ``scale`` multiplies every distance: 1/√κ for curvature −κ (points stay on the unit
    hyperboloid; see ``curvature`` in :func:`embed`).

    Never forms an (n, n) matrix: with all negatives the work is (B, n); with ``negatives=K`` it
    is (B, K) plus one distance per positive pair. All index work is in torch on the points'
    device (no host round trip).
    """
    device = points.device
    n = pairs.n
    b = anchors.numel()
    start = pairs.indptr[anchors]
    counts = pairs.indptr[anchors + 1] - start
    total = int(counts.sum())
    row = torch.repeat_interleave(torch.arange(b, device=device), counts, output_size=total)
    first = torch.cumsum(counts, 0) - counts
    ptr = torch.repeat_interleave(start - first, counts, output_size=total) + torch.arange(total, device=device)
    col = pairs.indices[ptr]
    w = pairs.weights[ptr].to(points.dtype)
    x = points[anchors]  # (B, d+1) or (B, d)

    if negatives is None:
        pair = lorentz.pairwise_dist if hyperbolic else _euclid_pairwise
        dmat = scale * pair(x, points)  # (B, n)
        not_neg = torch.zeros((b, n), dtype=torch.bool, device=device)
        not_neg[row, col] = True
        not_neg[torch.arange(b, device=device), anchors] = True
        neg_lse = torch.logsumexp((-dmat).masked_fill(not_neg, -math.inf), dim=1)  # (B,)
        d_pos = dmat[row, col]
    else:
        # K negatives shared by the batch: one (B, d+1) × (d+1, K) product instead of a (B, K, d+1) gather
        samples = torch.randint(0, n, (negatives,), generator=generator).to(device)
        y = points[samples]  # (K, ·)
        pair = lorentz.pairwise_dist if hyperbolic else _euclid_pairwise
        d_neg = scale * pair(x, y)  # (B, K)
        # drop samples that are the anchor itself or one of its positives: a (B, n) boolean mask
        # of this batch's positive rows (bytes, not an n × n matrix), read at the K samples
        is_pos = torch.zeros((b, n), dtype=torch.bool, device=device)
        is_pos[row, col] = True
        is_pos[torch.arange(b, device=device), anchors] = True
        bad = is_pos[:, samples]
        n_valid = (~bad).sum(1).to(points.dtype)
        n_neg = pairs.n_neg[anchors].to(points.dtype)
        # importance correction: the K_valid samples estimate the sum over all |N^-(m)| negatives
        correction = torch.log(n_neg.clamp_min(1.0)) - torch.log(n_valid.clamp_min(1.0))
        neg_lse = torch.logsumexp((-d_neg).masked_fill(bad, -math.inf), dim=1) + correction
        neg_lse = torch.where((n_neg > 0) & (n_valid > 0), neg_lse, torch.full_like(neg_lse, -math.inf))
        pts_col = points[col]
        d_pos = scale * (lorentz.dist(x[row], pts_col) if hyperbolic else _euclid_dist(x[row], pts_col))

    # −w log(e^{−d} / (e^{−d} + S)) = w (d + log(e^{−d} + S)),  S = e^{neg_lse}
    con = (w * (d_pos + torch.logaddexp(-d_pos, neg_lse[row]))).sum()
    d0 = scale * (lorentz.dist0(x) if hyperbolic else _euclid_norm(x))
    reg = (pagerank[anchors] * d0).sum()
    return con + lambda_g * reg


# ---------------------------------------------------------------------------------------- fit
def check_options(
    *,
    dim: int = 64,
    k_hop: int = 2,
    lambda_g: float = 0.1,
    restart: float = 0.15,
    max_epochs: int = 1000,
    batch_size: int | None = None,
    lr: float | None = None,
    optimizer: str = "radam",
    geometry: str = "hyperbolic",
    curvature: float = DEFAULT_CURVATURE,
    negatives: int | None = 512,
    burn_in: int = 10,
    burn_in_factor: float = 0.1,
    tol: float = 1e-3,
    window: int | None = None,
    isolated: str = "origin",
    **_: Any,
) -> None:
    """Validate the options of :func:`embed` without a graph (the pipeline calls this for every
    stage before the first one runs). Options it does not check (``seed``, ``device``,
    ``learn_curvature``) are accepted and ignored.

    Raises
    ------
    CapeConfigError
        Naming the option and what was expected.
    """

    def _int(name: str, v: Any, lo: int) -> None:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise CapeConfigError(f"{name}: expected an integer ≥ {lo}, got {v!r}")

    _int("dim", dim, 1)
    _int("k_hop", k_hop, 1)
    _int("max_epochs", max_epochs, 1)
    if batch_size is not None:
        _int("batch_size", batch_size, 1)
    _int("burn_in", burn_in, 0)
    if negatives is not None:
        _int("negatives", negatives, 1)
    if window is not None:
        _int("window", window, 1)
    if not (math.isfinite(lambda_g) and lambda_g >= 0):
        raise CapeConfigError(f"lambda_g: expected a finite value ≥ 0, got {lambda_g!r}")
    if not 0.0 < restart < 1.0:
        raise CapeConfigError(f"restart: expected a value in (0, 1), got {restart!r}")
    if lr is not None and not (math.isfinite(lr) and lr > 0):
        raise CapeConfigError(f"lr: expected a finite value > 0 (or None for the default), got {lr!r}")
    if not (math.isfinite(burn_in_factor) and 0 < burn_in_factor <= 1):
        raise CapeConfigError(f"burn_in_factor: expected a value in (0, 1], got {burn_in_factor!r}")
    if not (math.isfinite(tol) and tol >= 0):
        raise CapeConfigError(f"tol: expected a finite value ≥ 0 (0 = run max_epochs), got {tol!r}")
    if optimizer not in DEFAULT_LR or optimizer == "adam":
        raise CapeConfigError(f"optimizer: expected 'radam' or 'rsgd', got {optimizer!r}")
    if geometry not in ("hyperbolic", "euclidean"):
        raise CapeConfigError(f"geometry: expected 'hyperbolic' or 'euclidean', got {geometry!r}")
    if isolated not in ("origin", "embed"):
        raise CapeConfigError(f"isolated: expected 'origin' or 'embed', got {isolated!r}")
    if not (math.isfinite(curvature) and curvature > 0):
        raise CapeConfigError(f"curvature: expected a finite κ > 0 (the space has curvature −κ), got {curvature!r}")


def auto_batch_size(n: int) -> int:
    """Default anchors per step for n trained features: ``max(32, ceil(n / 20))``."""
    return max(32, math.ceil(int(n) / MAX_STEPS_PER_EPOCH))


def plateau_window(steps_per_epoch: int, window: int | None = None) -> int:
    """Epochs per window of the stopping rule: ``window``, or by default enough epochs for
    :data:`WINDOW_MIN_STEPS` optimizer steps and at least :data:`WINDOW_MIN_EPOCHS`."""
    if window is not None:
        return int(window)
    return max(WINDOW_MIN_EPOCHS, math.ceil(WINDOW_MIN_STEPS / max(1, steps_per_epoch)))


def has_plateaued(history: list[float], window: int, tol: float) -> bool:
    """The stopping rule of :func:`embed`: relative plateau of the loss over two windows.

    With ``prev`` the mean loss of epochs ``[-2w, -w)`` and ``last`` the mean of the last ``w``,
    training has converged when ``prev − last ≤ tol · |prev|``: the loss fell by less than the
    fraction ``tol`` from one window to the next (or rose). Needs ``2w`` epochs; ``tol = 0``
    never stops. There is deliberately no absolute floor: on small graphs whose positives can
    all be separated the loss keeps shrinking by a constant fraction while edge reconstruction
    still improves (measured on a 121-node tree, d = 16: stopping at loss 0.024 gave mAP 0.88,
    running on to 0.021 gave 1.00), so such fits run to ``max_epochs``.
    """
    if tol <= 0 or len(history) < 2 * window:
        return False
    prev = float(np.mean(history[-2 * window : -window]))
    last = float(np.mean(history[-window:]))
    return prev - last <= tol * abs(prev)


def _clip_riemannian(points: torch.Tensor, manifold: Any, max_norm: float) -> None:
    """Scale each point's gradient so its Riemannian gradient has norm ≤ ``max_norm`` (in place).

    geoopt turns the Euclidean gradient u into the Riemannian one linearly (egrad2rgrad), so
    scaling a row of u scales that point's Riemannian gradient by the same factor.
    """
    g = points.grad
    if g is None:
        return
    with torch.no_grad():
        rg = manifold.egrad2rgrad(points, g.clone())  # geoopt flips the time sign in place
        norm = torch.sqrt(torch.clamp_min(lorentz.minkowski_inner(rg, rg), 0.0))
        factor = torch.clamp(max_norm / torch.clamp_min(norm, 1e-300), max=1.0)
        g.mul_(factor.unsqueeze(-1))


def _clip_radius(points: torch.Tensor, radius: float) -> None:
    """Pull points farther than ``radius`` from the origin back onto that sphere (in place),
    along their geodesic from the origin; the hyperboloid analogue of Nickel & Kiela's projection
    of Poincaré points to ``‖e‖ ≤ 1 − ε``."""
    with torch.no_grad():
        far = points[:, 0] > math.cosh(radius)
        if bool(far.any()):
            u = lorentz.logmap0(points[far])
            u = u * (radius / torch.linalg.vector_norm(u, dim=-1, keepdim=True))
            points[far] = lorentz.expmap0(u)


def _diverged(what: str, lr: float, optimizer: str, epoch: int) -> CapeFitError:
    return CapeFitError(
        f"embed: {what} at epoch {epoch} ({optimizer}, lr={lr:g}); the optimization diverged. "
        f"Lower `lr` (e.g. --set embed.lr={lr / 10:g}) or raise `burn_in`."
    )


def embed(
    graph: CausalGraph,
    *,
    dim: int = 64,
    k_hop: int = 2,
    lambda_g: float = 0.1,
    restart: float = 0.15,
    max_epochs: int = 1000,
    batch_size: int | None = None,
    lr: float | None = None,
    optimizer: str = "radam",
    geometry: str = "hyperbolic",
    curvature: float = DEFAULT_CURVATURE,
    learn_curvature: bool = True,
    negatives: int | None = 512,
    burn_in: int = 10,
    burn_in_factor: float = 0.1,
    tol: float = 1e-3,
    window: int | None = None,
    isolated: str = "origin",
    evaluate: bool = True,
    seed: int = 0,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> HyperbolicEmbedding:
    """Embed a causal DAG on the hyperboloid by regularized graph contrastive learning.

    Minimizes Eq. 15, ``mean_m [L_con(p_m) + λ_g π_m d_l(p_m, p_o)]`` (Eqs. 16–17), over points
    ``p_m ∈ H^d`` (Eq. 11, curvature −1) with Riemannian Adam or Riemannian SGD (Eqs. 19–21) from
    ``geoopt``, in float64, until the loss stops falling.

    **Epochs and stopping.** An epoch is one pass over all trained anchors in a fresh random
    order, in batches of ``batch_size`` (the paper's definition). The first ``burn_in`` epochs
    use ``lr · burn_in_factor`` (the burn-in of Nickel & Kiela 2017, who use 10 epochs at lr/10
    so that the initial, random directions settle before points move outward). After that,
    training stops at the first epoch where :func:`has_plateaued` holds — the mean loss of the
    last ``window`` epochs is less than a fraction ``tol`` below the mean of the ``window``
    before — or at ``max_epochs``. ``params["converged"]`` records which. ``window=None`` uses
    :func:`plateau_window` (≥ 10 epochs and ≥ 200 optimizer steps per window).

    **Negatives.** ``negatives=K`` draws K nodes uniformly per step, shared by the batch's
    anchors (for each anchor, the anchor itself and its positives are dropped from them), and
    estimates the sum over all |N^-(m)| negatives of Eq. 16 as ``|N^-(m)| / K_valid`` times
    the sampled sum. A step then costs one (B × K) distance matrix, O(B·K·d) as a matrix
    product, instead of O(B·M·d) (with shared samples K = 512 is the default: at n = 5000, d = 64 it
    gave mAP 0.69 where K = 128 gave 0.50, for ~25 % more time per step). When K ≥ n − 1 for n trained nodes, all negatives are used (exact
    Eq. 16). ``None``: always all.

    **Isolated features.** A feature with no edge in the DAG has no positive pair, so Eq. 16
    says nothing about where it belongs: as a negative it is only pushed away from the others,
    and its PageRank equals a leaf's. With ``isolated="origin"`` (default) such features are
    not trained, not used as negatives, and placed exactly at the origin p_o, so their Poincaré
    point and rotary angles are 0: no causal information, no rotation (their attention scores are
    those of the model without CAPE). The connected features are embedded among themselves and
    cannot be crowded by hundreds of unconstrained points. ``"embed"`` trains them as the paper's
    text literally implies. ``benchmarks/embed/README.md`` measures both downstream.

    **Step scale.** Each step minimizes the *sum* over the batch's anchors of the summand of
    Eq. 15; the 1/M of Eq. 15 is a constant absorbed in η (irrelevant for Adam).
    ``loss_history`` reports the per-anchor mean, i.e. the value of Eq. 15.

    Parameters
    ----------
    graph
        Causal DAG over M features; ``graph.adjacency[m, n] ≠ 0`` ⇔ m → n with weight A_mn.
    dim
        Manifold dimension d (points live in R^{d+1}); use D/2 for a D-dimensional transformer.
    k_hop
        Positives are nodes joined by a directed path of length ≤ ``k_hop`` in either
        direction, weighted by the strongest path (max product of |A|; see :func:`k_hop_positives`).
    lambda_g
        Weight λ_g of the PageRank regularizer Ω (Eq. 17).
    restart
        Restart weight w of PageRank (Eq. 18); ``networkx.pagerank(alpha=1 − restart)``.
    max_epochs
        Upper bound on epochs (the paper's 1000); training normally stops earlier at the plateau.
    batch_size
        Anchors per optimizer step; ``None`` = :func:`auto_batch_size`: the paper's 32, or
        ``ceil(n / 20)`` for n > 640 trained features so that an epoch is at most 20 steps.
        Why: every step updates all n points (Riemannian Adam's moments are dense; at
        n = 5000, d = 64 that update is ~12 ms on one core) and the number of *steps* to the
        plateau hardly depends on the batch, so big graphs want few, large steps. Measured at
        n = 5000, d = 64 (scale-free, K = 512): batch 32 took 186 s to the plateau with mAP 0.62,
        batch 250 took 97 s with mAP 0.73 (``benchmarks/embed/README.md``).
    lr
        Learning rate η (Eq. 21); ``None`` = :data:`DEFAULT_LR` of the optimizer (Riemannian Adam
        0.05, RSGD 0.1, Euclidean Adam 0.05), chosen in ``benchmarks/embed`` so that defaults
        converge. The paper's 1e-3 leaves points near the origin (measured: max ‖e‖ 0.02).
    optimizer
        ``"radam"`` (``geoopt.optim.RiemannianAdam``) or ``"rsgd"``
        (``geoopt.optim.RiemannianSGD``, Eqs. 19–21). Ignored for ``geometry="euclidean"``.
    geometry
        ``"hyperbolic"`` (default) or ``"euclidean"``: the w/o-hyperbolic ablation of Table 3,
        the same loss with Euclidean distance ‖x − y‖ and regularizer π_m‖x_m‖ in R^d, optimized
        with ``torch.optim.Adam`` under the same schedule and stopping rule. Its points are then
        mapped into H^d by ``expmap0`` (see :class:`HyperbolicEmbedding`) so that downstream
        angles (Step III) work unchanged.
    curvature
        κ > 0 of the curvature −κ (initial value when ``learn_curvature``). Points are kept on
        the unit hyperboloid of Eq. 11 and every distance of the loss is ``d_l / √κ`` (the
        distance on the hyperboloid of curvature −κ), so ``poincare`` stays in the unit ball
        (Poincaré coordinates divided by the curvature radius) and Step III is unchanged.
    learn_curvature
        Learn κ jointly with the points (Adam on log(1/√κ), lr 0.05, the same burn-in); the
        learned value is ``params["curvature"]``. ``False`` with ``curvature=1`` is Eq. 11
        literally. Why learned by default: with κ fixed at 1 the loss plateaus far above the
        Euclidean ablation's and edge-reconstruction mAP falls below it at d = 16 (e.g. 0.44
        vs 0.83 on a 100-node scale-free DAG), because at curvature radius 1 the 2-hop positives
        of a cycle-rich graph cannot be separated from its negatives; a learned κ picks the
        scale at which the space is as curved as the graph is tree-like (hyperbolic-embedding
        practice: Gu et al. 2019, Chami et al. 2019). ``benchmarks/embed`` has both.
    negatives
        Negatives sampled per anchor (see "Negatives"); ``None`` = all.
    burn_in
        Epochs at the reduced learning rate ``lr · burn_in_factor``.
    burn_in_factor
        Factor in (0, 1] applied to ``lr`` during burn-in.
    tol
        Relative plateau tolerance of the stopping rule; 0 disables it (exactly ``max_epochs``).
    window
        Epochs per window of the stopping rule; ``None`` = :func:`plateau_window`.
    isolated
        ``"origin"`` or ``"embed"`` (see "Isolated features").
    evaluate
        Compute :func:`cape_pipeline.hyperbolic.quality.embedding_quality` into
        ``params["quality"]`` (reconstruction mAP, mean rank, distortion, Spearman ρ).
    seed
        Seed of the local ``torch.Generator`` (initial points, anchor order, negative samples).
        Global RNG state is not touched.
    device
        Torch device for the points (float64 on every device, CUDA included).
    progress
        Show a ``rich`` progress bar.

    Returns
    -------
    HyperbolicEmbedding
        ``hyperboloid`` (M, d+1), ``poincare`` (M, d), ``pagerank`` (M,), ``loss_history``
        (one float per epoch run), ``params`` (arguments plus ``epochs_run``, ``steps``,
        ``converged``, ``n_isolated``, ``runtime_s``, ``quality``).

    Raises
    ------
    TypeError
        If ``graph`` is not a :class:`~cape_pipeline.causal.graph.CausalGraph`.
    CapeConfigError
        If a parameter is out of range.
    CapeFitError
        If the loss or a point becomes NaN/inf, or a point runs past distance
        :data:`MAX_RADIUS` from the origin (Poincaré coordinates would round onto the
        boundary); the message names ``lr`` to lower.

    Examples
    --------
    >>> from cape_pipeline.causal.graph import CausalGraph
    >>> g = CausalGraph.from_edges([("a", "b"), ("a", "c"), ("b", "d")])
    >>> emb = embed(g, dim=2, max_epochs=5)
    >>> emb.hyperboloid.shape, emb.poincare.shape
    ((4, 3), (4, 2))
    """
    if not isinstance(graph, CausalGraph):
        raise TypeError(f"graph: expected a CausalGraph, got {type(graph).__name__}")
    check_options(
        dim=dim, k_hop=k_hop, lambda_g=lambda_g, restart=restart, max_epochs=max_epochs, batch_size=batch_size,
        lr=lr, optimizer=optimizer, geometry=geometry, curvature=curvature, negatives=negatives, burn_in=burn_in,
        burn_in_factor=burn_in_factor, tol=tol, window=window, isolated=isolated,
    )
    import geoopt

    t0 = time.perf_counter()
    m = graph.n_features
    hyperbolic = geometry == "hyperbolic"
    opt_name = optimizer if hyperbolic else "adam"
    lr_value = float(lr) if lr is not None else DEFAULT_LR[opt_name]
    device = torch.device(device)
    dtype = torch.float64

    positives = k_hop_positives(graph.adjacency, k_hop)
    pr = causal_pagerank(graph, restart=restart)
    adj = sp.csr_array(graph.adjacency)
    degree = np.diff(adj.indptr) + np.diff(adj.tocsc().indptr)
    if isolated == "origin":
        nodes = np.flatnonzero(degree > 0)
    else:
        nodes = np.arange(m)
    n = int(nodes.size)
    sub = sp.csr_array(positives[nodes][:, nodes])
    pairs = _Pairs.build(sub, device)
    pr_t = torch.as_tensor(pr[nodes], dtype=dtype, device=device)
    exact = negatives is None or negatives >= n - 1
    # distances are arcosh(−⟨p, q⟩_l) · s with s = 1/√κ; learned as log s when learn_curvature
    log_scale = torch.tensor(-0.5 * math.log(curvature) if hyperbolic else 0.0, dtype=dtype, device=device)
    learn_k = hyperbolic and bool(learn_curvature)
    k_neg = None if exact else int(negatives)

    gen = torch.Generator().manual_seed(int(seed))
    u0 = _INIT_SCALE * torch.randn((n, dim), generator=gen, dtype=dtype)
    if hyperbolic:
        manifold = geoopt.Lorentz().to(dtype)
        points = geoopt.ManifoldParameter(lorentz.expmap0(u0).to(device), manifold=manifold)
        opt_cls = geoopt.optim.RiemannianAdam if optimizer == "radam" else geoopt.optim.RiemannianSGD
        opt: torch.optim.Optimizer = opt_cls([points], lr=lr_value, stabilize=10)
    else:
        points = torch.nn.Parameter(u0.to(device))
        opt = torch.optim.Adam([points], lr=lr_value)
    # (optimizer, its learning rate after burn-in): the points', then log(1/√κ)'s when learned
    optimizers: list[tuple[torch.optim.Optimizer, float]] = [(opt, lr_value)]
    if learn_k:
        log_scale = torch.nn.Parameter(log_scale)
        optimizers.append((torch.optim.Adam([log_scale], lr=DEFAULT_LR["adam"]), DEFAULT_LR["adam"]))
    clip_rsgd = hyperbolic and optimizer == "rsgd"
    bsz = max(1, min(auto_batch_size(n) if batch_size is None else int(batch_size), n))
    steps_per_epoch = max(1, math.ceil(n / bsz))
    win = plateau_window(steps_per_epoch, window)
    history: list[float] = []
    converged = False
    steps = 0
    train = n >= 2 and pairs.indices.numel() > 0

    bar = None
    if progress and train:
        from rich.progress import Progress

        from cape_pipeline._progress import progress as _make_progress

        bar = _make_progress(
            lambda: Progress(*Progress.get_default_columns(), "{task.fields[info]}", transient=True), unit="epochs"
        )
        bar.start()
        task = bar.add_task(f"embed ({geometry}, M={m}, d={dim})", total=max_epochs, info="")
    try:
        for epoch in range(max_epochs if train else 0):
            factor = burn_in_factor if epoch < burn_in else 1.0
            cur_lr = lr_value * factor
            for o, base_lr in optimizers:
                for group in o.param_groups:
                    group["lr"] = base_lr * factor
            perm = torch.randperm(n, generator=gen).to(device)
            total = torch.zeros((), dtype=dtype, device=device)
            for s in range(steps_per_epoch):
                anchors = perm[s * bsz : (s + 1) * bsz]
                for o, _ in optimizers:
                    o.zero_grad(set_to_none=True)
                loss = _batch_loss(
                    points, anchors, pairs, pr_t,
                    lambda_g=lambda_g, negatives=k_neg, hyperbolic=hyperbolic, generator=gen,
                    scale=log_scale.exp(),
                )
                loss.backward()
                if clip_rsgd:
                    _clip_riemannian(points, manifold, RSGD_MAX_STEP / cur_lr)
                for o, _ in optimizers:
                    o.step()
                if hyperbolic:
                    _clip_radius(points, RADIUS_CLIP)
                total = total + loss.detach()
            steps += steps_per_epoch
            mean_loss = float(total) / n
            with torch.no_grad():
                finite = bool(torch.isfinite(points).all()) and bool(torch.isfinite(log_scale))
                radius = float(lorentz.dist0(points).max()) if (hyperbolic and finite) else 0.0
            if not (math.isfinite(mean_loss) and finite):
                raise _diverged("the loss or a point became NaN/inf", cur_lr, opt_name, epoch)
            if radius > MAX_RADIUS:
                raise _diverged(
                    f"a point reached hyperbolic distance {radius:.3g} > {MAX_RADIUS:g} from the origin",
                    cur_lr, opt_name, epoch,
                )
            history.append(mean_loss)
            if bar is not None:
                bar.update(task, advance=1, info=f"loss {mean_loss:.4g}")
            if epoch + 1 - burn_in >= 2 * win and has_plateaued(history[burn_in:], win, tol):
                converged = True
                break
    finally:
        if bar is not None:
            bar.stop()
    if not train:
        converged = True
    elif not converged and tol > 0:
        log.warning(
            "embed: the loss had not plateaued after max_epochs=%d (tol %g over %d-epoch windows); "
            "raise max_epochs or lr", max_epochs, tol, win,
        )

    with torch.no_grad():
        raw = points.detach().to("cpu", dtype)
        euclid = None
        if hyperbolic:
            hyp_nodes = lorentz.project(raw)
        else:
            norm = torch.linalg.vector_norm(raw, dim=-1, keepdim=True)
            clip = torch.clamp(EUCLIDEAN_MAX_NORM / torch.clamp_min(norm, 1e-300), max=1.0)
            hyp_nodes = lorentz.expmap0(raw * clip)
            euclid = np.zeros((m, dim), dtype=np.float64)
            euclid[nodes] = raw.numpy()
        hyp = lorentz.expmap0(torch.zeros((m, dim), dtype=dtype))  # isolated: the origin
        hyp[torch.as_tensor(nodes, dtype=torch.long)] = hyp_nodes
        poin = lorentz.to_poincare(hyp)

    params: dict[str, Any] = {
        "method": "cape_contrastive",
        "dim": int(dim),
        "k_hop": int(k_hop),
        "lambda_g": float(lambda_g),
        "restart": float(restart),
        "max_epochs": int(max_epochs),
        "batch_size": None if batch_size is None else int(batch_size),
        "batch_size_used": int(bsz),
        "lr": lr_value,
        "optimizer": opt_name,
        "geometry": geometry,
        "curvature": float(torch.exp(-2.0 * log_scale.detach())) if hyperbolic else None,
        "curvature_init": float(curvature) if hyperbolic else None,
        "learn_curvature": bool(learn_k),
        "negatives": None if negatives is None else int(negatives),
        "negatives_exact": bool(exact),
        "burn_in": int(burn_in),
        "burn_in_factor": float(burn_in_factor),
        "tol": float(tol),
        "window": int(win),
        "isolated": isolated,
        "seed": int(seed),
        "device": str(device),
        "n_trained": n,
        "n_isolated": int((degree == 0).sum()),
        "steps_per_epoch": int(steps_per_epoch),
        "epochs_run": len(history),
        "steps": int(steps),
        "converged": bool(converged),
        "n_positive_pairs": int(positives.nnz // 2),
        "train_s": round(time.perf_counter() - t0, 3),
    }
    emb = HyperbolicEmbedding(
        hyperboloid=hyp.numpy(),
        poincare=poin.numpy(),
        pagerank=pr,
        feature_names=graph.feature_names.copy(),
        loss_history=history,
        params=params,
        geometry=geometry,
        graph=graph,
        euclidean=euclid,
    )
    if evaluate:
        from cape_pipeline.hyperbolic.quality import embedding_quality

        params["quality"] = embedding_quality(emb, seed=seed)
    params["runtime_s"] = round(time.perf_counter() - t0, 3)
    return emb
