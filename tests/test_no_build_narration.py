"""The repository's texts say what the code does and which commit measured what, not how the
project was built: no numbered work periods ("session 23"), no issue narration ("issue 40's
target"), no "jobs of mine". A benchmark row that depends on when it was made names the commit
(short hash) and date instead.

The search walks the files from the repository root (so it also runs on a fresh clone or an
unpacked archive): README.md, ARCHITECTURE.md, docs/, cape_pipeline/, workflows/, benchmarks/ and
tests/ (this file excepted: it quotes what it looks for),
leaving out the folders and files that git ignores there (virtual environments under ``_cache/``,
``__pycache__``, ``*.egg-info``, per-run ``parts/``, logs and locks) and every binary file.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ("README.md", "ARCHITECTURE.md")
FOLDERS = ("docs", "cape_pipeline", "workflows", "benchmarks", "tests")
SKIP_DIRS = {"_cache", ".venv", "__pycache__", "parts", ".snakemake", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
SKIP_SUFFIXES = (".log", ".lock")
NARRATION = re.compile(
    r"session [0-9]+|work period|our reading|jobs? of mine|period [0-9]+|issue [0-9]+|issue #[0-9]+|issues [0-9]+",
    re.IGNORECASE,
)


def _text_files():
    """Every text file under the searched paths, in a stable order."""
    paths = [ROOT / name for name in FILES]
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            rel = path.relative_to(ROOT)
            if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts[:-1]):
                continue
            paths.append(path)
    for path in paths:
        if (not path.is_file() or path.is_symlink() or path.name.endswith(SKIP_SUFFIXES)
                or path == Path(__file__).resolve()):
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        try:
            yield path, data.decode("utf-8")
        except UnicodeDecodeError:
            continue


def test_no_build_narration():
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:160]}"
        for path, text in _text_files()
        for number, line in enumerate(text.splitlines(), start=1)
        if NARRATION.search(line)
    ]
    assert not hits, (
        f"{len(hits)} line(s) narrate how the project was built; name the commit and date instead "
        "of a work period and drop issue numbers:\n" + "\n".join(hits)
    )


def test_the_search_sees_the_texts():
    """The walk reaches the files it is meant to search (a wrong root would pass vacuously)."""
    seen = {path.relative_to(ROOT).as_posix() for path, _ in _text_files()}
    assert "README.md" in seen
    assert "cape_pipeline/__init__.py" in seen
    assert any(p.startswith("benchmarks/") and p.endswith("RESULTS.md") for p in seen)
    assert not any("/_cache/" in f"/{p}" for p in seen)
