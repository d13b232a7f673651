"""The names of a comparison: ``TrainConfig.arm`` (the arm of interest), ``TrainConfig.arms`` and
``TrainOutput.arms``; the earlier spellings (``pe``, ``pes``) still work for one release, with a
FutureWarning, and a results directory that stored ``pes`` still loads."""

from __future__ import annotations

import json

import pytest

from cape_pipeline.errors import CapeConfigError
from cape_pipeline.pipeline.config import build_config
from cape_pipeline.tasks import TaskResult
from cape_pipeline.tasks.compare import TrainConfig
from cape_pipeline.tasks.results import TrainOutput


def test_arm_is_the_arm_of_interest_and_arms_lists_every_arm() -> None:
    cfg = TrainConfig(arm="cape@cone-umbral", compare=("none", "cape@cone-umbral", "none/no-id"))
    assert cfg.arm == "cape@cone-umbral"
    assert cfg.arms == ["cape@cone-umbral", "none", "none/no-id"]
    with pytest.raises(CapeConfigError, match="pe 'capo' unknown"):
        TrainConfig(arm="capo")


def test_the_earlier_keyword_and_attribute_pe_warn_and_map_to_arm() -> None:
    with pytest.warns(FutureWarning, match=r"TrainConfig\(arm=\.\.\.\)"):
        cfg = TrainConfig(pe="none", n_seeds=2)
    assert cfg == TrainConfig(arm="none", n_seeds=2)
    with pytest.warns(FutureWarning, match="TrainConfig.arm"):
        assert cfg.pe == "none"
    with pytest.raises(CapeConfigError, match="train.pe is the earlier name of train.arm"):
        TrainConfig(pe="none", arm="cape")


def test_set_train_pe_warns_and_sets_train_arm() -> None:
    with pytest.warns(FutureWarning, match="train.pe is now called train.arm"):
        cfg = build_config(TrainConfig, "train", {"pe": "none"})
    assert cfg.arm == "none"
    with pytest.raises(CapeConfigError, match="give only arm"):
        build_config(TrainConfig, "train", {"pe": "none", "arm": "cape"})


def _output() -> TrainOutput:
    runs = [TaskResult("annotation", {"accuracy": 0.5 + i / 10}, params={"arm": arm, "seed": 0})
            for i, arm in enumerate(("cape", "none"))]
    return TrainOutput(results=runs, tasks=["annotation"], arms=["cape", "none"], d_model=8)


def test_results_store_arms_and_pes_warns(tmp_path) -> None:
    out = _output()
    out.save(tmp_path)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["arms"] == ["cape", "none"] and "pes" not in doc
    assert TrainOutput.load(tmp_path).arms == ["cape", "none"]
    with pytest.warns(FutureWarning, match="TrainOutput.arms"):
        assert out.pes == ["cape", "none"]


def test_results_written_with_the_earlier_name_still_load(tmp_path) -> None:
    _output().save(tmp_path)
    doc = json.loads((tmp_path / "results.json").read_text())
    doc["pes"] = doc.pop("arms")  # the layout of a results directory of an earlier version
    (tmp_path / "results.json").write_text(json.dumps(doc))
    old = TrainOutput.load(tmp_path)
    assert old.arms == ["cape", "none"] and [r.metrics["accuracy"] for r in old.results] == [0.5, 0.6]


def test_the_arm_default_is_none_by_its_earlier_name() -> None:
    from cape_pipeline.tasks.arms import Arm

    assert TrainConfig().compare == ("none", "none/no-id")
    with pytest.warns(FutureWarning, match="'default' is now called 'none'"):
        assert Arm.parse("default@cone-umbral") == Arm("none", identity=True, attention="cone-umbral")
    with pytest.warns(FutureWarning):  # the earlier name kept the identity even with /no-id
        assert Arm.parse("default/no-id") == Arm("none", identity=True)
    with pytest.warns(FutureWarning):
        cfg = TrainConfig(arm="default", compare=("cape", "default/no-id", "none/no-id"))
    assert cfg.arm == "none" and cfg.compare == ("cape", "none", "none/no-id") and cfg.arms == ["none", "cape", "none/no-id"]
    assert Arm.current("cape/no-id@dot") == "cape/no-id@dot"  # other arms are left as written


def test_checkpoint_genes_are_stored_and_init_reads_them_with_a_warning(tmp_path) -> None:
    genes = {"checkpoint": "/ckpt", "n_genes_used": 3, "n_genes_dropped": 1, "dropped_examples": ["G9"]}
    out = _output()
    out.checkpoint_genes = genes
    out.save(tmp_path)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["checkpoint_genes"] == genes and "init" not in doc
    with pytest.warns(FutureWarning, match="checkpoint_genes"):
        assert out.init == genes
    doc["init"] = doc.pop("checkpoint_genes")  # a results directory of an earlier version
    (tmp_path / "results.json").write_text(json.dumps(doc))
    assert TrainOutput.load(tmp_path).checkpoint_genes == genes
