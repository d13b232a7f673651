"""The options of Step I: :class:`DiscoverConfig` holds the shared options, the algorithm and one
config per algorithm, each with its own defaults and checks."""

from __future__ import annotations

import dataclasses
import inspect
import re
import warnings

import docstring_parser
import numpy as np
import pytest

from cape_pipeline.causal import DiscoverConfig
from cape_pipeline.causal.api import check_options, discover, discover_scored
from cape_pipeline.causal.config import resolve_config
from cape_pipeline.causal.fitting import AugmentedLagrangianConfig
from cape_pipeline.causal.learned import LearnedConfig, learned_options
from cape_pipeline.causal.lowrank import LowRankConfig, SolverConfig
from cape_pipeline.causal.regression import RegressionConfig
from cape_pipeline.causal.screened import ScreenedConfig
from cape_pipeline.errors import CapeConfigError

FIELDS = [f.name for f in dataclasses.fields(DiscoverConfig)]
CONFIGS = (DiscoverConfig, RegressionConfig, LowRankConfig, ScreenedConfig, LearnedConfig, AugmentedLagrangianConfig)


def _small(n: int = 60, m: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, m))


def _own_docs(cls: type) -> dict[str, str]:
    """The fields ``cls``'s own docstring documents (its Attributes)."""
    doc = docstring_parser.parse(cls.__doc__ or "", style=docstring_parser.DocstringStyle.NUMPYDOC)
    return {name: p.description or "" for p in doc.params for name in re.split(r"\s*,\s*", p.arg_name.strip())}


def _documented(cls: type) -> dict[str, str]:
    """Every field documented by ``cls`` or a base class of it (a field is documented where it is declared)."""
    out: dict[str, str] = {}
    for c in reversed(cls.__mro__[:-1]):
        out.update(_own_docs(c))
    return out


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_field_documented(cls):
    documented = _documented(cls)
    missing = [f.name for f in dataclasses.fields(cls) if len(documented.get(f.name, "")) < 10]
    assert not missing, f"undocumented {cls.__name__} fields: {missing}"


def test_discover_help_lists_the_fields():
    disc = docstring_parser.parse(inspect.getdoc(discover), style=docstring_parser.DocstringStyle.NUMPYDOC)
    names = {n for p in disc.params for n in re.split(r"\s*,\s*", p.arg_name.strip().lstrip("*"))}
    assert set(FIELDS) <= names and {"data", "config", "feature_names", "progress", "options"} <= names


def test_each_algorithm_has_its_real_defaults():
    d = DiscoverConfig()
    assert (d.method, d.algorithm, d.covariates, d.max_edges_per_row) == ("cape", "auto", "auto", None)
    assert d.regression == RegressionConfig() and d.low_rank == LowRankConfig()
    assert (d.regression.n_candidates, d.regression.min_effect, d.regression.fdr, d.regression.n_splits) == (
        "auto", 0.003, 0.05, 8)
    assert (d.learned.hidden, d.learned.lr, d.learned.batch_size, d.learned.epochs, d.learned.n_candidates) == (
        10, 1e-2, 256, 200, 20)
    assert (d.low_rank.rank, d.low_rank.threshold, d.low_rank.min_steps, d.low_rank.acyclicity) == (
        40, 0.2, 5000, "spectral")
    assert d.low_rank.posterior == "sampled" and d.screened.n_candidates == 20
    # an algorithm holds only the options it uses
    assert not {"rank", "dag_threshold", "posterior", "l1"} & {f.name for f in dataclasses.fields(ScreenedConfig)}
    assert not {"threshold", "epochs", "lr"} & {f.name for f in dataclasses.fields(RegressionConfig)}
    for fn in (discover, discover_scored):
        assert "rank" not in inspect.signature(fn).parameters  # options come from the config


