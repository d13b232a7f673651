"""Paper 000's theory figures as runnable checks: Fig. S2 (Props. 4.1/4.2) and Fig. S3 (Prop. A.10).

Notation (Sec. 3.5, App. A.3–A.6): ``q, k ∈ R^D``, ``d = D/2`` pairs ``(2t, 2t+1)`` (0-based), angles
``φ = c·e``, ``c = π/4``, ``e`` in the unit Poincaré ball; score ``A = qᵀ R(φ_n − φ_m) k`` (Eqs. A.50,
A.56), ``α_t = q_{2t} k_{2t} + q_{2t+1} k_{2t+1}``, ``β_t = q_{2t+1} k_{2t} − q_{2t} k_{2t+1}``.
Expanding A.56 gives ``Σ α_t cos(φ_m − φ_n) − β_t sin(φ_m − φ_n)``; the paper's last line has ``+β_t``,
a slip that changes nothing here (the bound uses ``|β_t|``, the noise is symmetric).
"""

from __future__ import annotations

import math
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cape_pipeline._utils import atomic_path, write_json_atomic
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.paper.common import (
    jsonable,
    machine_info,
    new_figure,
    output_dir,
    save_png,
    versions,
)

__all__ = ["FIGS2_FILES", "FIGS3_FILES", "BiasNoise", "BoundSurface", "attention_bias_noise", "attention_bound_surface",
           "attention_score", "monotonicity_report", "reproduce_figS2", "reproduce_figS3"]

#: angle scale c of φ = c·e (Remark A.1)
ANGLE_SCALE = math.pi / 4
FIGS2_FILES = {"surface": "figS2_bound_surface.png", "table": "figS2_bound.csv", "summary": "figS2.json"}
FIGS3_FILES = {"scatter": "figS3_bias.png", "table": "figS3_xi.csv", "stats": "figS3_stats.csv", "summary": "figS3.json"}


def _int(value: Any, name: str, low: int, high: int | None = None, *, even: bool = False) -> int:
    ok = not isinstance(value, bool) and isinstance(value, (int, np.integer))
    if not ok or value < low or (high is not None and value > high) or (even and value % 2):
        rng = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise CapeConfigError(f"{name}: expected an {'even ' if even else ''}integer {rng}, got {value!r}")
    return int(value)


def _grid(values: Any, name: str, low: float, high: float) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    if a.ndim != 1 or a.size < 2 or not np.isfinite(a).all() or (np.diff(a) <= 0).any() or a[0] <= low or a[-1] >= high:
        raise CapeConfigError(f"{name}: expected >= 2 strictly increasing values in ({low:g}, {high:g})")
    return a


