"""The discover stage's nested parameters: ``--set discover.regression.fdr=0.1``, the earlier flat
names with their warnings, and the cache key that follows every nested value."""

from __future__ import annotations

import pytest

from cape_pipeline.errors import CapeConfigError
from cape_pipeline.pipeline.cache import stage_key
from cape_pipeline.pipeline.config import parse_assignments
from cape_pipeline.pipeline.runner import build_stage_configs, resolve_stages
from cape_pipeline.pipeline.stages import STAGES
from cape_pipeline.pipeline.stages._base import StageContext, config_params


def _discover(overrides: dict) -> object:
    return build_stage_configs(resolve_stages("discover"), {"discover": overrides}, seed=0, device=None,
                               source="sachs")["discover"]


def _key(overrides: dict) -> str:
    cfg = _discover(overrides)
    fp = STAGES["discover"].fingerprint(cfg, StageContext(source="sachs"))
    return stage_key("discover", config_params(cfg), {"preprocess": "k"}, fp)


def test_nested_set_is_parsed_and_coerced():
    over = parse_assignments(["discover.regression.fdr=0.1", "discover.low_rank.lr=1e-3",
                              "discover.algorithm=regression"])
    assert over == {"discover": {"regression.fdr": 0.1, "low_rank.lr": "1e-3", "algorithm": "regression"}}
    with pytest.raises(CapeConfigError, match=r"low_rank\.lr: not used by algorithm='regression'"):
        _discover(over["discover"])
    cfg = _discover({"regression.fdr": 0.1, "low_rank.lr": "1e-3"})  # "auto": each applies where picked
    assert cfg.regression.fdr == 0.1 and cfg.low_rank.lr == 1e-3 and isinstance(cfg.low_rank.lr, float)
    # a YAML config file gives a mapping
    assert _discover({"regression": {"n_splits": 2}}).regression.n_splits == 2


def test_flat_set_warns_with_the_nested_spelling():
    with pytest.warns(FutureWarning, match=r"discover\.min_effect is now discover\.regression\.min_effect"):
        assert _discover({"min_effect": 0.01}).regression.min_effect == 0.01
    with pytest.warns(FutureWarning, match=r"discover\.support is now called discover\.algorithm"):
        assert _discover({"support": "learned"}).algorithm == "learned"
    with pytest.warns(FutureWarning, match=r"discover\.epochs is now discover\.learned\.epochs"):
        assert _discover({"algorithm": "learned", "epochs": 5}).learned.epochs == 5
    with pytest.raises(CapeConfigError, match=r"discover\.epochs: an option of several algorithms; give it to one: "
                                              r"discover\.low_rank\.epochs or discover\.screened\.epochs"):
        _discover({"epochs": 5})
    # a baseline takes the flat names as its options
    assert dict(_discover({"method": "correlation", "threshold": 0.3}).method_options) == {"threshold": 0.3}


def test_cache_key_follows_every_nested_value():
    default = _key({})
    assert _key({}) == default
    assert _key({"regression.fdr": 0.05}) == default  # the default value: the same run, the same key
    keys = {_key({"regression.fdr": 0.1}), _key({"low_rank.rank": 5}), _key({"learned.hidden": 5}),
            _key({"screened.n_candidates": 5}), _key({"regression.fdr": 0.1, "regression.n_splits": 2})}
    assert len(keys) == 5 and default not in keys
    with pytest.warns(FutureWarning):
        assert _key({"fdr": 0.1}) == _key({"regression.fdr": 0.1})  # the flat name is the same run
