"""Every parameter is validated before any stage runs; every
parameter is listed with its default and meaning (``cape params``); shell completion; the
exported manifests list only files that exist in ``--out``."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cape_pipeline.cli import main
from cape_pipeline.cli.run import STAGE_NAMES, complete_set, complete_source, complete_stage
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.pipeline import STAGE_ORDER, STAGES, run_pipeline
from cape_pipeline.pipeline.params import param_docs, stage_params

# (--set, words the one-line error must contain): each would have failed only when its stage
# started, after ingest/preprocess (and for train, Steps I-III) had run
BAD = [
    ("ingest.modality=rna", "ingest.modality"),
    ("preprocess.n_top_genes=0", "preprocess.n_top_genes"),
    ("discover.low_rank.lr=-1", "discover.low_rank.lr: expected a finite number > 0"),
    ("discover.learned.lr=.inf", "discover.learned.lr: expected a finite number > 0"),
    ("discover.algorithm=dense", "discover.algorithm: expected one of"),
    ("discover.support=dense", "discover.algorithm: expected one of"),
    ("discover.screened.n_candidates=0", "discover.screened.n_candidates"),
    ("discover.low_rank.acyclicity=trace", "discover.low_rank.acyclicity"),
    ("discover.regression.fdr=2", "discover.regression.fdr: expected a number in (0, 1)"),
    ("discover.regression.fdrr=0.1", "did you mean 'discover.regression.fdr'?"),
    ("discover.regression.n_splits=two", "discover.regression.n_splits: expected an integer"),
    ("discover.lr=0.1", "discover.lr: an option of several algorithms; give it to one: discover.low_rank.lr or"),
    ("discover.method=pc", "discover.method"),
    ("embed.optimizer=sgd", "embed.optimizer"),
    ("embed.restart=1.5", "embed.restart"),
    ("embed.curvature=0", "embed.curvature"),
    ("embed.device=tpu", "embed.device"),
    ("encode.scale=-1", "encode.scale"),
    ("train.lr=0", "train.lr"),
    ("train.batch_size=0", "train.batch_size"),
    ("train.backbone=bert", "train: backbone 'bert'"),
    ("train.n_heads=3", "divisible by 2 * n_heads"),
    ("train.seed=-1", "train"),
]


def _stage_dirs(workdir: Path) -> list[str]:
    return sorted(p.name for p in workdir.iterdir() if p.is_dir() and not p.name.startswith(".")) if workdir.exists() else []


@pytest.mark.parametrize("assignment,needle", BAD)
def test_bad_parameter_fails_before_any_stage_runs(assignment, needle, tmp_path, capsys):
    work = tmp_path / "w"
    code = main(["run", "synthetic-mlp", "--workdir", str(work), "--set", assignment])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert needle in err and err.startswith("error:") and "\n" not in err, err
    assert _stage_dirs(work) == []  # nothing ran, nothing cached


def test_cross_stage_check_uses_embed_dim():
    """train's width defaults to 2 × embed.dim: dim 3 → d_model 6 cannot be split into 4 heads."""
    with pytest.raises(CapeConfigError, match=r"d_model \(6\).*2 × embed\.dim"):
        run_pipeline("synthetic-mlp", workdir="unused", overrides={"embed": {"dim": 3}})
    # the same dim is fine when the run stops before train
    from cape_pipeline.pipeline.runner import build_stage_configs

    cfgs = build_stage_configs(list(STAGE_ORDER[:4]), {"embed": {"dim": 3}}, seed=None, device=None)
    assert cfgs["embed"].dim == 3


def test_seed_negative_on_the_command_line(tmp_path, capsys):
    code = main(["run", "sachs", "--workdir", str(tmp_path), "--seed", "-1"])
    assert code == 2 and "--seed -1" in capsys.readouterr().err


