"""Acyclicity measures for a low-rank adjacency A = U Vᵀ, pure tensor functions.

Two functions measure how far ``A = U Vᵀ`` (U, V of shape ``(M, r)``) is from a DAG without
forming an ``M × M`` matrix:

* :func:`h_majorant` — NOTEARS' trace exponential (paper 000, Eq. A.1; Zheng et al. 2018)
  applied to the non-negative majorant ``B = |U| |V|ᵀ ≥ |A|`` (elementwise). By the cyclic
  property of the trace, ``tr(exp(B)) − M = tr(exp(|V|ᵀ |U|)) − r``, an ``r × r`` matrix
  exponential, O(M r²) to form the ``r × r`` product.
* :func:`h_spectral` — the spectral radius ``ρ(A ∘ A)`` (NO-BEARS; Lee et al. 2019), zero iff A
  is acyclic, estimated by power iteration with the O(M r²) product
  ``(A ∘ A) x = rowsum((U W) ∘ U)``, ``W = Vᵀ diag(x) V``. Its gradient is the eigenvalue
  perturbation formula ``∂ρ/∂B = u vᵀ / (uᵀ v)`` with left/right Perron vectors u, v, which
  :func:`h_spectral` realises by a differentiable Rayleigh-type quotient with detached vectors.

For a sparse A supported on candidate parents (``A[P[c, j], c] = W[c, j]``, the screened and
learned algorithms), :func:`h_spectral_sparse` is the same spectral radius by power iteration of
sparse products, O(M·k) per iteration. Dense reference versions (:func:`h_dense`,
:func:`spectral_radius_dense`) exist for tests only.
"""

from __future__ import annotations

import torch

__all__ = [
    "h_dense",
    "h_majorant",
    "h_spectral",
    "h_spectral_sparse",
    "hadamard_square_matvec",
    "hadamard_square_rmatvec",
    "power_iteration",
    "spectral_radius_dense",
]


