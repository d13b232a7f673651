"""A saved model applies its training data's preprocessing to raw input, or refuses it in one
line (predicting on ``sc.datasets.pbmc68k_reduced()`` as it loads, with scaled X, must not
silently give a lower accuracy than on the preprocessed data)."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pytest

import cape_pipeline as cp
import cape_pipeline.datasets as ds
from cape_pipeline.errors import CapeDataError
from cape_pipeline.tasks import load, run_task

TINY = {"pretrain_epochs": 1, "finetune_epochs": 2, "model": {"d_model": 8, "n_heads": 2, "n_layers": 1, "max_tokens": 32}}


@pytest.fixture(scope="module")
def pbmc_model(tmp_path_factory):
    raw = ds.pbmc68k_reduced()  # X scaled (negatives), .raw log-normalized: as scanpy ships it
    prep = cp.pp.preprocess(raw, copy=True)
    res = run_task("annotation", prep, pe="none", config={**TINY, "reference": False}, label_key="bulk_labels", seed=0)
    path = res.model.save(tmp_path_factory.mktemp("m") / "annotation")
    return raw, prep, load(path)


def test_raw_anndata_gets_the_training_preprocessing(pbmc_model):
    raw, prep, model = pbmc_model
    assert model.preprocess["modality"] == "scrna" and model.preprocess["used_raw"]
    np.testing.assert_array_equal(model.predict(raw), model.predict(prep))
    np.testing.assert_allclose(model.embed(raw), model.embed(prep), rtol=1e-5, atol=1e-5)


def test_scaled_input_without_raw_is_refused_in_one_line(pbmc_model):
    raw, _, model = pbmc_model
    scaled_only = ad.AnnData(X=np.asarray(raw.X), obs=raw.obs.copy(), var=raw.var[[]].copy())
    with pytest.raises(CapeDataError, match="scaled values") as exc:
        model.predict(scaled_only)
    assert "\n" not in str(exc.value)


def test_other_normalization_is_refused(pbmc_model):
    raw, _, model = pbmc_model
    other = cp.pp.preprocess(raw, target_sum=1e6, copy=True)
    with pytest.raises(CapeDataError, match="target_sum"):
        model.predict(other)


def test_predict_proba_and_module_like_methods(pbmc_model):
    raw, prep, model = pbmc_model
    p = model.predict_proba(prep)
    assert list(p.columns) == model.classes and list(p.index) == list(map(str, prep.obs_names))
    np.testing.assert_allclose(p.to_numpy().sum(1), 1.0, rtol=1e-9)
    np.testing.assert_array_equal(np.asarray(model.classes, dtype=object)[p.to_numpy().argmax(1)], model.predict(prep))
    assert model.to("cpu") is model and model.eval() is model and not model.backbone.training


def test_backbone_takes_a_value_tensor(pbmc_model):
    """``model.backbone(x)`` takes a value tensor as it takes the tokens made from it."""
    import torch

    _, prep, model = pbmc_model
    x = torch.as_tensor(model.align(prep)[:4])
    with torch.no_grad():
        out = model.backbone(x)
        same = model.backbone(model.backbone.tokenize(x))
    assert out.shape[0] == 4 and torch.equal(out, same)
