from __future__ import annotations

import subprocess
import sys

import pytest

from cape_pipeline.cli import main


def _run(args, capsys):
    code = main(args)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_preprocess_twice_reports_cache_hits(tmp_path, capsys):
    code, _, err = _run(["preprocess", "sachs", "--workdir", str(tmp_path)], capsys)
    assert code == 0 and "✓ ingest" in err and "✓ preprocess" in err
    code, out, err = _run(["preprocess", "sachs", "--workdir", str(tmp_path), "--out", str(tmp_path / "o")], capsys)
    assert code == 0 and "cache hit" in err and "0 ran, 2 from cache" in err
    assert (tmp_path / "o" / "preprocessed.h5ad").is_file() and "exported" in out


def test_run_set_and_config(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("preprocess:\n  transform: arcsinh\n")
    code, _, err = _run(["run", "sachs", "--until", "preprocess", "--workdir", str(tmp_path), "--config", str(cfg),
                         "--set", "ingest.modality=proteomics"], capsys)
    assert code == 0, err


@pytest.mark.parametrize(
    "args,needle",
    [
        (["preprocess", "no-such-dataset"], "unknown dataset 'no-such-dataset'"),
        (["preprocess", "/nonexistent/file.h5ad"], "/nonexistent/file.h5ad: no such file"),
        (["run", "sachs", "--set", "preprocess.nope=1"], "unknown parameter(s) ['nope']"),
        (["run", "sachs", "--set", "discover.min_efect=0.01"], "did you mean 'discover.regression.min_effect'?"),
        (["run", "sachs", "--set", "discovr.fdr=0.1"], "did you mean 'discover'?"),
        (["run", "sachs", "--set", "ingest.label_colums=[cell_type]"], "did you mean 'ingest.label_columns'?"),
        (["run", "sachs", "--set", "badformat"], "expected stage.param=value"),
        (["run", "sachs", "--device", "tpu"], "--device 'tpu'"),
        (["preprocess", "sachs", "--seed", "-1"], "--seed -1: expected an integer >= 0"),
        (["preprocess", "sachs", "--out", __file__], "exists and is not a directory"),
    ],
)
def test_errors_are_one_line_exit_2(tmp_path, capsys, args, needle):
    code, _, err = _run([*args, "--workdir", str(tmp_path)], capsys)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_corrupt_file_via_cli(tmp_path, capsys):
    bad = tmp_path / "x.h5ad"
    bad.write_bytes(b"\x89HDF\r\n" + b"0" * 100)
    code, _, err = _run(["ingest", str(bad), "--workdir", str(tmp_path)], capsys)
    assert code == 2 and "x.h5ad: not a readable .h5ad file" in err


def test_debug_shows_traceback(tmp_path):
    p = subprocess.run([sys.executable, "-m", "cape_pipeline.cli", "ingest", "nope", "--debug", "--workdir", str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "Traceback" in p.stderr
    p = subprocess.run([sys.executable, "-m", "cape_pipeline.cli", "ingest", "nope", "--workdir", str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr


def test_datasets_lists_catalog(capsys):
    code, out, _ = _run(["datasets"], capsys)
    assert code == 0 and "sachs" in out and "pbmc68k_reduced" in out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--bogus"], "No such option"),
        (["reproduce", "fig3"], "Missing option '--out'"),
        (["run", "sachs", "--until", "preprocess", "--threads", "notanint"], "Invalid value"),
    ],
)
def test_usage_errors_exit_2(args, needle, capsys):
    """Usage errors are click's (typer ≥ 0.22 vendors its own click): status 2, no traceback."""
    code, out, err = _run(args, capsys)
    assert code == 2
    assert needle in out + err
    assert "internal error" not in out + err and "Traceback" not in out + err


def test_version(capsys):
    from cape_pipeline import __version__

    code, out, _ = _run(["--version"], capsys)
    assert code == 0 and __version__ in out


def test_diverged_discover_fails_and_stores_nothing(tmp_path, capsys):
    """A NaN fit is an error naming lr, not an empty DAG in the cache (earlier stages stay cached)."""
    code, _, err = _run(["discover", "synthetic-mlp", "--workdir", str(tmp_path), "--threads", "1",
                         "--set", "discover.low_rank.lr=1000"], capsys)
    assert code == 1 and "diverged" in err and "--set discover.low_rank.lr=" in err and "internal error" not in err
    assert not (tmp_path / "discover").exists() or not any(
        p for p in (tmp_path / "discover").iterdir() if not p.name.startswith(".")
    )
    assert any((tmp_path / "preprocess").iterdir())


def test_workdir_at_a_file_is_one_line_exit_2(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    code, _, err = _run(["ingest", "sachs", "--workdir", str(f)], capsys)
    assert code == 2 and "--workdir" in err and "not a directory" in err and len(err.strip().splitlines()) == 1


def test_every_stage_parameter_has_its_own_help_text():
    """``cape params`` takes each field's own docstring entry (not a
    neighbour's: discover's batch_size and lr must not show the text of epochs). One field that two
    algorithm configs inherit from a shared base (``low_rank.lr``, ``screened.lr``) has one text."""
    from cape_pipeline.pipeline.params import stage_params
    from cape_pipeline.pipeline.stages import STAGE_ORDER

    for stage in STAGE_ORDER:
        params = stage_params(stage)
        assert all(p.help for p in params), [p.name for p in params if not p.help]
        fields: dict[str, set[str]] = {}
        for p in params:
            fields.setdefault(p.help, set()).add(p.name.rsplit(".", 1)[-1])
        shared = {h: names for h, names in fields.items() if len(names) > 1}
        assert not shared, (stage, [p.name for p in params if p.help in shared])
    low_rank = {p.name: p.help for p in stage_params("discover")}
    assert low_rank["low_rank.lr"] == low_rank["screened.lr"] and low_rank["low_rank.lr"] != low_rank["learned.lr"]


def _commands():
    """Every ``cape`` command as (name, click command), the root group included."""
    import typer

    from cape_pipeline.cli import app

    def walk(cmd, path):
        yield " ".join(path), cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, [*path, name])

    return list(walk(typer.main.get_command(app), ["cape"]))


def test_every_option_shows_its_default():
    """``--help`` shows a default for every option (--device, --seed and --until included)."""
    from typer.core import TyperOption

    missing = [
        (name, p.opts[0]) for name, cmd in _commands() for p in cmd.params
        if isinstance(p, TyperOption) and not p.required and not p.is_eager
        and p.name not in ("help", "install_completion", "show_completion")  # typer's own
        and (p.default is None or p.default is False or p.default == ()) and not isinstance(p.show_default, str)
    ]
    assert not missing, missing


def test_every_help_ends_with_an_example(capsys):
    commands = [(name, cmd) for name, cmd in _commands() if not getattr(cmd, "commands", None) or name == "cape"]
    assert not [name for name, cmd in commands if "cape " not in (cmd.epilog or "")]
    code, out, _ = _run(["run", "--help"], capsys)
    assert code == 0 and "--labels cell_type --counts-layer counts --out results/" in " ".join(out.split())
    for flag in ("--device", "--seed", "--until"):
        line = next(i for i, text in enumerate(out.splitlines()) if text.lstrip("│ ").startswith(f"{flag} "))
        assert "default:" in " ".join(out.splitlines()[line : line + 3]), flag


def test_params_lists_user_options_first_then_advanced(capsys):
    from cape_pipeline.pipeline.params import USER_OPTIONS, stage_params
    from cape_pipeline.pipeline.stages import STAGE_ORDER

    for stage in STAGE_ORDER:  # one list, of fields that exist (nested ones as regression.fdr)
        fields = {p.name for p in stage_params(stage)}
        assert set(USER_OPTIONS[stage]) <= fields, (stage, set(USER_OPTIONS[stage]) - fields)
    code, out, _ = _run(["params", "discover"], capsys)
    assert code == 0
    head, _, advanced = out.partition("discover, advanced")
    assert advanced, "no advanced heading"
    for name in USER_OPTIONS["discover"]:
        assert f"│ {name} " in head, name
    for name in ("low_rank.rank", "low_rank.h_tol", "learned.epochs"):
        assert f"│ {name} " in advanced and f"│ {name} " not in head, name
    assert "│ hold_out_test_conditions " in head and "held_out_split" not in out  # derived: not a parameter
    from cape_pipeline.cli.run import complete_set

    assert complete_set("discover.hold") == ["discover.hold_out_test_conditions="]
    assert not complete_set("discover.held")
    assert sum(len(names) for names in USER_OPTIONS.values()) <= 40  # the options a user sets first stay few


def test_params_meanings_name_no_constant_or_file():
    import re

    from cape_pipeline.pipeline.params import stage_params
    from cape_pipeline.pipeline.stages import STAGE_ORDER

    internal = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\bCOVARIATES\b|\w/[\w./-]+\.(md|py)\b|\bbenchmarks/")
    bad = [(s, p.name, internal.search(p.help).group(0)) for s in STAGE_ORDER for p in stage_params(s)
           if internal.search(p.help)]
    assert not bad, bad
