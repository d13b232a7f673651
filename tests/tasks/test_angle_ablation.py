"""TrainedModel.angle_ablation: how much a trained model's outputs move when its CAPE angles are
zeroed, with the angles restored afterwards."""

from __future__ import annotations

import numpy as np
import pytest

import cape_pipeline as cp
from cape_pipeline.datasets import simulated_counts
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.tasks import run_task

TINY = {"pretrain_epochs": 1, "finetune_epochs": 3, "reference": False, "model": {"d_model": 8, "n_heads": 2, "n_layers": 1}}


@pytest.fixture(scope="module")
def data():
    a = simulated_counts(150, 200, n_types=3, seed=0, n_modules=10, module_share=0.6)
    cp.pp.preprocess(a, min_genes=1, n_top_genes=12)
    return a


def test_zeroing_large_angles_moves_the_outputs_and_restores_them(data):
    rng = np.random.default_rng(0)
    angles = rng.uniform(-1.5, 1.5, (data.n_vars, 4)).astype(np.float32)
    angles[:3] = 0.0  # three features unrotated
    model = run_task("annotation", data, label_key="cell_type", pe="cape", angles=angles, config=TINY, seed=0).model
    before = model.backbone.pe.angles.clone()
    out = model.angle_ablation(data)
    assert (model.backbone.pe.angles == before).all()  # restored
    assert out["embedding_change"] > 1e-3 and out["probability_change"] > 0
    assert 0 <= out["prediction_change"] <= 1  # share of cells whose class changes
    assert out["zero_angle_share"] == pytest.approx(3 / data.n_vars)
    assert out["angle_abs_max"] == pytest.approx(float(np.abs(angles).max()), rel=1e-6)


def test_zero_angles_change_nothing(data):
    angles = np.zeros((data.n_vars, 4), dtype=np.float32)
    model = run_task("annotation", data, label_key="cell_type", pe="cape", angles=angles, config=TINY, seed=0).model
    out = model.angle_ablation(data)
    assert out["embedding_change"] == 0.0 and out["prediction_change"] == 0.0 and out["zero_angle_share"] == 1.0


def test_a_model_without_angles_is_refused(data):
    model = run_task("annotation", data, label_key="cell_type", pe="trainable-absolute", config=TINY, seed=0).model
    with pytest.raises(CapeConfigError, match="no CAPE angles"):
        model.angle_ablation(data)
