from __future__ import annotations

import numpy as np
import pytest

import cape_pipeline as cape
from cape_pipeline import tl
from cape_pipeline.errors import CapeDataError


def _data():
    a = cape.read("synthetic-mlp", n_nodes=6, n_obs=200, seed=2)
    return cape.pp.preprocess(a, copy=True)


def test_discover_embed_encode_write_axes():
    a = _data()
    tl.discover(a, low_rank={"epochs": 3, "max_outer": 2})
    assert a.varp["cape_dag"].shape == (6, 6) and "discover" in a.uns["cape"]
    tl.embed(a, dim=4, max_epochs=5, tol=0)
    assert a.varm["cape_hyperboloid"].shape == (6, 5) and a.varm["cape_poincare"].shape == (6, 4)
    assert "cape_pagerank" in a.var
    tl.encode(a)
    np.testing.assert_allclose(a.varm["cape_angles"], (np.pi / 4) * a.varm["cape_poincare"])
    assert a.uns["cape"]["encode"]["d"] == 4


def test_copy_leaves_input_untouched():
    a = _data()
    b = tl.discover(a, low_rank={"epochs": 2, "max_outer": 1}, copy=True)
    assert "cape_dag" not in a.varp and "cape_dag" in b.varp


def test_encode_from_saved_encodings_aligns_by_name(tmp_path):
    from cape_pipeline.encodings import encode
    from cape_pipeline.hyperbolic import embed

    a = _data()
    graph = cape.CausalGraph.from_adjacency(a.varp["true_dag"], a.var_names)
    enc = encode(embed(graph, dim=4, max_epochs=5, tol=0), graph=graph)
    enc.save(tmp_path / "enc")
    b = a[:, ::-1].copy()  # another dataset with the features in another order
    tl.encode(b, str(tmp_path / "enc"))
    want = enc.angles[[list(enc.feature_names).index(n) for n in b.var_names]]
    np.testing.assert_array_equal(b.varm["cape_angles"], want)
    c = cape.read("synthetic-mlp", n_nodes=7, n_obs=50, seed=2)  # x6 is not in the encodings
    with pytest.raises(CapeDataError, match="x6"):
        tl.encode(c, str(tmp_path / "enc"))
    tl.encode(c, str(tmp_path / "enc"), missing="zero")
    assert (c.varm["cape_angles"][-1] == 0).all()


def test_missing_prerequisites_are_clear():
    a = _data()
    with pytest.raises(CapeDataError, match="run cape_pipeline.tl.discover"):
        tl.embed(a)
    with pytest.raises(CapeDataError, match="run cape_pipeline.tl.embed"):
        tl.encode(a)


@pytest.mark.parametrize("name", ["discover", "embed"])
def test_tl_options_are_keywords_with_the_config_defaults(name):
    """``help(tl.discover)`` shows the options a user sets, with defaults that cannot drift from
    the config dataclass, and the docstring documents each."""
    import dataclasses
    import inspect

    from cape_pipeline.causal.config import DiscoverConfig
    from cape_pipeline.hyperbolic import EmbedConfig
    from cape_pipeline.pipeline.params import USER_OPTIONS

    func, cls = {"discover": (tl.discover, DiscoverConfig), "embed": (tl.embed, EmbedConfig)}[name]
    sig = inspect.signature(func)
    # a nested user option (discover's regression.fdr) is a keyword by its last name; the pipeline's
    # own option (discover's hold_out_test_conditions, which needs the train stage) is not one
    own = {f.name for f in dataclasses.fields(cls)}
    users = [n for n in USER_OPTIONS[name] if n.split(".")[0] in own]
    assert set(USER_OPTIONS[name]) - set(users) <= {"hold_out_test_conditions"}
    default = cls()
    defaults = {n.rsplit(".", 1)[-1]: getattr(getattr(default, n.split(".")[0]), n.rsplit(".", 1)[-1]) if "." in n
                else getattr(default, n) for n in users}
    options = [p for p in sig.parameters.values() if p.name in defaults]
    assert [p.name for p in options] == [n.rsplit(".", 1)[-1] for n in users]
    for p in options:
        assert p.kind is inspect.Parameter.KEYWORD_ONLY
        assert p.default == defaults[p.name], p.name
        assert f"\n    {p.name}\n" in func.__doc__, p.name
    assert {"config", "key_added", "copy"} <= set(sig.parameters)


def test_tl_unknown_option_names_the_closest():
    from cape_pipeline.errors import CapeConfigError

    a = _data()
    with pytest.raises(CapeConfigError, match=r"did you mean 'min_effect'\?"):
        tl.discover(a, min_efect=0.01)
    tl.discover(a, low_rank={"epochs": 3, "max_outer": 2})
    with pytest.raises(CapeConfigError, match=r"did you mean 'max_epochs'\?"):
        tl.embed(a, max_epoch=5)


def test_tl_keywords_left_at_their_default_keep_the_config():
    from cape_pipeline.causal.config import DiscoverConfig
    from cape_pipeline.causal.regression import RegressionConfig
    from cape_pipeline.tl._steps import _options

    assert _options(DiscoverConfig, {"method": "cape", "seed": 3}, {"n_states": 5}) == {"seed": 3, "n_states": 5}
    assert _options(RegressionConfig, {"fdr": 0.05, "n_splits": 2}, {}) == {"n_splits": 2}
    a = _data()
    cfg = DiscoverConfig(algorithm="regression", regression={"fdr": 0.2, "n_splits": 1})
    tl.discover(a, config=cfg, min_effect=0.01)  # the keyword updates the config's regression options
    assert a.uns["cape"]["discover"]["fdr"] == 0.2 and a.uns["cape"]["discover"]["min_effect"] == 0.01