#: every option of the low-rank and screened algorithms with its default, as the configs held them
#: before their shared options moved to one base (the --set spellings and the cache keys read these)
LOW_RANK_DEFAULTS = {
    "rank": 40, "threshold": 0.2, "lambda_sparse": 1.0, "epochs": None, "min_steps": 5000, "batch_size": 128,
    "lr": 3e-3, "acyclicity": "spectral", "max_outer": 20, "h_tol": 1e-8, "rho_max": 1e16, "rho_init": 1.0,
    "hidden": 64, "power_iters": 10, "weight_decay": 1e-2, "init_scale": 0.1, "l1": "auto", "l1_exact_max": 500,
    "l1_pairs": 4096, "dag_threshold": None, "posterior": "sampled",
}
SCREENED_DEFAULTS = {
    "n_candidates": 20, "threshold": 0.2, "lambda_sparse": 1.0, "epochs": None, "min_steps": 5000, "batch_size": 128,
    "lr": 3e-3, "max_outer": 20, "rho_max": 1e16, "rho_init": 1.0, "hidden": 64, "power_iters": 10,
    "weight_decay": 1e-2,
}
#: a small case, and the DAG each algorithm found on it (edges; (M, M) scores to 5 decimals) when
#: the two configs each wrote out every option
SMALL_CASE = {
    "low-rank": {"epochs": 10, "max_outer": 2, "threshold": 0.02, "min_steps": 0},
    "screened": {"epochs": 10, "max_outer": 2, "n_candidates": 3, "threshold": 0.0005, "min_steps": 0},
}
SMALL_CASE_DAGS = {'low-rank': {'edges': [(0, 3), (1, 0), (1, 2), (1, 3), (1, 4), (2, 0), (2, 3), (4, 0), (4, 2), (4, 3), (4, 5)], 'scores': [[0.0, 0.05551, 0.02333, 0.03546, -0.00548, -0.00858], [0.06115, 0.0, 0.04152, 0.03422, -0.04123, -0.01605], [0.04458, 0.01468, 0.0, 0.03287, -0.03271, -0.01061], [0.02686, 0.02817, 0.0226, 0.0, -0.02623, 0.00143], [-0.03234, -0.03456, -0.06881, -0.04328, 0.0, 0.02537], [-0.00372, 0.01405, 0.00171, -0.00411, 0.00082, 0.0]]}, 'screened': {'edges': [(0, 1), (0, 3), (0, 4), (0, 5), (1, 3), (2, 1), (2, 5), (4, 3)], 'scores': [[0.0, 0.08832, 0.0, 0.08627, -0.08199, -0.02721], [0.0869, 0.0, 0.08739, 0.08713, 0.0, 0.0], [0.0, 0.08811, 0.0, 0.0, 0.0, 0.00201], [0.0, 0.08601, 0.08644, 0.0, -0.08653, 0.0], [-0.08446, 0.0, 0.0, -0.0875, 0.0, 0.0], [-0.02425, 0.0, 0.0, 0.0, 0.0, 0.0]]}}


def test_low_rank_and_screened_share_their_augmented_lagrangian_options():
    """The options the two SEM-VAE algorithms share are one base config's, documented once there;
    every option keeps its name, default, --set spelling and place in the cache key, and the
    DAGs of a small case are the ones found before."""
    from cape_pipeline._utils import canonical_json
    from cape_pipeline.pipeline.config import build_config
    from cape_pipeline.pipeline.stages.discover import DiscoverStageConfig

    assert dataclasses.asdict(LowRankConfig()) == LOW_RANK_DEFAULTS
    assert dataclasses.asdict(ScreenedConfig()) == SCREENED_DEFAULTS
    assert canonical_json(dataclasses.asdict(LowRankConfig())) == canonical_json(LOW_RANK_DEFAULTS)
    shared = {f.name for f in dataclasses.fields(AugmentedLagrangianConfig)}
    assert shared == set(LOW_RANK_DEFAULTS) & set(SCREENED_DEFAULTS) and len(shared) == 12
    for cls in (LowRankConfig, ScreenedConfig):
        assert issubclass(cls, AugmentedLagrangianConfig) and not shared & set(_own_docs(cls)), cls.__name__
    cfg = build_config(DiscoverStageConfig, "discover", {"low_rank.max_outer": 3, "screened.rho_init": 2.0})
    assert (cfg.low_rank.max_outer, cfg.screened.rho_init) == (3, 2.0)
    with pytest.raises(CapeConfigError, match=r"^lr: expected a finite number > 0, got 0"):
        ScreenedConfig(lr=0)  # the shared checks still run

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 6))
    x[:, 1] += 0.9 * x[:, 0]
    x[:, 2] += 0.8 * x[:, 1]
    x[:, 3] += 0.9 * x[:, 1]
    x[:, 4] -= 0.8 * x[:, 3]
    for algorithm, options in SMALL_CASE.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g, scores = discover_scored(x, algorithm=algorithm, device="cpu", seed=0,
                                        **{algorithm.replace("-", "_"): options})
        a = g.adjacency.tocoo()
        assert sorted(zip(a.row.tolist(), a.col.tolist(), strict=True)) == SMALL_CASE_DAGS[algorithm]["edges"]
        np.testing.assert_allclose(scores, SMALL_CASE_DAGS[algorithm]["scores"], atol=2e-5)


