"""One config for Step I: :class:`DiscoverConfig` holds every option, its default and its checks."""

from __future__ import annotations

import dataclasses
import inspect
import re

import docstring_parser
import numpy as np
import pytest

from cape_pipeline.causal import DiscoverConfig
from cape_pipeline.causal.api import check_options, discover, discover_scored
from cape_pipeline.causal.config import resolve_config
from cape_pipeline.causal.fitting import SolverConfig
from cape_pipeline.errors import CapeConfigError

FIELDS = [f.name for f in dataclasses.fields(DiscoverConfig)]


def _small(n: int = 60, m: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, m))


def test_every_field_documented():
    doc = docstring_parser.parse(inspect.getdoc(DiscoverConfig), style=docstring_parser.DocstringStyle.NUMPYDOC)
    documented = {}
    for p in doc.params:
        for name in re.split(r"\s*,\s*", p.arg_name.strip()):
            documented[name] = p.description or ""
    missing = [f for f in FIELDS if len(documented.get(f, "")) < 10]
    assert not missing, f"undocumented DiscoverConfig fields: {missing}"
    # discover's help lists them too, from that one text
    disc = docstring_parser.parse(inspect.getdoc(discover), style=docstring_parser.DocstringStyle.NUMPYDOC)
    names = {n for p in disc.params for n in re.split(r"\s*,\s*", p.arg_name.strip().lstrip("*"))}
    assert set(FIELDS) <= names and {"data", "config", "feature_names", "progress", "options"} <= names


def test_defaults_written_once():
    d = DiscoverConfig()
    assert (d.method, d.rank, d.threshold, d.support, d.n_candidates, d.min_steps, d.acyclicity) == (
        "cape", 40, 0.2, "auto", 20, 5000, "spectral"
    )
    assert d.effective_posterior == "sampled" and DiscoverConfig(support="screened").effective_posterior == "mean"
    s = SolverConfig()
    # fields whose None means something data-dependent in DiscoverConfig are resolved by the API
    resolved_by_api = {"epochs", "posterior", "dag_threshold"}
    shared = {f.name for f in dataclasses.fields(SolverConfig)} & set(FIELDS)
    assert {"rank", "lambda_sparse", "lr", "h_tol", "hidden", "l1", "l1_pairs", "seed"} <= shared
    for name in shared - resolved_by_api:
        assert getattr(s, name) == getattr(d, name), name
    assert s.posterior == d.effective_posterior
    for fn in (discover, discover_scored):
        for p in inspect.signature(fn).parameters.values():
            if p.name in FIELDS and p.default is not inspect.Parameter.empty:
                assert p.default == getattr(d, p.name), (fn.__name__, p.name)
        assert "rank" not in inspect.signature(fn).parameters  # options come from the config


def test_solver_config_from_discover():
    cfg = DiscoverConfig(threshold=0.3, lr=1e-3, hidden=8, posterior="mean", seed=4)
    s = SolverConfig.from_discover(cfg, rank=3, epochs=7, dag_max_edges_per_row=5)
    assert (s.rank, s.epochs, s.lr, s.hidden, s.posterior, s.seed) == (3, 7, 1e-3, 8, "mean", 4)
    assert s.dag_threshold == 0.3 and s.dag_max_edges_per_row == 5  # None means τ
    assert SolverConfig.from_discover(DiscoverConfig(dag_threshold=0.5), rank=1, epochs=1).dag_threshold == 0.5


def test_unknown_option_named_with_known_ones():
    with pytest.raises(CapeConfigError, match=r"bogus.*expected any of.*'rank'"):
        discover(_small(), epochs=1, device="cpu", bogus=1)
    with pytest.raises(CapeConfigError, match="method_options"):
        DiscoverConfig(method_options={"alpha": 0.1})  # cape takes no baseline options
    with pytest.raises(CapeConfigError, match="lambda1"):
        check_options("partial-correlation", lambda1=0.1)


