"""EmbedConfig / EncodeConfig: one definition of every Step II/III option, documented and validated."""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from pathlib import Path

import docstring_parser
import numpy as np
import pytest

import cape_pipeline
from cape_pipeline import tl
from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.encodings import DEFAULT_SCALE, EncodeConfig, encode
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.hyperbolic import EmbedConfig, embed
from cape_pipeline.hyperbolic.embed import check_options

EMBED_FIELDS = (
    "dim", "k_hop", "lambda_g", "restart", "max_epochs", "batch_size", "lr", "optimizer", "geometry",
    "curvature", "learn_curvature", "negatives", "burn_in", "burn_in_factor", "tol", "lr_decay", "window",
    "isolated", "device", "seed",
)  # fmt: skip


def _graph() -> CausalGraph:
    return CausalGraph.from_edges([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e")])


def _attribute_docs(cls: type) -> dict[str, str]:
    doc = docstring_parser.parse(
        inspect.getdoc(cls) or "", style=docstring_parser.DocstringStyle.NUMPYDOC
    )
    return {p.arg_name: p.description or "" for p in doc.params if p.args[0] == "attribute"}


@pytest.mark.parametrize("cls", [EmbedConfig, EncodeConfig])
def test_every_field_is_documented_in_attributes(cls):
    docs = _attribute_docs(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    assert list(docs) == names  # documented in field order, nothing extra
    assert all(len(docs[n]) >= 10 for n in names), {n: docs[n] for n in names if len(docs[n]) < 10}


def test_embed_config_fields_and_defaults():
    cfg = EmbedConfig()
    assert tuple(f.name for f in dataclasses.fields(EmbedConfig)) == EMBED_FIELDS
    assert (cfg.dim, cfg.k_hop, cfg.negatives, cfg.device, cfg.seed) == (32, 2, 512, "cpu", 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.dim = 3  # type: ignore[misc]
    assert EncodeConfig().scale == DEFAULT_SCALE == math.pi / 4


def _config_defaults(cls: type) -> dict[str, object]:
    return {f.name: f.default for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(
    ("func", "cls"),
    [
        (embed, EmbedConfig),
        (tl.embed, EmbedConfig),
        (encode, EncodeConfig),
        (tl.encode, EncodeConfig),
    ],
)
def test_no_default_written_twice(func, cls):
    """A signature that names a config field either leaves its default to the config (None or
    absent) or repeats exactly the config's."""
    defaults = _config_defaults(cls)
    for name, p in inspect.signature(func).parameters.items():
        if name in defaults and p.default is not inspect.Parameter.empty and p.default is not None:
            assert p.default == defaults[name], name


def test_quarter_pi_is_written_once_in_steps_two_and_three():
    root = Path(cape_pipeline.__file__).parent
    files = [
        *sorted((root / "encodings").glob("*.py")),
        *sorted((root / "hyperbolic").glob("*.py")),
        root / "tl" / "__init__.py",
    ]
    hits = [f.name for f in files if re.search(r"pi\s*/\s*4", f.read_text())]
    assert hits == ["config.py"]


def test_pipeline_stage_config_matches():
    """Until the pipeline uses this class directly, its stage config carries the same defaults."""
    from cape_pipeline.pipeline.stages import EmbedConfig as StageEmbedConfig

    if StageEmbedConfig is EmbedConfig:
        return
    assert _config_defaults(StageEmbedConfig) == _config_defaults(EmbedConfig)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"dim": 0}, r"dim: expected an integer ≥ 1"),
        ({"k_hop": 1.5}, r"k_hop: expected an integer ≥ 1"),
        ({"restart": 1.0}, r"restart: expected a value in \(0, 1\)"),
        ({"optimizer": "adam"}, r"optimizer: expected 'radam' or 'rsgd'"),
        ({"geometry": "flat"}, r"geometry"),
        ({"isolated": "drop"}, r"isolated"),
        ({"curvature": 0.0}, r"curvature: expected a finite κ > 0"),
        ({"burn_in_factor": 0.0}, r"burn_in_factor"),
        ({"tol": -1.0}, r"tol"),
        ({"lr": float("nan")}, r"lr: expected a finite value > 0"),
        ({"batch_size": True}, r"batch_size"),
    ],
)
def test_post_init_validates(options, match):
    with pytest.raises(CapeConfigError, match=match):
        EmbedConfig(**options)
    with pytest.raises(CapeConfigError, match=match):
        check_options(**options)
    with pytest.raises(CapeConfigError, match=match):
        dataclasses.replace(EmbedConfig(), **options)


def test_check_options_ignores_unknown_keys_and_returns_the_config():
    cfg = check_options(dim=3, k_hop=1, method="cape_contrastive", extra=None)
    assert cfg == EmbedConfig(dim=3, k_hop=1)


def test_unknown_option_names_it_and_the_known_ones():
    g = _graph()
    with pytest.raises(CapeConfigError, match=r"'dimm'.*known options: dim, k_hop"):
        embed(g, dimm=3)
    emb = embed(g, dim=2, max_epochs=2, tol=0, evaluate=False)
    with pytest.raises(CapeConfigError, match=r"'scal'.*known options: scale"):
        encode(emb, scal=1.0)
    with pytest.raises(CapeConfigError, match="scale: expected a finite number > 0"):
        encode(emb, scale=-1.0)
    with pytest.raises(TypeError, match="EmbedConfig"):
        embed(g, {"dim": 2})  # type: ignore[arg-type]


def test_config_and_options_merge():
    g = _graph()
    cfg = EmbedConfig(dim=3, max_epochs=50, tol=0, seed=4, negatives=None)
    merged = embed(g, cfg, max_epochs=4, evaluate=False)
    plain = embed(g, dim=3, max_epochs=4, tol=0, seed=4, negatives=None, evaluate=False)
    assert (
        merged.params["dim"] == 3
        and merged.params["max_epochs"] == 4
        and merged.params["seed"] == 4
    )
    np.testing.assert_array_equal(merged.hyperboloid, plain.hyperboloid)
    assert merged.loss_history == plain.loss_history
    assert cfg.max_epochs == 50  # the config itself is not changed

    enc = encode(merged, EncodeConfig(scale=0.5))
    np.testing.assert_array_equal(enc.angles, 0.5 * enc.poincare)
    assert encode(merged, EncodeConfig(scale=0.5), scale=0.25).scale == 0.25
    assert encode(merged).scale == DEFAULT_SCALE


def test_pipeline_style_call_with_asdict_and_a_torch_device():
    import torch

    g = _graph()
    kwargs = {
        **dataclasses.asdict(EmbedConfig(dim=2, max_epochs=3, tol=0)),
        "device": torch.device("cpu"),
    }
    emb = embed(g, progress=False, evaluate=False, **kwargs)
    assert emb.params["device"] == "cpu" and emb.params["dim"] == 2
