"""Ablations of a trained model's positional encoding."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from cape_pipeline.errors import CapeConfigError

__all__ = ["angle_ablation", "angle_use"]


def _angle_table(model: Any) -> torch.Tensor | None:
    """The ``(M, d)`` angle buffer of ``model``'s PE, or ``None`` when its PE has none."""
    angles = getattr(getattr(model.backbone, "pe", None), "angles", None)
    return angles if isinstance(angles, torch.Tensor) else None


@torch.no_grad()
def angle_ablation(
    model: Any, data: Any, *, var_names: Any = None, missing: str | None = None, batch_size: int = 128
) -> dict[str, float]:
    """How much ``model`` (a :class:`~cape_pipeline.tasks.TrainedModel`) uses its CAPE angles:
    its outputs on ``data`` with the angles as trained and with every angle set to 0 (no
    rotation); the angles are restored afterwards.

    A model whose outputs barely change barely uses its angles; the report says so for an arm
    below 1 % of labels changed (:func:`cape_pipeline.report.sections.angle_use_lines`;
    measurements in ``benchmarks/cape_value/RESULTS.md``).

    Parameters
    ----------
    model
        A trained model whose PE holds an angle table (``pe="cape"``, ``"cape-input"``).
    data, var_names, missing, batch_size
        As :meth:`TrainedModel.embed <cape_pipeline.tasks.TrainedModel.embed>`.

    Returns
    -------
    dict
        ``embedding_change``: ‖E₀ − E‖_F / ‖E‖_F of the ``(n_obs, D)`` cell embeddings;
        ``prediction_change``: share of cells whose predicted class changes (classifier), or
        the mean absolute change of the prediction in data units (regressor); NaN without a
        head; ``probability_change``: mean over cells of the total-variation distance of the
        class probabilities (classifier; NaN otherwise); ``angle_abs_median``,
        ``angle_abs_max`` (radians) and ``zero_angle_share`` (features whose angles are all 0)
        of the model's angle table.

    Raises
    ------
    CapeConfigError
        The model's PE has no CAPE angle table (e.g. ``none``).
    CapeDataError
        See :meth:`TrainedModel.align <cape_pipeline.tasks.TrainedModel.align>`.
    """
    from cape_pipeline.models.backbones.heads import ClassifierHead, RegressionHead

    angles = _angle_table(model)
    if angles is None:
        raise CapeConfigError(
            f"angle_ablation: the model's PE {getattr(model.backbone.pe, 'name', '?')!r} has no CAPE angles to zero"
        )
    kept = angles.detach().clone()
    emb = model.embed(data, var_names=var_names, missing=missing, batch_size=batch_size)
    try:
        angles.zero_()
        emb0 = model.embed(data, var_names=var_names, missing=missing, batch_size=batch_size)
    finally:
        angles.copy_(kept)
    out = {
        "embedding_change": float(np.linalg.norm(emb0 - emb) / max(np.linalg.norm(emb), 1e-12)),
        "prediction_change": float("nan"),
        "probability_change": float("nan"),
        "angle_abs_median": float(kept.abs().median()),
        "angle_abs_max": float(kept.abs().max()),
        "zero_angle_share": float((kept.abs().amax(dim=1) == 0).float().mean()),
    }
    if isinstance(model.head, ClassifierHead | RegressionHead):
        model.head.eval()
        dev = next(model.head.parameters()).device
        a, b = (model.head(torch.as_tensor(e).to(dev)).double().cpu() for e in (emb, emb0))
        if isinstance(model.head, ClassifierHead):
            out["prediction_change"] = float((a.argmax(1) != b.argmax(1)).double().mean())
            pa, pb = torch.softmax(a, 1), torch.softmax(b, 1)
            out["probability_change"] = float(0.5 * (pa - pb).abs().sum(1).mean())
        else:
            out["prediction_change"] = float((a - b).abs().mean() * float(model.target_sd or 1.0))
    return out


def angle_use(model: Any, adata: Any, max_cells: int = 2000) -> dict[str, float] | None:
    """:func:`angle_ablation` of ``model`` on at most ``max_cells`` cells of ``adata`` (a
    subsample seeded with 0, so it costs two forward passes of ≤ 2,000 cells), rounded to 6
    digits; ``None`` when the model's PE has no angle table. The main job runs it on the first
    seed's annotation model of every arm, and the report prints it."""
    if _angle_table(model) is None:
        return None
    n = adata.n_obs
    rows = np.sort(np.random.default_rng(0).choice(n, max_cells, replace=False)) if n > max_cells else slice(None)
    return {k: round(float(v), 6) for k, v in angle_ablation(model, adata[rows]).items()}