def h_majorant(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Trace-exponential acyclicity of the majorant ``B = |U||V|ᵀ`` (paper 000, Eq. A.1).

    ``h = tr(exp(|V|ᵀ |U|)) − r`` which equals ``tr(exp(B)) − M``; ``h ≥ 0`` and ``h = 0``
    implies B, hence every ``A = U Vᵀ`` with these factors' support, is acyclic.

    Parameters
    ----------
    u, v
        ``(M, r)`` float tensors, the factors of ``A = U Vᵀ``.

    Returns
    -------
    torch.Tensor
        0-dim tensor, differentiable in u and v. Cost O(M r² + r³).
    """
    small = v.abs().T @ u.abs()  # (r, r)
    return torch.linalg.matrix_exp(small).diagonal().sum() - small.shape[0]


def hadamard_square_matvec(
    u: torch.Tensor, v: torch.Tensor, x: torch.Tensor, *, zero_diag: bool = True
) -> torch.Tensor:
    """``(A ∘ A) x`` for ``A = U Vᵀ`` (diagonal removed by default) without forming A.

    ``(A∘A)x = rowsum((U W) ∘ U)`` with ``W = Vᵀ diag(x) V`` (``r × r``).

    Parameters
    ----------
    u, v
        ``(M, r)`` factors.
    x
        ``(M,)`` or ``(M, k)`` vector(s).
    zero_diag
        Use ``A = U Vᵀ − diag(U Vᵀ)`` (the model's A): subtract ``d² ∘ x``, ``d = rowsum(U ∘ V)``.

    Returns
    -------
    torch.Tensor
        Same shape as ``x``. Cost O(M r² k).
    """
    if x.ndim == 1:
        w = v.T @ (x[:, None] * v)  # (r, r)
        out = ((u @ w) * u).sum(dim=1)
    else:
        # (k, r, r): one W per column of x
        w = torch.einsum("mr,mk,ms->krs", v, x, v)
        out = torch.einsum("mr,krs,ms->mk", u, w, u)
    if zero_diag:
        d2 = (u * v).sum(dim=1).pow(2)
        out = out - (d2[:, None] * x if x.ndim == 2 else d2 * x)
    return out


def hadamard_square_rmatvec(
    u: torch.Tensor, v: torch.Tensor, y: torch.Tensor, *, zero_diag: bool = True
) -> torch.Tensor:
    """``(A ∘ A)ᵀ y`` for ``A = U Vᵀ`` (the same formula with U and V swapped)."""
    return hadamard_square_matvec(v, u, y, zero_diag=zero_diag)


def power_iteration(
    u: torch.Tensor,
    v: torch.Tensor,
    n_iter: int = 20,
    x0: torch.Tensor | None = None,
    y0: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right and left Perron vectors and spectral radius of ``A ∘ A`` by power iteration.

    Parameters
    ----------
    u, v
        ``(M, r)`` factors (used without gradient).
    n_iter
        Power-iteration steps (each O(M r²)).
    x0, y0
        ``(M,)`` warm starts for the right / left vectors; default all-ones.

    Returns
    -------
    x, y, rho
        ``(M,)`` non-negative unit-norm right and left vectors and the 0-dim estimate
        ``ρ ≈ ‖(A∘A) x‖ / ‖x‖`` (exact in the limit for a non-negative matrix).
    """
    with torch.no_grad():
        u, v = u.detach(), v.detach()
        m = u.shape[0]
        ones = torch.ones(m, dtype=u.dtype, device=u.device)
        x = ones if x0 is None else x0.detach().abs() + 1e-6
        y = ones if y0 is None else y0.detach().abs() + 1e-6
        x = x / x.norm()
        y = y / y.norm()
        rho = torch.zeros((), dtype=u.dtype, device=u.device)
        for _ in range(n_iter):
            bx = hadamard_square_matvec(u, v, x)
            rho = bx.norm()
            # a tiny uniform floor keeps the iteration alive on nilpotent (acyclic) matrices
            x = bx / rho.clamp_min(1e-30) + 1e-12
            x = x / x.norm()
            by = hadamard_square_rmatvec(u, v, y)
            y = by / by.norm().clamp_min(1e-30) + 1e-12
            y = y / y.norm()
    return x, y, rho


def h_spectral(
    u: torch.Tensor,
    v: torch.Tensor,
    n_iter: int = 20,
    state: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Spectral-radius acyclicity ``h = ρ(A ∘ A)`` for ``A = U Vᵀ`` (NO-BEARS, Lee et al. 2019).

    The Perron vectors come from :func:`power_iteration` (no gradient); the returned value is
    ``yᵀ (A∘A) x / (yᵀ x)``, whose gradient w.r.t. ``A∘A`` is ``y xᵀ / (yᵀ x)``, the
    derivative of a simple eigenvalue. With ``A = U Vᵀ − diag(d)``,
    ``yᵀ (A∘A) x = Σ_kl (Uᵀ diag(y) U)_kl (Vᵀ diag(x) V)_kl − Σ_m y_m d_m² x_m``, O(M r²).

    Parameters
    ----------
    u, v
        ``(M, r)`` float tensors.
    n_iter
        Power-iteration steps.
    state
        Optional dict holding ``"x"``/``"y"`` warm starts; updated in place.

    Returns
    -------
    torch.Tensor
        0-dim, ``≥ 0``, zero iff ``A`` is acyclic (up to power-iteration accuracy).
    """
    x0 = state.get("x") if state is not None else None
    y0 = state.get("y") if state is not None else None
    x, y, _ = power_iteration(u, v, n_iter=n_iter, x0=x0, y0=y0)
    if state is not None:
        state["x"], state["y"] = x, y
    wu = u.T @ (y[:, None] * u)  # (r, r)
    wv = v.T @ (x[:, None] * v)  # (r, r)
    d2 = (u * v).sum(dim=1).pow(2)  # diagonal of A∘A before removal
    return ((wu * wv).sum() - (y * d2 * x).sum()) / (y @ x).clamp_min(1e-30)


def h_dense(b: torch.Tensor) -> torch.Tensor:
    """Reference ``tr(exp(B)) − M`` for a dense ``(M, M)`` matrix B (tests only, O(M³))."""
    return torch.linalg.matrix_exp(b).diagonal().sum() - b.shape[0]


def spectral_radius_dense(b: torch.Tensor) -> torch.Tensor:
    """Reference spectral radius ``max |eig(B)|`` of a dense ``(M, M)`` B (tests only)."""
    return torch.linalg.eigvals(b).abs().max()


def _sparse_matvec(w2: torch.Tensor, idx: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``(B x)[p] = Σ_{c, j: P[c, j] = p} W²[c, j] x[c]`` for ``B = A ∘ A`` (edge p → c)."""
    out = torch.zeros_like(x)
    return out.index_add_(0, idx.reshape(-1), (w2 * x[:, None]).reshape(-1))


def _sparse_rmatvec(w2: torch.Tensor, idx: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``(Bᵀ y)[c] = Σ_j W²[c, j] y[P[c, j]]``."""
    return (w2 * y[idx]).sum(dim=1)


def h_spectral_sparse(
    w: torch.Tensor, idx: torch.Tensor, n_iter: int = 10, state: dict[str, torch.Tensor] | None = None
) -> torch.Tensor:
    """Spectral-radius acyclicity ``ρ(A ∘ A)`` of the screened sparse A (NO-BEARS; SDCD).

    Power iteration (warm-started from ``state``) gives the right/left Perron vectors x, y;
    the value ``yᵀ (A∘A) x / yᵀx`` is differentiable in ``w`` with the eigenvalue-perturbation
    gradient, as :func:`~cape_pipeline.causal.acyclicity.h_spectral`. Cost O(M·k) per
    iteration.

    Parameters
    ----------
    w
        ``(M, k)`` weights, ``A[P[c, j], c] = w[c, j]``.
    idx
        ``(M, k)`` int64 candidate parents ``P``.
    n_iter
        Power-iteration steps.
    state
        Optional dict with warm starts ``"x"``, ``"y"``; updated in place.

    Returns
    -------
    torch.Tensor
        0-dim, ≥ 0, zero iff the support of A with nonzero weights is acyclic.
    """
    m = w.shape[0]
    with torch.no_grad():
        w2 = w.detach().pow(2)
        ones = torch.ones(m, dtype=w.dtype, device=w.device)
        x = ones if state is None or "x" not in state else state["x"].abs() + 1e-6
        y = ones if state is None or "y" not in state else state["y"].abs() + 1e-6
        x, y = x / x.norm(), y / y.norm()
        # no floor: on a DAG whose longest path is shorter than n_iter the iterates reach 0
        # exactly and so does h (with gradient 0); a warm start is re-seeded from |x| + 1e-6
        for _ in range(n_iter):
            bx = _sparse_matvec(w2, idx, x)
            x = bx / bx.norm().clamp_min(1e-30)
            by = _sparse_rmatvec(w2, idx, y)
            y = by / by.norm().clamp_min(1e-30)
        if state is not None:
            state["x"], state["y"] = x, y
    # yᵀ B x = Σ_{c,j} w²[c,j] y[P[c,j]] x[c]
    return (w.pow(2) * y[idx] * x[:, None]).sum() / (y @ x).clamp_min(1e-30)
