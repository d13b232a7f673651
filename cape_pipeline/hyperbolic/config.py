"""Options of Step II (:func:`cape_pipeline.hyperbolic.embed`), defined and validated once."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

from cape_pipeline._config import FromOptions
from cape_pipeline.errors import CapeConfigError

__all__ = ["EmbedConfig", "check_options", "DEFAULT_LR", "DEFAULT_CURVATURE"]

#: Default learning rate per optimizer (``lr=None``): Riemannian Adam and RSGD on H^d, Adam for
#: the Euclidean ablation. Chosen on held-out graphs in ``benchmarks/embed`` (README there).
DEFAULT_LR: dict[str, float] = {"radam": 0.05, "rsgd": 0.1, "adam": 0.05}

#: Default κ of the curvature −κ (paper 000 Eq. 11 fixes κ = 1; see ``EmbedConfig.curvature``).
DEFAULT_CURVATURE = 1.0


@dataclass(frozen=True)
class EmbedConfig(FromOptions):
    """Options of :func:`~cape_pipeline.hyperbolic.embed` (Step II), validated on construction.

    ``embed(graph, config, **options)`` uses ``dataclasses.replace(config, **options)``; the
    pipeline's ``embed`` stage and :func:`cape_pipeline.tl.embed` take the same names.

    Attributes
    ----------
    dim
        Manifold dimension d (points live in R^{d+1}); use D/2 for a D-dimensional transformer.
        Default 32: the main job's one width rule is D = 2d, so the default transformer is
        D = 64, the bundled backbones' CPU width. A larger d (d = 64: D = 128) makes every
        training step of the main job markedly slower on a CPU (``benchmarks/scale/RESULTS.md``);
        set it for a larger model.
    k_hop
        Positives are nodes joined by a directed path of length ≤ ``k_hop`` in either
        direction, weighted by the strongest path (max product of |A|; see
        :func:`~cape_pipeline.hyperbolic.k_hop_positives`).
    lambda_g
        Weight λ_g of the PageRank regularizer Ω (Eq. 17).
    restart
        Restart weight w of PageRank (Eq. 18); ``networkx.pagerank(alpha=1 − restart)``.
    max_epochs
        Upper bound on epochs (the paper's 1000); training normally stops earlier at the plateau.
    batch_size
        Anchors per optimizer step; ``None`` = :func:`~cape_pipeline.hyperbolic.embed.auto_batch_size`:
        the paper's 32, or ``ceil(n / 20)`` for n > 640 trained features so that an epoch is at
        most 20 steps. Why: every step updates all n points (Riemannian Adam's moments are
        dense) and the number of *steps* to the plateau hardly depends on the batch, so big
        graphs want few, large steps (time to the plateau and mAP by batch size:
        ``benchmarks/embed/README.md``).
    lr
        Learning rate η (Eq. 21); ``None`` = :data:`DEFAULT_LR` of the optimizer (Riemannian Adam
        0.05, RSGD 0.1, Euclidean Adam 0.05), chosen in ``benchmarks/embed`` so that defaults
        converge. The paper's 1e-3 leaves the points near the origin within the epoch budget
        (``benchmarks/embed/README.md``).
    optimizer
        ``"radam"`` (``geoopt.optim.RiemannianAdam``) or ``"rsgd"``
        (``geoopt.optim.RiemannianSGD``: the Riemannian gradient g_l⁻¹∇ of Eq. 19, its
        projection onto the tangent space of Eq. 20 and the exponential-map step of Eq. 21).
        Ignored for ``geometry="euclidean"``.
    geometry
        ``"hyperbolic"`` (default) or ``"euclidean"``: the w/o-hyperbolic ablation of Table 3,
        the same loss with Euclidean distance ‖x − y‖ and regularizer π_m‖x_m‖ in R^d, optimized
        with ``torch.optim.Adam`` under the same schedule and stopping rule. Its points are then
        mapped into H^d by ``expmap0`` (see :class:`~cape_pipeline.hyperbolic.HyperbolicEmbedding`)
        so that downstream angles (Step III) work unchanged.
    curvature
        κ > 0 of the curvature −κ (initial value when ``learn_curvature``). Points are kept on
        the unit hyperboloid of Eq. 11 and every distance of the loss is ``d_l / √κ`` (the
        distance on the hyperboloid of curvature −κ), so ``poincare`` stays in the unit ball
        (Poincaré coordinates divided by the curvature radius) and Step III is unchanged.
    learn_curvature
        Learn κ jointly with the points (Adam on log(1/√κ), lr 0.05, the same burn-in); the
        learned value is ``params["curvature"]``. ``False`` with ``curvature=1`` is Eq. 11
        literally. Why learned by default: with κ fixed at 1 the loss plateaus far above the
        Euclidean ablation's and edge-reconstruction mAP falls below it, because at curvature
        radius 1 the 2-hop positives of a cycle-rich graph cannot be separated from its
        negatives; a learned κ picks the scale at which the space is as curved as the graph is
        tree-like (hyperbolic-embedding practice: Gu et al. 2019, Chami et al. 2019).
        ``benchmarks/embed`` has both.
    negatives
        Negatives sampled per anchor (see "Negatives" in :func:`~cape_pipeline.hyperbolic.embed`);
        ``None`` = all.
    burn_in
        Epochs at the reduced learning rate ``lr · burn_in_factor``.
    burn_in_factor
        Factor in (0, 1] applied to ``lr`` during burn-in.
    tol
        Relative plateau tolerance of the stopping rule; 0 disables it (exactly ``max_epochs``).
    lr_decay
        Factor in (0, 1] applied to every learning rate (the points' and κ's) when, from half of
        ``max_epochs`` on, the loss falls by less than ``10 · tol`` (relative) from one window to
        the next but by more than ``tol``: a slow drift that would not plateau within the epochs
        left (reduce-on-plateau). 1 disables it. See
        :func:`~cape_pipeline.hyperbolic.schedule.plateau_action`.
    window
        Epochs per window of the stopping rule; ``None`` =
        :func:`~cape_pipeline.hyperbolic.embed.plateau_window`.
    isolated
        ``"origin"`` or ``"embed"`` (see "Isolated features" in
        :func:`~cape_pipeline.hyperbolic.embed`).
    device
        Torch device for the points (float64 on every device, CUDA included); a string such as
        ``"cpu"`` or ``"cuda:0"``, or a ``torch.device``.
    seed
        Seed of the local ``torch.Generator`` (initial points, anchor order, negative samples).
        Global RNG state is not touched.

    Raises
    ------
    CapeConfigError
        On construction, naming the option and what was expected.
    """

    _method: ClassVar[str] = "embed"

    dim: int = 32
    k_hop: int = 2
    lambda_g: float = 0.1
    restart: float = 0.15
    max_epochs: int = 1000
    batch_size: int | None = None
    lr: float | None = None
    optimizer: str = "radam"
    geometry: str = "hyperbolic"
    curvature: float = DEFAULT_CURVATURE
    learn_curvature: bool = True
    negatives: int | None = 512
    burn_in: int = 10
    burn_in_factor: float = 0.1
    tol: float = 1e-3
    lr_decay: float = 0.5
    window: int | None = None
    isolated: str = "origin"
    device: str = "cpu"
    seed: int = 0

    def __post_init__(self) -> None:
        def _int(name: str, v: Any, lo: int) -> None:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise CapeConfigError(f"{name}: expected an integer ≥ {lo}, got {v!r}")

        _int("dim", self.dim, 1)
        _int("k_hop", self.k_hop, 1)
        _int("max_epochs", self.max_epochs, 1)
        if self.batch_size is not None:
            _int("batch_size", self.batch_size, 1)
        _int("burn_in", self.burn_in, 0)
        if self.negatives is not None:
            _int("negatives", self.negatives, 1)
        if self.window is not None:
            _int("window", self.window, 1)
        lambda_g, restart, lr = self.lambda_g, self.restart, self.lr
        burn_in_factor, tol, curvature = self.burn_in_factor, self.tol, self.curvature
        if not (math.isfinite(lambda_g) and lambda_g >= 0):
            raise CapeConfigError(f"lambda_g: expected a finite value ≥ 0, got {lambda_g!r}")
        if not 0.0 < restart < 1.0:
            raise CapeConfigError(f"restart: expected a value in (0, 1), got {restart!r}")
        if lr is not None and not (math.isfinite(lr) and lr > 0):
            raise CapeConfigError(
                f"lr: expected a finite value > 0 (or None for the default), got {lr!r}"
            )
        if not (math.isfinite(burn_in_factor) and 0 < burn_in_factor <= 1):
            raise CapeConfigError(
                f"burn_in_factor: expected a value in (0, 1], got {burn_in_factor!r}"
            )
        if not (math.isfinite(self.lr_decay) and 0 < self.lr_decay <= 1):
            raise CapeConfigError(f"lr_decay: expected a factor in (0, 1] (1 = no decay), got {self.lr_decay!r}")
        if not (math.isfinite(tol) and tol >= 0):
            raise CapeConfigError(
                f"tol: expected a finite value ≥ 0 (0 = run max_epochs), got {tol!r}"
            )
        if self.optimizer not in DEFAULT_LR or self.optimizer == "adam":
            raise CapeConfigError(f"optimizer: expected 'radam' or 'rsgd', got {self.optimizer!r}")
        if self.geometry not in ("hyperbolic", "euclidean"):
            raise CapeConfigError(
                f"geometry: expected 'hyperbolic' or 'euclidean', got {self.geometry!r}"
            )
        if self.isolated not in ("origin", "embed"):
            raise CapeConfigError(f"isolated: expected 'origin' or 'embed', got {self.isolated!r}")
        if not (math.isfinite(curvature) and curvature > 0):
            raise CapeConfigError(
                f"curvature: expected a finite κ > 0 (the space has curvature −κ), got {curvature!r}"
            )

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The option names, in field order."""
        return tuple(f.name for f in fields(cls))


def check_options(**options: Any) -> EmbedConfig:
    """Validate the options of :func:`~cape_pipeline.hyperbolic.embed` without a graph (the
    pipeline itself builds :class:`EmbedConfig`, which does the same checks).

    Builds an :class:`EmbedConfig` from the known keys (unknown keys are ignored) and returns it.

    Raises
    ------
    CapeConfigError
        Naming the option and what was expected.
    """
    known = set(EmbedConfig.field_names())
    return EmbedConfig(**{k: v for k, v in options.items() if k in known})