def test_valid_defaults_pass_validation():
    from cape_pipeline.pipeline.runner import build_stage_configs

    cfgs = build_stage_configs(list(STAGE_ORDER), {}, seed=0, device="cpu")
    assert set(cfgs) == set(STAGE_ORDER)


# ---------------------------------------------------------------------------- cape params
def test_every_stage_parameter_has_default_and_meaning():
    assert tuple(STAGE_NAMES) == tuple(STAGE_ORDER)
    for stage in STAGE_ORDER:
        docs = stage_params(stage)
        default = STAGES[stage].config_cls()
        names = [f"{f.name}.{g.name}" if dataclasses.is_dataclass(getattr(default, f.name)) else f.name
                 for f in dataclasses.fields(default) if not f.metadata.get("derived")
                 for g in (dataclasses.fields(getattr(default, f.name)) if dataclasses.is_dataclass(getattr(default, f.name))
                           else [None])]
        assert [d.name for d in docs] == names
        undocumented = [d.name for d in docs if len(d.help) < 10]
        assert not undocumented, f"{stage}: no meaning for {undocumented}"


def test_param_docs_reads_grouped_numpydoc_entries():
    def f(a, b, c):
        """Doc.

        Parameters
        ----------
        a, b
            Shared ``text`` for :func:`~x.y.zeta`.
        c
            Own.
        """

    assert param_docs(f) == {"a": "Shared text for zeta.", "b": "Shared text for zeta.", "c": "Own."}


def test_cape_params_lists_defaults_and_meanings(capsys):
    code = main(["params", "embed"])
    out = capsys.readouterr().out
    assert code == 0
    for f in dataclasses.fields(STAGES["embed"].config_cls):
        assert f.name in out
    assert "radam" in out and "PageRank" in out  # a default and a meaning
    code = main(["params", "nope"])
    assert code == 2 and "expected one of ingest" in capsys.readouterr().err


def test_stage_help_points_to_params(capsys):
    main(["discover", "--help"])
    assert "cape params discover" in capsys.readouterr().out


# ---------------------------------------------------------------------------- completion
def test_completion_callbacks(tmp_path, monkeypatch):
    assert complete_stage("e") == ["embed", "encode", "evaluate"]
    assert "discover." in complete_set("dis")
    assert complete_set("discover.al") == ["discover.algorithm="]
    assert complete_set("discover.regression.f") == ["discover.regression.fdr="]
    assert complete_set("nope.x") == []
    (tmp_path / "cells.h5ad").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "sub").mkdir()
    got = complete_source(str(tmp_path) + "/")
    assert str(tmp_path / "cells.h5ad") in got and str(tmp_path / "sub") + "/" in got
    assert not any(g.endswith("notes.txt") for g in got)
    monkeypatch.chdir(tmp_path)
    assert "cells.h5ad" in complete_source("ce") and "notes.txt" not in complete_source("")
    assert "sachs" in complete_source("sa")


def test_shell_completion_end_to_end():
    """bash asks the program itself (click's protocol, ``_CAPE_COMPLETE``)."""
    env = {**os.environ, "_CAPE_COMPLETE": "complete_bash", "COMP_WORDS": "cape run --until di", "COMP_CWORD": "3"}
    code = "import sys; from cape_pipeline.cli import entrypoint; sys.argv = ['cape']; entrypoint()"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.stdout.split() == ["discover"], p.stderr
    # (--show-completion / --install-completion detect the calling shell from the process tree,
    # which a test runner may not have; the protocol above is what the installed script calls)