def test_baseline_keywords_go_to_method_options():
    cfg = check_options("dagma-mlp", hidden=3, T=2)
    assert cfg.hidden == DiscoverConfig().hidden and dict(cfg.method_options) == {"hidden": 3, "T": 2}
    cfg, explicit = resolve_config(None, {"method": "partial-correlation", "alpha": 0.05, "max_edges_per_row": 2})
    assert dict(cfg.method_options) == {"alpha": 0.05} and cfg.max_edges_per_row == 2
    assert explicit == ["method", "alpha", "max_edges_per_row"]
    with pytest.raises(CapeConfigError, match="max_edges_per_row"):
        DiscoverConfig(method="dagma", max_edges_per_row=3)
    with pytest.raises(CapeConfigError, match="hidden: only for method 'cape'"):
        DiscoverConfig(method="correlation", hidden=3)


def test_config_and_options_merge():
    x = _small()
    base = DiscoverConfig(epochs=2, max_outer=1, device="cpu", seed=3, threshold=0.0)
    merged, _ = resolve_config(base, {"seed": 5, "rank": 2})
    assert merged == dataclasses.replace(base, seed=5, rank=2)
    a = discover(x, base, seed=5, rank=2)
    b = discover(x, epochs=2, max_outer=1, device="cpu", seed=5, threshold=0.0, rank=2)
    assert (a.adjacency != b.adjacency).nnz == 0
    assert a.params == {**b.params, "seconds": a.params["seconds"]}
    c = discover(x, base)
    assert c.params["seed"] == 3 and c.params["rank"] == 40
    with pytest.raises(CapeConfigError, match="config: expected a DiscoverConfig"):
        discover(x, {"rank": 2})


def test_params_record_options_as_given():
    x = _small()
    g = discover(x, epochs=1, device="cpu", posterior="mean", max_edges_per_row=2)
    assert g.params["posterior"] == "mean" and g.params["max_edges_per_row"] == 2
    assert "hidden" not in g.params and g.params["support"] == "low-rank"
    h = discover(x, DiscoverConfig(epochs=1, device="cpu", hidden=8))
    assert h.params["hidden"] == 8  # a config's non-default fields are recorded too


def test_true_dag_accepted_by_config_refused_by_discover():
    assert DiscoverConfig(method="true-dag").method == "true-dag"
    assert check_options("true-dag").method == "true-dag"
    with pytest.raises(CapeConfigError, match="from_adjacency"):
        discover(_small(), method="true-dag")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"lr": -1.0}, "lr: expected a finite number > 0, got -1.0"),
        ({"lr": float("inf")}, "lr: expected a finite number > 0, got inf"),
        ({"rank": 0}, "rank: expected an integer >= 1, got 0"),
        ({"rank": True}, "rank: expected an integer >= 1, got True"),
        ({"epochs": 0}, "epochs: expected an integer >= 1 or None, got 0"),
        ({"threshold": "x"}, "threshold: expected a finite number >= 0, got 'x'"),
        ({"acyclicity": "expm"}, "acyclicity: expected one of spectral, majorant, got 'expm'"),
        ({"method": "pc"}, "method: expected one of cape, "),
        ({"device": "tpu9"}, "device: expected 'auto', 'cpu' or 'cuda[:i]', got 'tpu9'"),
        ({"posterior": "laplace"}, "posterior: expected one of sampled, mean, got 'laplace'"),
        ({"support": "dense"}, "support: expected one of auto, low-rank, screened, learned, regression, got 'dense'"),
        ({"n_candidates": 0}, "n_candidates: expected an integer >= 1, got 0"),
        ({"min_steps": -1}, "min_steps: expected an integer >= 0, got -1"),
        ({"l1": "bogus"}, "l1: expected one of auto, exact, sampled, surrogate, got 'bogus'"),
        ({"max_edges_per_row": 0}, "max_edges_per_row: expected an integer >= 1 or None, got 0"),
        ({"support": "screened", "posterior": "sampled"}, "posterior: not used with support='screened'"),
        ({"support": "screened", "l1": "exact"}, "l1: not used with support='screened'"),
        ({"method": "correlation", "support": "screened"}, "support: only for method 'cape'"),
    ],
)
def test_validation_messages(kw, message):
    with pytest.raises(CapeConfigError) as err:
        DiscoverConfig(**kw)
    assert str(err.value).startswith(message), str(err.value)
    with pytest.raises(CapeConfigError):  # the same check through the legacy wrapper
        check_options(**kw)