def test_learned_options_are_its_config():
    kw = learned_options(LearnedConfig(hidden=5, threshold=0.4), seed=3)
    assert (kw["hidden"], kw["lr"], kw["batch_size"], kw["max_epochs_screen"], kw["seed"]) == (5, 1e-2, 256, 200, 3)
    assert kw["screen_threshold"] == 0.4 and kw["threshold"] == 0.2


def test_solver_config_built_from_low_rank_config():
    cfg = LowRankConfig(threshold=0.3, lr=1e-3, hidden=8, posterior="mean")
    s = SolverConfig.from_config(cfg, seed=4, rank=3, epochs=7, dag_max_edges_per_row=5)
    assert (s.rank, s.epochs, s.lr, s.hidden, s.posterior, s.seed) == (3, 7, 1e-3, 8, "mean", 4)
    assert s.dag_threshold == 0.3 and s.dag_max_edges_per_row == 5  # None means τ
    assert SolverConfig.from_config(LowRankConfig(dag_threshold=0.5), seed=0, rank=1, epochs=1).dag_threshold == 0.5
    assert isinstance(s, LowRankConfig)  # its fields are LowRankConfig's, not repeated
    assert SolverConfig().epochs == 100 and SolverConfig().dag_threshold is None


def test_nested_dicts_and_their_messages():
    cfg = DiscoverConfig(regression={"fdr": 0.1})
    assert cfg.regression == RegressionConfig(fdr=0.1)
    with pytest.raises(CapeConfigError, match=r"^regression\.fdr: expected a number in \(0, 1\), got 2"):
        DiscoverConfig(regression={"fdr": 2})
    with pytest.raises(CapeConfigError, match=r"regression: unknown option\(s\) \['fdrr'\].*did you mean 'regression.fdr'"):
        DiscoverConfig(regression={"fdrr": 0.1})
    with pytest.raises(CapeConfigError, match="low_rank: expected a LowRankConfig"):
        DiscoverConfig(low_rank=3)


def test_options_of_an_algorithm_not_run_are_an_error():
    with pytest.raises(CapeConfigError, match=r"^low_rank\.rank: not used by algorithm='regression'"):
        DiscoverConfig(algorithm="regression", low_rank=LowRankConfig(rank=5))
    with pytest.raises(CapeConfigError, match=r"regression\.fdr, learned\.hidden: not used by algorithm='screened'"):
        DiscoverConfig(algorithm="screened", regression={"fdr": 0.1}, learned={"hidden": 5})
    # with "auto" each config applies where auto picks its algorithm
    cfg = DiscoverConfig(regression={"fdr": 0.1}, low_rank={"epochs": 2})
    assert cfg.options_set() == ["regression.fdr", "low_rank.epochs"]
    g = discover(_small(), cfg, device="cpu")
    assert g.params["algorithm"] == "low-rank" and g.params["unused_options"] == ["regression.fdr"]


def test_support_is_a_deprecated_alias():
    with pytest.warns(FutureWarning, match=r"support=\.\.\.\) is now DiscoverConfig\(algorithm="):
        cfg = DiscoverConfig(support="screened")
    assert cfg.algorithm == "screened" and "support" not in FIELDS
    with pytest.warns(FutureWarning, match="support is now called algorithm"):
        assert check_options(support="learned").algorithm == "learned"
    with pytest.raises(CapeConfigError, match="earlier name of algorithm"):
        DiscoverConfig(algorithm="learned", support="screened")