# ---------------------------------------------------------------------------- exported manifests
def test_exported_manifests_list_only_files_in_out(tmp_path):
    over = {"ingest": {"n_nodes": 8, "n_obs": 300, "seed": 1}, "discover": {"method": "true-dag"},
            "embed": {"max_epochs": 5, "dim": 4}}
    out = tmp_path / "out"
    run_pipeline("synthetic-mlp", until="encode", workdir=tmp_path / "w", overrides=over, out=out)
    run_pipeline("synthetic-mlp", until="discover", workdir=tmp_path / "w", overrides=over, out=out)
    from cape_pipeline._utils import hash_file

    for name in ("encode_manifest.json", "discover_manifest.json"):
        man = json.loads((out / name).read_text())
        assert man["files"], name
        for f, meta in man["files"].items():
            assert (out / f).is_file(), f"{name} lists {f}, absent from --out"
            assert hash_file(out / f) == meta["blake2b"]
        assert Path(man["cache_artifact"]).is_dir()
    assert "histories.json" not in json.loads((out / "encode_manifest.json").read_text())["files"]


def test_attention_arms(tmp_path):
    from cape_pipeline.tasks.arms import Arm

    assert Arm.parse("cape/no-id@dot") == Arm("cape", identity=False, attention="dot")
    assert Arm.parse("none").attention == "dot" and str(Arm.parse("cape/no-id@dot")) == "cape/no-id"
    arm = Arm.parse("cape@cone-umbral")
    assert str(arm) == "cape@cone-umbral" and arm.uses_graph and not Arm.parse("none").uses_graph
    assert Arm.parse("none").with_attention("riemann").uses_graph
    with pytest.raises(CapeConfigError, match="attention 'nope'"):
        Arm.parse("cape@nope")
    with pytest.raises(CapeConfigError, match="pe 'capo' unknown"):
        Arm.parse("capo")
    code = main(["run", "sachs", "--workdir", str(tmp_path), "--compare", "attention=dot,nope"])
    assert code == 2


def test_compare_attention_builds_arms(monkeypatch, tmp_path):
    seen = {}

    def fake_run(source, **kw):
        seen.update(kw["overrides"]["train"])
        raise CapeConfigError("stop")

    import cape_pipeline.pipeline.runner as runner

    monkeypatch.setattr(runner, "run_pipeline", fake_run)
    main(["run", "sachs", "--workdir", str(tmp_path), "--compare", "attention=dot,dot"])
    assert seen == {"arm": "cape", "compare": ["cape"]}


def test_compare_takes_the_peer_methods(monkeypatch, tmp_path):
    """The peer papers' command lines: every attention and every PE of the peer papers is a name."""
    seen = []

    def fake_run(source, **kw):
        seen.append(dict(kw["overrides"]["train"]))
        raise CapeConfigError("stop")

    import cape_pipeline.pipeline.runner as runner

    monkeypatch.setattr(runner, "run_pipeline", fake_run)
    main(["run", "sachs", "--workdir", str(tmp_path), "--compare", "attention=dot,cone-penumbral,cone-umbral,riemann"])
    main(["run", "sachs", "--workdir", str(tmp_path), "--compare", "arm=cape,ape-tree,learned-small-norm,rank-value,none"])
    assert seen[0] == {"arm": "cape", "compare": ["cape@cone-penumbral", "cape@cone-umbral", "cape@riemann"]}
    assert seen[1] == {"arm": "cape", "compare": ["ape-tree", "learned-small-norm", "rank-value", "none"]}


def test_compare_pe_is_the_earlier_spelling_of_compare_arm(monkeypatch, tmp_path):
    seen = []

    def fake_run(source, **kw):
        seen.append(dict(kw["overrides"]["train"]))
        raise CapeConfigError("stop")

    import cape_pipeline.pipeline.runner as runner

    monkeypatch.setattr(runner, "run_pipeline", fake_run)
    with pytest.warns(FutureWarning, match="--compare arm="):
        main(["run", "sachs", "--workdir", str(tmp_path), "--compare", "pe=cape,none"])
    with pytest.warns(FutureWarning, match="train.arm"):
        main(["run", "sachs", "--workdir", str(tmp_path), "--set", "train.pe=none", "--compare", "attention=dot,cone-umbral"])
    assert seen == [{"arm": "cape", "compare": ["none"]}, {"arm": "none", "compare": ["none@cone-umbral"]}]