def _alpha_beta(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """α_t, β_t of Eq. A.56 for q, k of shape (..., D): two (..., d) arrays."""
    q1, q2, k1, k2 = q[..., 0::2], q[..., 1::2], k[..., 0::2], k[..., 1::2]
    return q1 * k1 + q2 * k2, q2 * k1 - q1 * k2


def attention_score(q: Any, k: Any, phi_m: Any, phi_n: Any) -> np.ndarray:
    """Rotary attention score ``A = qᵀ R(φ_n − φ_m) k`` (paper 000, Eqs. A.50 and A.56).

    Parameters
    ----------
    q, k
        ``(D,)`` query and key (D even).
    phi_m, phi_n
        ``(..., d)`` angles in radians, d = D/2; leading axes broadcast.

    Returns
    -------
    numpy.ndarray
        ``(...)`` scores, ``Σ_t α_t cos Δ_t + β_t sin Δ_t`` with ``Δ = φ_n − φ_m``.

    Raises
    ------
    CapeConfigError
        ``q``/``k`` not 1-D of the same even length, or angles whose last axis is not D/2.

    Examples
    --------
    >>> attention_score([1.0, 0.0], [0.0, 1.0], [0.0], [math.pi / 2]).round(6)
    np.float64(-1.0)
    """
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    if q.ndim != 1 or q.shape != k.shape or q.size % 2:
        raise CapeConfigError(f"q, k: expected two 1-D arrays of one even length, got {q.shape}, {k.shape}")
    delta = np.asarray(phi_n, dtype=np.float64) - np.asarray(phi_m, dtype=np.float64)
    if delta.shape[-1:] != (q.size // 2,):
        raise CapeConfigError(f"phi_m, phi_n: last axis must be D/2 = {q.size // 2}, got {delta.shape}")
    alpha, beta = _alpha_beta(q, k)
    return np.cos(delta) @ alpha + np.sin(delta) @ beta


def _poincare_distance(e_m: np.ndarray, e_n: np.ndarray) -> np.ndarray:
    """Poincaré-ball distance (Eq. 28) over the last axis of ``(..., d)`` arrays inside the ball."""
    sq_m, sq_n = (e_m**2).sum(-1), (e_n**2).sum(-1)
    return np.arccosh(1 + 2 * ((e_m - e_n) ** 2).sum(-1) / ((1 - sq_m) * (1 - sq_n)))


def monotonicity_report(values: Any, coords: Any, other: Any, *, axis: int, names: tuple[str, str]) -> dict[str, Any]:
    """Check that ``values`` strictly decreases along ``axis`` as ``coords`` increases.

    Parameters
    ----------
    values
        2-D array; NaN cells are skipped (a step counts only if both ends are finite).
    coords, other
        Increasing coordinates along ``axis`` (0 or 1) and along the other axis.
    names
        ``(name of coords, name of other)`` used in the listed locations.

    Returns
    -------
    dict
        ``n_steps``, ``fraction_decreasing`` (``change < 0``), ``n_not_decreasing``,
        ``max_change`` (< 0 when monotone) and ``not_decreasing``: up to 50 steps
        ``{names[0] + "_from", names[0] + "_to", names[1], "change"}``.

    Raises
    ------
    CapeConfigError
        Shapes that do not match or coordinates that do not increase.
    """
    v = np.moveaxis(np.asarray(values, dtype=np.float64), axis, 0)
    coords, other = np.asarray(coords, dtype=np.float64), np.asarray(other, dtype=np.float64)
    if v.ndim != 2 or v.shape != (coords.size, other.size) or (np.diff(coords) <= 0).any():
        raise CapeConfigError("values, coords: expected a 2-D array and increasing coordinates matching its axes")
    change = np.diff(v, axis=0)
    valid = np.isfinite(change)
    bad, n = valid & (change >= 0), int(valid.sum())
    locations = [{f"{names[0]}_from": coords[i], f"{names[0]}_to": coords[i + 1], names[1]: other[j],
                  "change": change[i, j]} for i, j in np.argwhere(bad)[:50]]
    return {"n_steps": n, "fraction_decreasing": float((valid & (change < 0)).sum() / n) if n else None,
            "n_not_decreasing": int(bad.sum()), "max_change": float(change[valid].max()) if n else None,
            "not_decreasing": locations}


@dataclass(frozen=True)
class BoundSurface:
    """A⁺ over a grid of Poincaré distance × norm; see :func:`attention_bound_surface`."""

    distance: np.ndarray  #: (n_d,) Poincaré distance d_p
    norm: np.ndarray  #: (n_r,) r = ‖e_m‖ = ‖e_n‖
    a_plus: np.ndarray  #: (n_d, n_r) upper bound A⁺ (Eq. A.59); A⁻ = −A⁺ (Eq. A.60)
    delta_norm: np.ndarray  #: (n_d, n_r) ‖e_m − e_n‖ from Eq. A.70
    feasible: np.ndarray  #: (n_d, n_r) bool, a pair with these norms and distance exists (‖Δ‖ ≤ 2r)
    score: np.ndarray  #: (n_d, n_r) A (Eq. A.56) at a constructed pair; NaN where infeasible
    distance_check: np.ndarray  #: (n_d, n_r) Eq. 28 recomputed at that pair; NaN where infeasible
    alpha_star: float  #: |α*| = max_t |α_t|
    beta_abs_sum: float  #: Σ_t |β_t|
    dim: int  #: D


def attention_bound_surface(distance: Any, norm: Any, *, dim: int = 128, seed: int = 0) -> BoundSurface:
    """Upper bound A⁺ of the attention score over Poincaré distance and norm (Fig. S2).

    Implements Eq. A.59, ``A⁺ = |α*|·d·cos(‖φ_m − φ_n‖ / d) + Σ_t |β_t|`` with φ = (π/4)e, and
    Eq. A.70 for ``‖e_m − e_n‖`` at fixed distance, which with equal norms ``r = ‖e_m‖ = ‖e_n‖``
    (App. G.1.1) is ``(1 − r²)·sinh(d_p/2)``; one draw ``q, k ~ N(0, I_D)`` (App. G.1). A⁺ is
    computed as ``|α*|d + Σ|β| − 2|α*|d·sin²(x/2)`` (the same number, without cancellation).

    Reading: App. G.1.1 lets ``(d_p, r)`` cover ``[1, 5] × (0, 1)``, but two points of norm ``r``
    are at most ``2r`` apart, so part of it holds no pair (``feasible`` False; ``d_p = 5`` needs
    ``r > 0.72``). The closed form covers the whole grid; at feasible cells a pair ``e_m = r u``,
    ``e_n = r(cos θ u + sin θ w)`` (random orthonormal ``u, w``) gives Eq. 28 and A (Eq. A.56) again.

    Parameters
    ----------
    distance, norm
        ``(n_d,)`` increasing Poincaré distances ``d_p > 0`` (paper: [1, 5]) and ``(n_r,)``
        increasing norms in (0, 1); causal generality ψ = 1 − r (Def. 4.1).
    dim, seed
        D, even, >= 4 (paper: 128, so d = 64); seed of q, k and the pair directions.

    Returns
    -------
    BoundSurface
        Arrays of shape ``(n_d, n_r)`` (see the class).

    Raises
    ------
    CapeConfigError
        Bad ``distance``, ``norm``, ``dim`` or ``seed`` (named).

    Examples
    --------
    >>> s = attention_bound_surface([1.0, 3.0, 5.0], [0.5, 0.9], dim=8)
    >>> bool((np.diff(s.a_plus, axis=0) < 0).all()), bool((np.diff(s.a_plus, axis=1) > 0).all())
    (True, True)
    """
    dist, r = _grid(distance, "distance", 0.0, math.inf), _grid(norm, "norm", 0.0, 1.0)
    dim, seed = _int(dim, "dim", 4, even=True), _int(seed, "seed", 0, 2**32 - 1)
    d, rng = dim // 2, np.random.default_rng(seed)
    q, k = rng.standard_normal(dim), rng.standard_normal(dim)
    alpha, beta = _alpha_beta(q, k)
    alpha_star, beta_sum = float(np.abs(alpha).max()), float(np.abs(beta).sum())
    delta = (1 - r[None, :] ** 2) * np.sinh(dist[:, None] / 2)  # Eq. A.70, equal norms
    x = ANGLE_SCALE * delta / d  # ‖φ_m − φ_n‖ / d
    a_plus = alpha_star * d + beta_sum - 2 * alpha_star * d * np.sin(x / 2) ** 2  # Eq. A.59
    feasible = delta <= 2 * r[None, :]

    # a concrete pair at every feasible cell: angle θ between e_m and e_n from ‖Δ‖² = 2r²(1 − cos θ)
    u, w = np.linalg.qr(rng.standard_normal((d, 2)))[0].T
    rr = np.broadcast_to(r[None, :], delta.shape)
    cos_t = np.where(feasible, 1 - delta**2 / (2 * rr**2), 1.0).clip(-1, 1)
    e_m, e_n = rr[..., None] * u, rr[..., None] * (cos_t[..., None] * u + np.sqrt(1 - cos_t**2)[..., None] * w)
    score = np.where(feasible, attention_score(q, k, ANGLE_SCALE * e_m, ANGLE_SCALE * e_n), np.nan)
    check = np.where(feasible, _poincare_distance(e_m, e_n), np.nan)
    return BoundSurface(dist, r, a_plus, delta, feasible, score, check, alpha_star, beta_sum, dim)


@dataclass(frozen=True)
class BiasNoise:
    """ξ_N draws of :func:`attention_bias_noise`."""

    sigma: np.ndarray  #: (n_sigma,) noise standard deviations as given
    n: np.ndarray  #: (n_n,) N = 1 … n_max
    xi: np.ndarray  #: (n_sigma, n_n, T) average attention bias ξ_N (Eq. A.95)
    expected_bias: np.ndarray  #: (n_sigma,) E(ξ_N) from Eq. A.101 (the same for every N)
    hoeffding_s: float  #: S = (‖q‖‖k‖)² of Eq. A.96 (q, k fixed)
    score: float  #: A(q, k, e_m − e_n) without noise
    angle_sigma: np.ndarray  #: (n_sigma,) per-angle noise sd, σ (angle) or c·σ (position)
    noise: str  #: "angle" or "position"
    dim: int  #: D


def attention_bias_noise(sigma: Any = (0.1, 0.2, 0.3), *, n_max: int = 100, repeats: int = 100, dim: int = 128,
                         noise: str = "angle", seed: int = 0) -> BiasNoise:
    """Average attention bias ξ_N under Gaussian positional noise (Prop. A.10, Fig. S3).

    Implements Eq. A.95, ``ξ_N = (1/N) Σ_i A(q, k, e'_m − e'_n) − A(q, k, e_m − e_n)``, with
    one fixed ``q, k ~ N(0, I_D)`` (App. G.1) and one pair ``e_m, e_n`` drawn as in App. G.1.1
    (isotropic Gaussian direction, norm ~ U(0, 1)); observation i has its own noise pair
    ``ε_m^i, ε_n^i ~ N(0, σ² I_d)``. For every N = 1 … ``n_max`` the experiment is repeated
    ``repeats`` times with fresh noise (App. G.1.3); draws for different N are independent.

    Readings: ``noise="angle"`` adds ε to the angles φ (the proof's δ_mn, Eqs. A.85–A.86,
    and Remark A.4's σ in radians); ``noise="position"`` adds it to e
    (Prop. 4.3, App. G.1.3 text), i.e. angle noise c·σ. Only ``ε_m − ε_n ~ N(0, 2σ² I)`` enters
    the score, so that difference is drawn directly. "Diag(σ)" in App. G.1.3 is read as standard
    deviations σ (its text says so). With q, k fixed the mean is not exactly 0:
    ``E(ξ_N) = (exp(−σ²) − 1)·A(q, k, e_m − e_n)`` (Eq. A.101 with σ_m = σ_n, angle units),
    reported as ``expected_bias``; the paper approximates it by 0 (Eq. A.102).

    Parameters
    ----------
    sigma
        Noise standard deviations, each in (0, π/4] (paper: 0.1, 0.2, 0.3).
    n_max, repeats
        Largest N (paper: 100) and T >= 2, repetitions per N (paper: 100).
    dim, noise, seed
        D, even (paper: 128); ``"angle"`` or ``"position"`` (see above); seed of q, k, the pair
        and the noise.

    Returns
    -------
    BiasNoise
        ``xi`` of shape ``(n_sigma, n_max, repeats)``.

    Raises
    ------
    CapeConfigError
        Bad ``sigma``, ``n_max``, ``repeats``, ``dim``, ``noise`` or ``seed`` (named).

    Examples
    --------
    >>> b = attention_bias_noise([0.2], n_max=30, repeats=50, dim=16)
    >>> sd = b.xi[0].std(axis=1)
    >>> bool(sd[-5:].mean() < sd[:5].mean())
    True
    """
    sig = np.atleast_1d(np.asarray(sigma, dtype=np.float64))
    if sig.ndim != 1 or not sig.size or not np.isfinite(sig).all() or (sig <= 0).any() or (sig > ANGLE_SCALE).any():
        raise CapeConfigError(f"sigma: expected noise standard deviations in (0, pi/4], got {sigma!r}")
    n_max, repeats = _int(n_max, "n_max", 1, 1000), _int(repeats, "repeats", 2, 10_000)
    dim, seed = _int(dim, "dim", 2, even=True), _int(seed, "seed", 0, 2**32 - 1)
    if noise not in ("angle", "position"):
        raise CapeConfigError(f"noise: expected 'angle' or 'position', got {noise!r}")
    d, rng = dim // 2, np.random.default_rng(seed)
    q, k = rng.standard_normal(dim), rng.standard_normal(dim)
    alpha, beta = _alpha_beta(q, k)
    e = rng.standard_normal((2, d))
    e *= (rng.uniform(0, 1, size=(2, 1)) / np.linalg.norm(e, axis=1, keepdims=True))
    delta = ANGLE_SCALE * (e[1] - e[0])  # φ_n − φ_m
    score = float(np.cos(delta) @ alpha + np.sin(delta) @ beta)
    angle_sig = sig * (ANGLE_SCALE if noise == "position" else 1.0)
    ns = np.arange(1, n_max + 1)
    # draws in chunks of consecutive N (<= ~4M angles each), summed per (repeat, N) by reduceat
    chunks = np.split(ns, np.flatnonzero(np.diff(np.cumsum(ns) * repeats * d >> 22)) + 1)
    xi = np.empty((sig.size, n_max, repeats))
    for s, sd in enumerate(angle_sig):
        parts = []
        for block in chunks:
            eta = rng.normal(0.0, sd * math.sqrt(2), size=(repeats, int(block.sum()), d))
            ang = delta + eta
            terms = np.cos(ang) @ alpha + np.sin(ang) @ beta - score  # (T, Σ N)
            parts.append(np.add.reduceat(terms, np.cumsum(block) - block, axis=1) / block)
        xi[s] = np.concatenate(parts, axis=1).T
    expected = (np.exp(-(angle_sig**2)) - 1) * score  # Eq. A.101, σ_m = σ_n
    s_hoeff = float((np.linalg.norm(q) * np.linalg.norm(k)) ** 2)
    return BiasNoise(sig, ns, xi, expected, s_hoeff, score, angle_sig, noise, dim)


def _record(figure: str, command: list[str], seed: int, runtime: dict[str, float], files: dict[str, Path],
            body: dict[str, Any]) -> dict[str, Any]:
    """The JSON record (strict JSON) written to ``files["summary"]`` and returned."""
    record = jsonable({"figure": figure, "command": shlex.join(command), "seed": seed, **body,
                       "runtime_s": {k: round(v, 3) for k, v in runtime.items()}, "machine": machine_info(),
                       "versions": versions(), "files": {role: str(p) for role, p in files.items()}})
    write_json_atomic(files["summary"], record)
    return record


def _plot_s2(s: BoundSurface, path: Path) -> None:
    """Fig. S2: 3-D surface of A⁺ over (d_p, ψ) and a map of A⁺ − max A⁺ with the feasible edge."""
    fig = new_figure((12, 5))
    ax3: Any = fig.add_subplot(1, 2, 1, projection="3d")
    gd, gp = np.meshgrid(s.distance, 1 - s.norm, indexing="ij")
    ax3.plot_surface(gd, gp, s.a_plus, cmap="viridis", linewidth=0, antialiased=True)
    ax3.set(zlabel="$A^+$", title=f"Fig. S2: upper bound $A^+$ (Eq. A.59), D = {s.dim}")
    ax2 = fig.add_subplot(1, 2, 2)
    im = ax2.pcolormesh(s.distance, 1 - s.norm, (s.a_plus - s.a_plus.max()).T, shading="auto", cmap="viridis")
    ax2.contour(s.distance, 1 - s.norm, s.feasible.T.astype(float), levels=[0.5], colors="r")
    fig.colorbar(im, ax=ax2, label="$A^+ - \\max A^+$")
    ax2.set_title("attenuation; red: edge of feasible pairs (‖Δe‖ = 2r, feasible below)", fontsize=9)
    for ax in (ax3, ax2):
        ax.set(xlabel="Poincaré distance $d_p$", ylabel="causal generality ψ = 1 − r")
    save_png(fig, path)


def _plot_s3(b: BiasNoise, path: Path) -> None:
    """Fig. S3: one scatter panel of ξ_N against N per σ, zero line red, E(ξ_N) dashed."""
    fig = new_figure((4.2 * b.sigma.size, 4))
    axes = np.atleast_1d(fig.subplots(1, b.sigma.size, sharey=True))
    for s, ax in enumerate(axes):
        ax.scatter(np.repeat(b.n, b.xi.shape[2]), b.xi[s].ravel(), s=3, alpha=0.25, color="tab:blue", linewidths=0)
        ax.axhline(0, color="r", lw=1.2)
        ax.axhline(b.expected_bias[s], color="k", lw=0.8, ls="--", label="E(ξ_N), Eq. A.101")
        ax.set(title=f"σ = {b.sigma[s]:g} ({b.noise} noise)", xlabel="N (noise pairs)")
    axes[0].set_ylabel("average attention bias ξ_N (Eq. A.95)")
    axes[0].legend(loc="upper right", fontsize=8)
    save_png(fig, path)


def _write_csv(frame: pd.DataFrame, path: Path) -> None:  # atomic, 12 significant digits
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.12g")


def reproduce_figS2(out: str | os.PathLike[str], *, seed: int = 0, n_distance: int = 81, n_norm: int = 99,
                    dim: int = 128) -> dict[str, Any]:
    """Reproduce Fig. S2 of paper 000 (App. G.1.1): A⁺ over Poincaré distance × causal generality.

    Grid ``d_p = linspace(1, 5, n_distance)``, ``r = linspace(0.01, 0.99, n_norm)``
    (ψ = 1 − r), surface from :func:`attention_bound_surface`. Checks Prop. 4.1 (A⁺ decreases
    as d_p grows at fixed r) and Prop. 4.2 (A⁺ decreases as ψ grows at fixed d_p) step by step,
    on the whole grid and on the feasible cells, plus |A| ≤ A⁺ at the constructed pairs.

    Parameters
    ----------
    out
        Output directory (created); files replaced atomically.
    seed, dim
        As in :func:`attention_bound_surface`.
    n_distance, n_norm
        Grid sizes, each >= 2.

    Returns
    -------
    dict
        ``figS2.json``: ``monotonic_in_distance``, ``monotonic_in_generality`` (each ``{"all": report,
        "feasible": report}``, :func:`monotonicity_report`), ``a_plus_range``, ``relative_variation``
        ((max − min)/max), ``alpha_star``, ``beta_abs_sum``, ``feasible_fraction``, ``bound_holds``
        (share of feasible cells with |A| ≤ A⁺), ``distance_check_max_error``, ``command``, ``seed``,
        ``runtime_s``, ``machine``, ``versions``, ``files``. Also written: ``figS2_bound_surface.png``,
        ``figS2_bound.csv`` (a row per cell: ``distance``, ``norm``, ``generality``, ``a_plus``,
        ``a_minus``, ``attenuation`` = A⁺ − max A⁺, ``delta_norm``, ``feasible``, ``score``).

    Raises
    ------
    CapeConfigError
        Bad ``seed``, ``n_distance``, ``n_norm`` or ``dim`` (named).
    CapeFileError
        ``out`` exists and is not a directory.
    """
    n_distance, n_norm = _int(n_distance, "n_distance", 2, 10_000), _int(n_norm, "n_norm", 2, 10_000)
    seed, dim = _int(seed, "seed", 0, 2**32 - 1), _int(dim, "dim", 4, even=True)
    out = output_dir(out)
    t0 = time.perf_counter()
    s = attention_bound_surface(np.linspace(1, 5, n_distance), np.linspace(0.01, 0.99, n_norm), dim=dim, seed=seed)
    runtime = {"compute": time.perf_counter() - t0}
    mono_d, mono_g = {}, {}
    for part, a in (("all", s.a_plus), ("feasible", np.where(s.feasible, s.a_plus, np.nan))):
        mono_d[part] = monotonicity_report(a, s.distance, s.norm, axis=0, names=("distance", "norm"))
        # ψ = 1 − r increases as r decreases: reverse the norm axis
        mono_g[part] = monotonicity_report(a[:, ::-1], 1 - s.norm[::-1], s.distance, axis=1,
                                           names=("generality", "distance"))
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    files = {role: out / name for role, name in FIGS2_FILES.items()}
    _plot_s2(s, files["surface"])
    top, feas = s.a_plus.max(), s.feasible
    gd, gr = np.meshgrid(s.distance, s.norm, indexing="ij")
    _write_csv(pd.DataFrame({"distance": gd.ravel(), "norm": gr.ravel(), "generality": 1 - gr.ravel(),
                             "a_plus": s.a_plus.ravel(), "a_minus": -s.a_plus.ravel(),
                             "attenuation": (s.a_plus - top).ravel(), "delta_norm": s.delta_norm.ravel(),
                             "feasible": feas.ravel(), "score": s.score.ravel()}), files["table"])
    runtime["outputs"] = time.perf_counter() - t0
    body = {"dim": dim, "d": dim // 2, "angle_scale": ANGLE_SCALE, "alpha_star": s.alpha_star,
            "grid": {"distance": [1.0, 5.0, n_distance], "norm": [0.01, 0.99, n_norm]}, "beta_abs_sum": s.beta_abs_sum,
            "a_plus_range": [s.a_plus.min(), top], "relative_variation": (top - s.a_plus.min()) / top,
            "feasible_fraction": feas.mean(),
            "bound_holds": float((np.abs(s.score[feas]) <= s.a_plus[feas]).mean()) if feas.any() else None,
            "distance_check_max_error": float(np.nanmax(np.abs(s.distance_check - gd))) if feas.any() else None,
            "monotonic_in_distance": mono_d, "monotonic_in_generality": mono_g}
    command = ["cape", "reproduce", "figS2", "--out", str(out), "--seed", str(seed),
               "--n-distance", str(n_distance), "--n-norm", str(n_norm), "--dim", str(dim)]
    return _record("paper 000, App. G.1.1, Fig. S2 (Props. 4.1, 4.2)", command, seed, runtime, files, body)


def reproduce_figS3(out: str | os.PathLike[str], *, seed: int = 0, sigma: Any = (0.1, 0.2, 0.3), n_max: int = 100,
                    repeats: int = 100, dim: int = 128, noise: str = "angle") -> dict[str, Any]:
    """Reproduce Fig. S3 of paper 000 (App. G.1.3): ξ_N against N per noise level (Prop. A.10).

    Draws from :func:`attention_bias_noise`; per σ and N the mean, sd, max |ξ_N| and 95th
    percentile of |ξ_N| over the T repeats; per σ the log–log slope of sd against N (−0.5 by the
    CLT), ``spread_shrinks`` (slope < 0, and sd and max |ξ_N| over the last tenth of N below
    those over the first tenth), the pooled mean of all draws against E(ξ_N) (Eq. A.101), and
    the share of |ξ_N| above the Hoeffding ε at which Eq. A.96 gives 0.05.

    Parameters
    ----------
    out
        Output directory (created); files replaced atomically.
    seed, sigma, n_max, repeats, dim, noise
        As in :func:`attention_bias_noise` (paper: σ = 0.1, 0.2, 0.3; N ≤ 100; T = 100; D = 128).

    Returns
    -------
    dict
        ``figS3.json``: ``per_sigma`` (per σ: ``sd_slope_loglog``, ``sd_first``, ``sd_last``,
        ``max_abs_first``, ``max_abs_last``, ``sd_at_n``, ``max_abs_at_n``, ``spread_shrinks``,
        ``pooled_mean``, ``pooled_mean_se``, ``expected_bias``, ``hoeffding_exceed_fraction``),
        ``score``, ``hoeffding_s``, ``command``, ``seed``, ``runtime_s``, ``machine``, ``versions``,
        ``files``. Also written: ``figS3_bias.png``, ``figS3_xi.csv`` (``sigma``, ``N``, ``repeat``,
        ``xi``), ``figS3_stats.csv`` (``sigma``, ``N``, ``mean``, ``sd``, ``max_abs``, ``q95_abs``,
        ``hoeffding_eps95``).

    Raises
    ------
    CapeConfigError
        Bad parameters (named), as in :func:`attention_bias_noise`.
    CapeFileError
        ``out`` exists and is not a directory.
    """
    out = output_dir(out)
    t0 = time.perf_counter()
    b = attention_bias_noise(sigma, n_max=n_max, repeats=repeats, dim=dim, noise=noise, seed=seed)
    runtime = {"compute": time.perf_counter() - t0}
    eps95 = np.sqrt(8 * b.hoeffding_s * math.log(2 / 0.05) / b.n)  # Eq. A.96 = 0.05
    first, last = slice(0, max(1, b.n.size // 10)), slice(-max(1, b.n.size // 10), None)
    rows, per_sigma = [], []
    for s, sg in enumerate(b.sigma):
        x = b.xi[s]  # (n, T)
        sd, mx = x.std(1, ddof=1), np.abs(x).max(1)
        rows.append(pd.DataFrame({"sigma": sg, "N": b.n, "mean": x.mean(1), "sd": sd, "max_abs": mx,
                                  "q95_abs": np.quantile(np.abs(x), 0.95, axis=1), "hoeffding_eps95": eps95}))
        slope = float(np.polyfit(np.log(b.n), np.log(sd), 1)[0]) if b.n.size >= 2 else None
        shrinks = slope is not None and slope < 0 and sd[last].mean() < sd[first].mean() and mx[last].mean() < mx[first].mean()
        at = [n for n in (1, 10, 100) if n <= b.n.size]
        per_sigma.append({"sigma": sg, "angle_sigma": b.angle_sigma[s], "sd_slope_loglog": slope,
                          "sd_first": sd[first].mean(), "sd_last": sd[last].mean(),
                          "max_abs_first": mx[first].mean(), "max_abs_last": mx[last].mean(),
                          "sd_at_n": {n: sd[n - 1] for n in at}, "max_abs_at_n": {n: mx[n - 1] for n in at},
                          "spread_shrinks": bool(shrinks),
                          "pooled_mean": (x * b.n[:, None]).sum() / (b.n.sum() * x.shape[1]),  # mean of all terms
                          "pooled_mean_se": sd[0] / math.sqrt(b.n.sum() * x.shape[1]), "expected_bias": b.expected_bias[s],
                          "hoeffding_exceed_fraction": float((np.abs(x) >= eps95[:, None]).mean())})
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    files = {role: out / name for role, name in FIGS3_FILES.items()}
    _plot_s3(b, files["scatter"])
    n_s, n_n, n_t = b.xi.shape
    _write_csv(pd.DataFrame({"sigma": np.repeat(b.sigma, n_n * n_t), "N": np.tile(np.repeat(b.n, n_t), n_s),
                             "repeat": np.tile(np.arange(n_t), n_s * n_n), "xi": b.xi.ravel()}), files["table"])
    _write_csv(pd.concat(rows, ignore_index=True), files["stats"])
    runtime["outputs"] = time.perf_counter() - t0
    body = {"dim": b.dim, "d": b.dim // 2, "noise": b.noise, "n_max": n_n, "repeats": n_t, "sigma": b.sigma,
            "score": b.score, "hoeffding_s": b.hoeffding_s, "per_sigma": per_sigma}
    command = ["cape", "reproduce", "figS3", "--out", str(out), "--seed", str(seed)]
    command += [a for sg in b.sigma for a in ("--sigma", f"{sg:g}")]
    command += ["--n-max", str(n_n), "--repeats", str(n_t), "--dim", str(b.dim), "--noise", b.noise]
    return _record("paper 000, App. G.1.3, Fig. S3 (Prop. A.10)", command, int(seed), runtime, files, body)