def test_flat_keywords_of_one_algorithm_warn_and_nest():
    with pytest.warns(FutureWarning, match=r"min_effect is now regression=\{'min_effect': 0.01\}"):
        cfg = check_options(min_effect=0.01)
    assert cfg.regression.min_effect == 0.01 and cfg.algorithm == "auto"
    with pytest.warns(FutureWarning, match="rank is now low_rank="):
        assert check_options(rank=5).low_rank.rank == 5
    with pytest.raises(CapeConfigError, match="given both flat and as"):
        check_options(fdr=0.1, regression={"fdr": 0.2})


def test_ambiguous_flat_keywords_need_an_algorithm():
    with pytest.raises(CapeConfigError, match=r"^epochs: an option of several algorithms; give it to one: "
                                              r"low_rank=\{'epochs': 3\} or screened=.* or learned="):
        check_options(epochs=3)
    with pytest.warns(FutureWarning, match=r"epochs is now learned="):
        assert check_options(algorithm="learned", epochs=3).learned.epochs == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert check_options(algorithm="screened", n_candidates=4).screened.n_candidates == 4
        assert check_options(algorithm="regression", n_candidates=4).regression.n_candidates == 4
        with pytest.raises(CapeConfigError, match=r"threshold: not an option of algorithm 'regression'; it is one of "
                                                  r"low_rank="):
            check_options(algorithm="regression", threshold=0.3)


def test_unknown_option_named_with_known_ones():
    with pytest.raises(CapeConfigError, match=r"bogus.*expected any of.*'algorithm'"):
        discover(_small(), device="cpu", bogus=1)
    with pytest.raises(CapeConfigError, match="method_options"):
        DiscoverConfig(method_options={"alpha": 0.1})  # cape takes no baseline options
    with pytest.raises(CapeConfigError, match="lambda1"):
        check_options("partial-correlation", lambda1=0.1)


def test_baseline_keywords_go_to_method_options():
    cfg = check_options("dagma-mlp", hidden=3, T=2)
    assert cfg.learned == LearnedConfig() and dict(cfg.method_options) == {"hidden": 3, "T": 2}
    cfg, explicit = resolve_config(None, {"method": "partial-correlation", "alpha": 0.05, "max_edges_per_row": 2})
    assert dict(cfg.method_options) == {"alpha": 0.05} and cfg.max_edges_per_row == 2
    assert explicit == ["method", "max_edges_per_row", "alpha"]
    assert dict(check_options("correlation", threshold=0.3).method_options) == {"threshold": 0.3}
    with pytest.raises(CapeConfigError, match="max_edges_per_row"):
        DiscoverConfig(method="dagma", max_edges_per_row=3)
    with pytest.raises(CapeConfigError, match=r"learned\.hidden: only for method 'cape'"):
        DiscoverConfig(method="correlation", learned={"hidden": 3})
    with pytest.raises(CapeConfigError, match=r"algorithm: only for method 'cape'"):
        DiscoverConfig(method="correlation", algorithm="learned")


def test_config_and_options_merge():
    x = _small()
    base = DiscoverConfig(device="cpu", seed=3, low_rank=LowRankConfig(epochs=2, max_outer=1, threshold=0.0))
    merged, _ = resolve_config(base, {"seed": 5, "low_rank": {"rank": 2}})
    assert merged == dataclasses.replace(base, seed=5, low_rank=dataclasses.replace(base.low_rank, rank=2))
    a = discover(x, base, seed=5, low_rank={"rank": 2})
    b = discover(x, device="cpu", seed=5, low_rank={"epochs": 2, "max_outer": 1, "threshold": 0.0, "rank": 2})
    assert (a.adjacency != b.adjacency).nnz == 0
    assert a.params == {**b.params, "seconds": a.params["seconds"]}
    c = discover(x, base)
    assert c.params["seed"] == 3 and c.params["rank"] == 40
    with pytest.raises(CapeConfigError, match="config: expected a DiscoverConfig"):
        discover(x, {"rank": 2})


