"""SIGTERM (a SLURM time limit) and SIGINT (Ctrl-C) during a stage: one line, exit 143 / 130,
no partial artifact, and a rerun resumes from the last finished stage."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _cape(*args: str, **kw):
    env = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    # a background job inherits SIGINT ignored (and Python then keeps it ignored): restore it
    return subprocess.Popen(
        [sys.executable, "-m", "cape_pipeline.cli", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kw,
    )


def _stop_during(stage: str, workdir: Path, signum: int) -> tuple[int, str]:
    """Start ``cape run sachs``, send ``signum`` once ``stage`` has started; (exit code, output)."""
    proc = _cape("run", "sachs", "--until", "embed", "--workdir", str(workdir), "--threads", "1")
    lines = []
    deadline = time.monotonic() + 240
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.append(line)
        if f"▶ {stage} running" in line:
            time.sleep(0.5)  # inside the stage's work, not at its first line
            proc.send_signal(signum)
            break
        assert time.monotonic() < deadline, "".join(lines)
    rest, _ = proc.communicate(timeout=120)
    return proc.returncode, "".join(lines) + rest


@pytest.mark.parametrize("signum, code, name", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")])
def test_signal_during_a_stage_says_so_and_a_rerun_resumes(tmp_path, signum, code, name):
    wd = tmp_path / "work"
    rc, out = _stop_during("discover", wd, signum)
    assert rc == code, out
    last = [ln for ln in out.splitlines() if ln.strip()][-1]
    assert f"stopped by {name} during stage 'discover'" in last, out
    assert "finished and cached: ingest, preprocess" in last and "rerun the same command" in last
    assert "Traceback" not in out
    # nothing partial: no temporary directory and no artifact of the interrupted stage
    leftovers = [p for p in (wd / "discover").glob("*")] if (wd / "discover").exists() else []
    assert leftovers == [], leftovers
    # the rerun takes the finished stages from the cache
    done = _cape("run", "sachs", "--until", "preprocess", "--workdir", str(wd), "--threads", "1")
    text, _ = done.communicate(timeout=240)
    assert done.returncode == 0, text
    assert "2 stage(s): 0 ran, 2 from cache" in text


def _run_cli(capsys, *args: str) -> tuple[int, str]:
    from cape_pipeline import cli

    rc = cli.main(list(args))
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes to read-only directories")
def test_read_only_out_is_refused_before_any_stage(tmp_path, capsys):
    """A read-only --out is a usage error up front, not exit 1 after the stages."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        rc, text = _run_cli(capsys, "run", "sachs", "--until", "preprocess", "--workdir", str(tmp_path / "w"), "--out", str(ro / "o"))
    finally:
        ro.chmod(0o755)
    assert rc == 2 and "--out" in text and "cannot write there" in text
    assert "running" not in text  # no stage ran


def test_unwritable_out_is_refused_before_any_stage(tmp_path, monkeypatch, capsys):
    """The same check where the test runs as root (chmod does not bind root): the probe fails."""
    import tempfile

    real = tempfile.TemporaryFile

    def probe(*a, dir=None, **kw):  # noqa: A002
        if dir is not None and Path(dir).resolve() == (tmp_path / "ro").resolve():
            raise PermissionError(13, "Permission denied")
        return real(*a, dir=dir, **kw)

    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(tempfile, "TemporaryFile", probe)
    rc, text = _run_cli(capsys, "run", "sachs", "--until", "preprocess", "--workdir", str(tmp_path / "w"),
                        "--out", str(tmp_path / "ro" / "o"))
    assert rc == 2 and "--out" in text and "Permission denied" in text and "running" not in text


def test_out_inside_the_workdir(tmp_path, capsys):
    """--out as the cache or a stage directory of it: refused; elsewhere inside it: a warning."""
    wd = tmp_path / "w"
    for bad in (wd, wd / "preprocess", wd / "discover" / "x"):
        rc, text = _run_cli(capsys, "run", "sachs", "--until", "preprocess", "--workdir", str(wd), "--out", str(bad))
        assert rc == 2 and "that is the cache" in text and "running" not in text, text
    rc, text = _run_cli(capsys, "run", "sachs", "--until", "preprocess", "--workdir", str(wd), "--out", str(wd / "out"))
    assert rc == 0 and "warning: --out" in text and "inside --workdir" in text


def test_under_torchrun_every_rank_stops_with_the_line(tmp_path):
    """torchrun forwards SIGTERM to its workers: each rank prints the line and exits."""
    import shutil

    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    if not Path(torchrun).exists():
        pytest.skip("torchrun not installed")
    cmd = [torchrun, "--nproc_per_node=2", "--master_port=29541", "-m", "cape_pipeline.cli", "run", "sachs",
           "--until", "embed", "--workdir", str(tmp_path / "w"), "--threads", "1",
           "--device", "cpu"]  # two ranks: on the CPU, also where a machine has one GPU
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines, started = [], 0
    deadline = time.monotonic() + 240
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.append(line)
        started += "▶ discover running" in line
        if started == 2:  # both ranks are in the stage
            time.sleep(1.0)
            proc.send_signal(signal.SIGTERM)
            break
        assert time.monotonic() < deadline, "".join(lines)
    rest, _ = proc.communicate(timeout=120)
    out = "".join(lines) + rest
    assert proc.returncode != 0
    assert out.count("stopped by SIGTERM during stage 'discover'") == 2, out
    leftovers = list((tmp_path / "w" / "discover").glob("*")) if (tmp_path / "w" / "discover").exists() else []
    assert leftovers == []


def test_a_signal_wrapped_by_python_still_reads_as_a_stop(monkeypatch, capsys):
    """A SIGTERM that lands while a module defines a class arrives as ``RuntimeError: Error calling
    __set_name__`` (seen under torchrun, a rank still importing torch): still a stop, exit 143."""
    import cape_pipeline.cli as cli

    def app(**_kw):
        class Prop:
            def __set_name__(self, owner, name):
                cli._on_signal(signal.SIGTERM, None)

        type("Wrapped", (), {"p": Prop()})  # Python wraps what __set_name__ raises

    monkeypatch.setattr(cli, "app", app)
    assert cli.main(["run", "sachs"]) == 143
    err = capsys.readouterr().err
    assert "stopped by SIGTERM" in err and "internal error" not in err
