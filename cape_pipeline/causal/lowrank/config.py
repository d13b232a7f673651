"""The options of the low-rank algorithm of Step I (the paper's model), their defaults and their
checks: :class:`LowRankConfig` (``DiscoverConfig.low_rank``), and the solver's settings of one run,
:class:`SolverConfig` (those options with the values a run resolves)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from cape_pipeline._config import check_fields, is_int
from cape_pipeline.causal.fitting import DEFAULT_EPOCHS, AugmentedLagrangianConfig, gradient_checks
from cape_pipeline.causal.sem import POSTERIORS

__all__ = ["ACYCLICITY", "DEFAULT_ACYCLICITY", "L1_MODES", "LowRankConfig", "SolverConfig"]

ACYCLICITY = ("spectral", "majorant")
DEFAULT_ACYCLICITY = ACYCLICITY[0]
L1_MODES = ("auto", "exact", "sampled", "surrogate")


@dataclass(frozen=True)
class LowRankConfig(AugmentedLagrangianConfig):
    """Options of the low-rank algorithm, the paper's NOTEARS-VAE with ``A = U Vᵀ``
    (:func:`~cape_pipeline.causal.lowrank.solver.fit_low_rank_vae`); validated on creation.
    Defaults: paper 000, Supp. F.4 and G.4, and the measurements in
    ``benchmarks/discover/lowrank/RESULTS.md``. The options it shares with the screened
    algorithm (``threshold``, ``lambda_sparse``, ``epochs``, ``min_steps``, ``batch_size``,
    ``lr``, ``max_outer``, ``rho_max``, ``rho_init``, ``hidden``, ``power_iters``,
    ``weight_decay``) are :class:`~cape_pipeline.causal.fitting.AugmentedLagrangianConfig`'s,
    documented there.

    Attributes
    ----------
    rank
        r of ``A = U Vᵀ`` (40). ``rank >= M`` is capped to ``M − 1`` (logged at INFO; the value
        used is ``params["effective_rank"]``).
    acyclicity
        ``"spectral"`` (default: ρ(A∘A) by power iteration, NO-BEARS; chosen on the benchmarks
        in ``benchmarks/discover/lowrank/RESULTS.md``) or ``"majorant"``
        (``tr exp(|V|ᵀ|U|) − r``).
    h_tol
        The augmented Lagrangian stops once the acyclicity h < ``h_tol`` (1e-8).
    init_scale
        Spectral radius of ``|U||V|ᵀ`` at initialisation (0.1; see
        :class:`~cape_pipeline.causal.lowrank.model.LowRankSEMVAE`).
    l1
        How ‖A‖₁ is evaluated: ``"auto"`` (default: exact for M ≤ ``l1_exact_max``, else an
        unbiased estimate from ``l1_pairs`` sampled entries), ``"exact"``, ``"sampled"`` or
        ``"surrogate"`` (the factor bound ``Σ_k ‖U_k‖₁‖V_k‖₁ ≥ ‖A‖₁``).
    l1_exact_max
        ``l1="auto"`` computes ‖UVᵀ‖₁ exactly up to this many features (500: above it the exact
        form's O(M² r) per step becomes a sizeable part of a step next to the ELBO, where the
        sampled estimate's O(S r) stays small) and estimates it above.
    l1_pairs
        The number S of sampled entries of the ‖UVᵀ‖₁ estimate (4096).
    dag_threshold
        The augmented-Lagrangian penalty stops growing once ``|A| > dag_threshold`` (with the
        ``max_edges_per_row`` cap) is a DAG. None (default): τ (``threshold``), so the penalty is
        held once the returned graph is acyclic.
    posterior
        ``"sampled"`` (default: reparameterised Z with learned variance) or ``"mean"`` (decoder on
        μ and KL ½‖μ‖², as in the DAG-GNN reference code — fewer shrunk edges; compared in
        ``benchmarks/discover/lowrank/RESULTS.md``).

    Raises
    ------
    CapeConfigError
        A value out of range or of the wrong type, naming the option and what was expected.
    """

    rank: int = 40
    acyclicity: str = DEFAULT_ACYCLICITY
    h_tol: float = 1e-8
    init_scale: float = 0.1
    l1: str = L1_MODES[0]
    l1_exact_max: int = 500
    l1_pairs: int = 4096
    dag_threshold: float | None = None
    posterior: str = POSTERIORS[0]

    def __post_init__(self) -> None:
        check_fields(self, {
            "rank": (lambda v: is_int(v, 1), "an integer >= 1"),
            **gradient_checks(),
            "acyclicity": (lambda v: v in ACYCLICITY, f"one of {', '.join(ACYCLICITY)}"),
            "l1": (lambda v: v in L1_MODES, f"one of {', '.join(L1_MODES)}"),
            "l1_exact_max": (lambda v: is_int(v, 0), "an integer >= 0"),
            "l1_pairs": (lambda v: is_int(v, 1), "an integer >= 1"),
            "posterior": (lambda v: v in POSTERIORS, f"one of {', '.join(POSTERIORS)}"),
        })


@dataclass(frozen=True)
class SolverConfig(LowRankConfig):
    """The settings of one run of the low-rank solver
    (:func:`~cape_pipeline.causal.lowrank.solver.fit_low_rank_vae`): the fields of
    :class:`LowRankConfig` (documented there) with the values a run resolves, and the settings a
    run adds. :meth:`from_config` builds them for :func:`~cape_pipeline.causal.api.discover`.

    Attributes
    ----------
    epochs
        Total epoch budget over all outer steps (100, Supp. F.4); a number (the API resolves
        ``LowRankConfig.epochs=None``).
    dag_threshold
        When set (the API passes τ), the augmented-Lagrangian penalty is only tightened while the
        thresholded graph ``|A| > dag_threshold`` still has a cycle: once it is a DAG, ρ and α
        are held and the remaining epochs fit the data under that penalty (None: the plain rule
        of Eq. 10, which drives every entry towards 0 for the spectral h).
    seed
        Seed of the local generators (initialisation, shuffling, reparameterisation noise).
    alpha_init
        Initial multiplier α (0).
    dag_max_edges_per_row
        Per-row cap on the thresholded graph of ``dag_threshold`` (None: every entry above it).
        The API passes the cap of its output graph, so the check looks at the graph returned.
    dtype
        Floating type of the data and the parameters during the fit, ``"float32"`` (default) or
        ``"float64"`` (slower; rounding differences between two runs that sum in another order,
        e.g. on 1 or 2 data-parallel ranks, fall from ~1e-7 to ~1e-16 relative).
    """

    epochs: int = DEFAULT_EPOCHS
    seed: int = 0
    alpha_init: float = 0.0
    dag_max_edges_per_row: int | None = None
    dtype: str = "float32"

    @classmethod
    def from_config(
        cls, cfg: LowRankConfig, *, seed: int, rank: int, epochs: int, dag_max_edges_per_row: int | None = None,
        **settings: Any,
    ) -> SolverConfig:
        """The solver settings of a :class:`LowRankConfig` for one run: every field of ``cfg``,
        with ``rank`` and ``epochs`` the effective values (capped to M − 1, resolved from
        ``epochs=None``), ``dag_threshold`` the config's, else τ, ``dag_max_edges_per_row`` the
        cap of the output graph, and ``settings`` (``alpha_init``, ``dtype``).

        Raises
        ------
        CapeConfigError
            An invalid value (as :class:`LowRankConfig`).
        """
        own = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(LowRankConfig)}
        dag = float(cfg.threshold) if cfg.dag_threshold is None else cfg.dag_threshold
        return cls(**{**own, "rank": int(rank), "epochs": int(epochs), "dag_threshold": dag}, seed=int(seed),
                   dag_max_edges_per_row=dag_max_edges_per_row, **settings)