def test_params_record_the_algorithm_and_its_options():
    x = _small()
    g = discover(x, device="cpu", low_rank={"epochs": 1, "posterior": "mean"}, max_edges_per_row=2)
    assert g.params["posterior"] == "mean" and g.params["max_edges_per_row"] == 2 and g.params["hidden"] == 64
    assert g.params["algorithm"] == g.params["support"] == "low-rank"
    assert g.params["algorithm_requested"] == g.params["support_requested"] == "auto"
    assert "min_effect" not in g.params  # another algorithm's options are not recorded


def test_true_dag_accepted_by_config_refused_by_discover():
    assert DiscoverConfig(method="true-dag").method == "true-dag"
    assert check_options("true-dag").method == "true-dag"
    with pytest.raises(CapeConfigError, match="from_adjacency"):
        discover(_small(), method="true-dag")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"low_rank": {"lr": -1.0}}, "low_rank.lr: expected a finite number > 0, got -1.0"),
        ({"learned": {"lr": float("inf")}}, "learned.lr: expected a finite number > 0, got inf"),
        ({"low_rank": {"rank": 0}}, "low_rank.rank: expected an integer >= 1, got 0"),
        ({"low_rank": {"rank": True}}, "low_rank.rank: expected an integer >= 1, got True"),
        ({"screened": {"epochs": 0}}, "screened.epochs: expected an integer >= 1 or None, got 0"),
        ({"low_rank": {"threshold": "x"}}, "low_rank.threshold: expected a finite number >= 0, got 'x'"),
        ({"low_rank": {"acyclicity": "expm"}}, "low_rank.acyclicity: expected one of spectral, majorant, got 'expm'"),
        ({"method": "pc"}, "method: expected one of cape, "),
        ({"device": "tpu9"}, "device: expected 'auto', 'cpu' or 'cuda[:i]', got 'tpu9'"),
        ({"low_rank": {"posterior": "laplace"}}, "low_rank.posterior: expected one of sampled, mean, got 'laplace'"),
        ({"algorithm": "dense"}, "algorithm: expected one of auto, low-rank, screened, learned, regression, got 'dense'"),
        ({"screened": {"n_candidates": 0}}, "screened.n_candidates: expected an integer >= 1, got 0"),
        ({"regression": {"n_candidates": 0}}, "regression.n_candidates: expected 'auto' or an integer >= 1, got 0"),
        ({"low_rank": {"min_steps": -1}}, "low_rank.min_steps: expected an integer >= 0, got -1"),
        ({"low_rank": {"l1": "bogus"}}, "low_rank.l1: expected one of auto, exact, sampled, surrogate, got 'bogus'"),
        ({"max_edges_per_row": 0}, "max_edges_per_row: expected an integer >= 1 or None, got 0"),
        ({"regression": {"min_effect": 1.0}}, "regression.min_effect: expected a number in [0, 1), got 1.0"),
        ({"regression": {"order_rounds": -1}}, "regression.order_rounds: expected 'auto' or an integer >= 0"),
        ({"learned": {"epochs": None}}, "learned.epochs: expected an integer >= 1, got None"),
        ({"method": "correlation", "algorithm": "screened"}, "algorithm: only for method 'cape'"),
        ({"method": "correlation", "method_options": {"threshold": -1}}, "method_options.threshold: expected"),
    ],
)
def test_validation_messages(kw, message):
    with pytest.raises(CapeConfigError) as err:
        DiscoverConfig(**kw)
    assert str(err.value).startswith(message), str(err.value)
    with pytest.raises(CapeConfigError):  # the same check through the keyword API
        check_options(**kw)


def test_the_constructor_names_the_current_spelling_of_a_flat_or_misspelled_option():
    with pytest.raises(CapeConfigError, match=r"fdr belongs to regression=\{'fdr': \.\.\.\}"):
        DiscoverConfig(fdr=0.1)
    with pytest.raises(CapeConfigError, match=r"epochs belongs to low_rank=.* or screened=.* or learned="):
        DiscoverConfig(epochs=3)
    with pytest.raises(CapeConfigError, match=r"algoritm is not an option \(did you mean 'algorithm'\?\)$"):
        DiscoverConfig(algoritm="regression")
    assert DiscoverConfig(algorithm="regression", regression={"fdr": 0.1}).regression.fdr == 0.1
