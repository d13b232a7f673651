"""Algebraic positional encodings on a tree of features (paper 002, "APE", Sec. 3.3).

A causal DAG is reduced to a spanning forest (:func:`spanning_forest`); a node's position is
its root path, a word over κ branch primitives (:func:`branch_labels`), interpreted as the
product ``A_m = W_{b1} ⋯ W_{bL}`` of orthogonal generators (:class:`APETreePE`), so the score
``q_mᵀ A_mᵀ A_n k_n`` depends on the relative path from m to n only (Eqs. 6–7).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.models.pe.base import PositionalEncoding

__all__ = ["spanning_forest", "branch_labels", "APETreePE"]

def _jumps(m: int) -> int:
    """Number of pointer doublings that cover any chain of ``m`` nodes (2^k ≥ m)."""
    return max(1, math.ceil(math.log2(max(m, 2)))) + 1


def _ancestor_far(parent: np.ndarray) -> np.ndarray:
    """The node 2^k ≥ M steps up from each node (saturating at roots): vectorised pointer
    doubling; a node whose result still has a parent is on, or leads into, a cycle."""
    r = np.where(parent < 0, np.arange(parent.size), parent)
    for _ in range(_jumps(parent.size)):
        r = r[r]
    return r


def spanning_forest(adjacency) -> tuple[np.ndarray, np.ndarray]:
    """Keep each node's strongest parent: the spanning forest of a weighted DAG.

    Parameters
    ----------
    adjacency
        ``(M, M)`` scipy.sparse or dense; ``adjacency[m, n] != 0`` is the edge m → n (m a
        parent of n) of weight ``|adjacency[m, n]|``. Self-loops are ignored.

    Returns
    -------
    parent : np.ndarray
        ``(M,)`` int64, the kept parent of each node (largest ``|weight|``; ties → smallest
        parent index), ``-1`` for roots (children of the virtual root).
    weight : np.ndarray
        ``(M,)`` float64, ``|weight|`` of the kept edge, 0 for roots.

    Raises
    ------
    CapeDataError
        If ``adjacency`` is not square 2-D or holds NaN/inf.

    Notes
    -----
    Reduces a DAG to the trees of paper 002 Sec. 3.3. If the input is not a DAG, the kept
    pointers may form cycles; each is broken by making its node with the weakest kept edge
    (ties → smallest index) a root, found by vectorised pointer doubling (O(M log M)).
    """
    sparse = sp.issparse(adjacency)
    a = sp.coo_matrix(adjacency) if sparse else np.asarray(adjacency)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise CapeDataError(f"adjacency: expected a square (M, M) matrix, got {a.shape}")
    rows, cols = (a.row.astype(np.int64), a.col.astype(np.int64)) if sparse else np.nonzero(a)
    data = np.abs(np.asarray(a.data if sparse else a[rows, cols], dtype=np.float64))
    if not np.isfinite(data).all():
        raise CapeDataError("adjacency: contains NaN or inf weights")
    m, keep = a.shape[0], (data != 0) & (rows != cols)
    rows, cols, data = rows[keep], cols[keep], data[keep]
    order = np.lexsort((rows, -data, cols))  # by child, then strongest, then smallest parent
    rows, cols, data = rows[order], cols[order], data[order]
    first = np.r_[True, cols[1:] != cols[:-1]][: cols.size]
    parent, weight = np.full(m, -1, dtype=np.int64), np.zeros(m, dtype=np.float64)
    parent[cols[first]], weight[cols[first]] = rows[first], data[first]
    far = _ancestor_far(parent)
    stuck = parent[far] >= 0
    if stuck.any():  # far[v] of a stuck node lies on its cycle, and every cycle node is hit
        cyc = np.unique(far[stuck])
        rank = np.argsort(np.lexsort((np.arange(m), weight)))  # 0 = weakest kept edge
        best, jump = rank.copy(), parent.copy()
        for _ in range(_jumps(m)):  # min of rank around each cycle by doubling
            best[cyc] = np.minimum(best[cyc], best[jump[cyc]])
            jump[cyc] = jump[jump[cyc]]
        breakers = cyc[rank[cyc] == best[cyc]]
        parent[breakers], weight[breakers] = -1, 0.0
    return parent, weight


def branch_labels(parent, weight, n_branches: int) -> np.ndarray:
    """Branch primitive (paper 002 Sec. 3.3, the generators 1 … κ) of each node of a forest.

    Parameters
    ----------
    parent, weight
        ``(M,)`` int parent index (``-1``: root; acyclic) and float strength of the edge to it,
        e.g. from :func:`spanning_forest`.
    n_branches
        κ ≥ 1, the number of generators.

    Returns
    -------
    np.ndarray
        ``(M,)`` int64 in ``[0, κ)``. Siblings are ranked by weight descending (roots: by
        subtree size descending), ties by index; rank r gets ``min(r, κ − 1)``: the κ − 1
        strongest children get their own branch, the rest share the last.

    Raises
    ------
    CapeConfigError
        If ``n_branches < 1``.
    CapeDataError
        If shapes differ, ``parent`` is outside ``[-1, M)`` or cyclic, or ``weight`` not finite.
    """
    if int(n_branches) < 1:
        raise CapeConfigError(f"n_branches: expected an integer >= 1, got {n_branches}")
    p, w = _check_parent(parent), np.asarray(weight, dtype=np.float64)
    if w.shape != p.shape or not np.isfinite(w).all():
        raise CapeDataError(f"weight: expected finite values of shape {p.shape}, got {w.shape}")
    m, root = p.size, _ancestor_far(p)
    if (p[root] >= 0).any():
        raise CapeDataError("parent: the pointers contain a cycle (use spanning_forest)")
    size, pos = np.bincount(root, minlength=m).astype(np.float64), np.arange(m)  # root sizes
    order = np.lexsort((pos, -np.where(p < 0, size, w), p))  # by parent, strongest, index
    start = np.r_[True, p[order][1:] != p[order][:-1]][:m]
    rank = pos - np.maximum.accumulate(np.where(start, pos, 0))  # rank among siblings
    return np.minimum(rank, int(n_branches) - 1)[np.argsort(order)].astype(np.int64)


def _check_parent(parent) -> np.ndarray:
    """``parent`` as a 1-D int64 array in ``[-1, M)``, or CapeDataError."""
    p = parent.detach().cpu().numpy() if isinstance(parent, torch.Tensor) else np.asarray(parent)
    if p.ndim != 1:
        raise CapeDataError(f"parent: expected shape (M,), got {p.shape}")
    if p.size and (not np.isfinite(p).all() or (p != np.round(p)).any() or p.min() < -1
                   or p.max() >= p.size):
        raise CapeDataError(f"parent: expected integer indices in [-1, {p.size})")
    return p.astype(np.int64)


class APETreePE(PositionalEncoding):
    """Tree algebraic PE of paper 002 (Sec. 3.3, Eqs. 6–7) on q and k of every layer.

    Feature m's root path ``b1 … bL`` gives ``A_m = W_{b1} ⋯ W_{bL}`` per head, with orthogonal
    generators ``W_b = exp(B_b − B_bᵀ)`` (App. A.1), one set per head shared across layers
    (Sec. 4); q, k become ``A_m q``, ``A_n k``, so the score is ``q_mᵀ A_mᵀ A_n k_n`` (Eq. 7).
    Not equivariant: the buffers ``parent`` and ``branch`` hold feature indices.

    Parameters
    ----------
    parent, weight
        ``(M,)`` arrays or tensors: the forest (:func:`spanning_forest`); ``parent = -1``
        everywhere gives a placeholder to :meth:`load_state_dict` into.
    d_model, n_heads, n_branches
        Model width D, heads H (head size Dh = D / H even), κ generators per head.
    initial_generators, base, noise
        The generators' start: ``"rope"``: ``B_b[2i+1, 2i] = θ_i = base^(−2i/Dh)`` (``W_b`` =
        the interleaved RoPE rotation by θ of :mod:`cape_pipeline.encodings.rope`) plus
        N(0, noise²) entries; ``"identity"``: the N(0, noise²) entries only (``W_b`` ≈ I). Uses
        torch's global RNG.
    init
        Earlier name of ``initial_generators``, taken with a :class:`FutureWarning`.

    Raises
    ------
    CapeConfigError
        ``n_branches < 1``, D not divisible by H, odd Dh, unknown ``initial_generators``,
        ``noise < 0``, or both ``init`` and ``initial_generators`` given.
    CapeDataError
        ``parent``/``weight`` of the wrong shape, out of range, or cyclic.

    Examples
    --------
    >>> import numpy as np, torch
    >>> pe = APETreePE(np.array([-1, 0, 1]), np.ones(3), d_model=8, n_heads=2)
    >>> pe.words(torch.tensor([2, 0])).tolist()
    [[0, 0, 0], [0, -1, -1]]
    >>> f = pe.qk_transform(torch.tensor([[2, 0]]))
    >>> q = torch.randn(1, 2, 3, 4); q2, k2 = f(q, q)
    >>> q2.shape, torch.equal(q2[:, :, 0], q[:, :, 0])
    (torch.Size([1, 2, 3, 4]), True)
    """

    name = "ape-tree"
    equivariant = False

    def __init__(self, parent, weight, d_model: int, n_heads: int, *, n_branches: int = 4,
                 initial_generators: str | None = None, base: float = 10000.0, noise: float = 0.02,
                 init: str | None = None) -> None:
        super().__init__()
        if init is not None:
            if initial_generators is not None:
                raise CapeConfigError("init is the earlier name of initial_generators; give only initial_generators")
            warnings.warn("APETreePE(init=...) is now APETreePE(initial_generators=...); the earlier name will be "
                          "removed", FutureWarning, stacklevel=2)
            initial_generators = init
        initial_generators = "rope" if initial_generators is None else initial_generators
        dh = d_model // max(n_heads, 1)
        if n_heads < 1 or d_model < 1 or d_model % n_heads or dh % 2:
            raise CapeConfigError(
                f"d_model={d_model} must be a positive multiple of n_heads={n_heads} with an "
                "even head size d_model/n_heads"
            )
        if initial_generators not in ("rope", "identity"):
            raise CapeConfigError(f"initial_generators {initial_generators!r} unknown; expected 'rope' or 'identity'")
        if not noise >= 0 or not base > 0:
            raise CapeConfigError(f"noise must be >= 0 and base > 0, got {noise}, {base}")
        w = weight.detach().cpu().numpy() if isinstance(weight, torch.Tensor) else weight
        branch = branch_labels(parent, w, n_branches)  # validates parent, weight, n_branches
        self.n_heads, self.head_dim, self.n_branches = n_heads, dh, int(n_branches)
        self.register_buffer("parent", torch.as_tensor(_check_parent(parent)))
        self.register_buffer("branch", torch.as_tensor(branch))
        gen = torch.randn(n_heads, self.n_branches, dh, dh) * noise
        if initial_generators == "rope":
            i = torch.arange(dh // 2)
            gen[:, :, 2 * i + 1, 2 * i] += base ** (-2.0 * i.double() / dh).float()
        self.generators = nn.Parameter(gen)

    def generator_matrices(self) -> torch.Tensor:
        """The orthogonal generators ``W_b = exp(B_b − B_bᵀ)`` (paper 002 App. A.1): a
        ``(H, K, Dh, Dh)`` float32 tensor, differentiable in :attr:`generators`."""
        b = self.generators.float()
        return torch.linalg.matrix_exp(b - b.transpose(-1, -2))

    def words(self, features: torch.Tensor) -> torch.Tensor:
        """Root paths as words of branch labels (paper 002 Sec. 3.3).

        Parameters
        ----------
        features
            ``(U,)`` long feature indices in ``[0, M)``.

        Returns
        -------
        torch.Tensor
            ``(U, L)`` long: the labels from depth 1 (the child of the virtual root) down to
            the feature, right-padded with -1; L = the largest depth (≥ 1).

        Raises
        ------
        CapeDataError
            If ``features`` is not 1-D or out of range, or the ``parent`` buffer is cyclic.
        """
        m = self.parent.numel()
        f = torch.as_tensor(features, device=self.parent.device).long()
        if f.ndim != 1 or (f.numel() and (f.min() < 0 or f.max() >= m)):
            raise CapeDataError(f"features: expected a 1-D tensor of indices in [0, {m})")
        cols, cur = [], f
        while bool((cur >= 0).any()):  # one step up per depth, all features at once
            if len(cols) > m:
                raise CapeDataError("parent: the pointers contain a cycle")
            ok, c = cur >= 0, cur.clamp(min=0)
            cols.append(torch.where(ok, self.branch[c], -1))
            cur = torch.where(ok, self.parent[c], -1)
        up = torch.stack(cols, 1) if cols else f.new_full((f.numel(), 1), -1)  # (U, L) bottom-up: column j = the j-th ancestor's label
        depth = (up >= 0).sum(1, keepdim=True)
        src = depth - 1 - torch.arange(up.shape[1], device=f.device)  # reverse each row
        return torch.where(src >= 0, up.gather(1, src.clamp(min=0)), -1)

    def maps(self, features: torch.Tensor) -> torch.Tensor:
        """Absolute positions ``A_m = W_{b1} W_{b2} ⋯ W_{bL}`` (paper 002 Sec. 3.3): from
        identities, right-multiply depth by depth by that depth's generator (padding: I).

        Parameters
        ----------
        features
            ``(U,)`` long feature indices in ``[0, M)``.

        Returns
        -------
        torch.Tensor
            ``(U, H, Dh, Dh)`` float32, orthogonal. Raises as :meth:`words`.
        """
        word, gens, dh = self.words(features), self.generator_matrices(), self.head_dim
        a = torch.eye(dh, device=gens.device).expand(word.shape[0], self.n_heads, dh, dh)
        for lab in word.T:  # one depth at a time, all features at once
            step = gens[:, lab.clamp(min=0)].transpose(0, 1)  # (U, H, Dh, Dh)
            a = torch.where((lab >= 0)[:, None, None, None], a @ step, a)
        return a

    def qk_transform(self, idx: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor], tuple]:
        """Map per-head queries and keys by their feature's ``A_m`` (paper 002 Eq. 7).

        Parameters
        ----------
        idx
            ``(B, T)`` long feature index of each token.

        Returns
        -------
        Callable
            ``f(q, k) -> (q̃, k̃)``, q, k ``(B, H, 1+T, Dh)``: token t+1 gets ``A_m q``, ``A_m k``
            with ``m = idx[b, t]``; position 0 (<cls>) is unchanged. Maps are computed for the
            batch's distinct features only; the per-token maps take B·T·H·Dh² floats.
        """
        uniq, inv = torch.unique(idx, return_inverse=True)
        per_tok = self.maps(uniq)[inv].permute(0, 2, 1, 3, 4)  # (B, H, T, Dh, Dh)

        def transform(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            with torch.autocast(device_type=q.device.type, enabled=False):
                x = torch.stack([q, k]).float()  # (2, B, H, 1+T, Dh)
                y = torch.einsum("bhtij,sbhtj->sbhti", per_tok, x[:, :, :, 1:])
                y = torch.cat([x[:, :, :, :1], y], dim=3)
            return y[0].to(q.dtype), y[1].to(k.dtype)

        return transform
