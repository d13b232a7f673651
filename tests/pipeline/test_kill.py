"""SIGKILL a writer at many moments: nothing half-written is ever left in place.

Two writers are covered: ``ArtifactCache.store`` (stage artifacts in the workdir) and
``atomic_path`` (every exported file and single-file artifact). Each trial runs the writer in a
fresh process (forked by a writer server spawned with ``sys.executable``) and kills it with
SIGKILL, either

* at a seeded random delay after the child says "ready" (spread over the whole store, and half
  of the cache trials aimed at the time of its first rename, measured in a calibration run), or
* deterministically: the child kills itself just before or just after the n-th rename, replace,
  chmod or rmtree and after each file it writes, for every n, which also hits the microsecond
  window between ``rename(final, trash)`` and ``rename(tmp, final)``.

After every kill the invariant is checked on disk: the final artifact is absent, unchanged, or
complete and entirely one version; ``lookup`` serves nothing or one complete version; the lock
is free; a new ``store`` succeeds.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from functools import lru_cache
from pathlib import Path

import pytest
from filelock import FileLock

import cape_pipeline
from cape_pipeline._utils import atomic_path, current_umask
from cape_pipeline.pipeline.cache import ArtifactCache

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")

_PKG = Path(cape_pipeline.__file__).resolve().parent
_STAGE = "kill"
_KEY = "0123456789abcdef0123456789abcdef"


def _payload(tag: str) -> dict[str, bytes]:
    """The files of artifact version ``tag``: 3 x 1 MiB, every byte run naming the version."""
    out = {}
    for name in ("a.bin", "sub/b.bin", "c.bin"):
        unit = f"<{tag}:{name}>".encode()
        out[name] = (unit * (2**20 // len(unit) + 1))[: 2**20]
    return out


# The writer server, spawned once per module with `sys.executable -c`. argv: PKG. The package
# __init__ is not run (it imports pandas and anndata, ~3 s): stub package modules (the root one
# given the `__version__` that __init__ sets) let `cape_pipeline.pipeline.cache` and
# `cape_pipeline._utils` load on their own; the code under test is the same files. For each
# request line {"job", "args", "kill_at"} it forks a writer process, which prints {"ready": pid},
# runs the job and prints {"done": ...}; after the line
# "reap" (sent once the parent has killed the writer or let it be) it prints {"exit": status}.
# Forking makes a trial cost milliseconds instead of an interpreter start (~0.2 s).
# `instrument()` wraps os.rename/replace/chmod and shutil.rmtree; `point()` is a numbered kill
# point: a writer SIGKILLs itself at point KILL_AT (-1: never) and records the time of each
# instrumented call after its T0.
_SERVER = (
    textwrap.dedent(
        """
        import importlib.metadata, importlib.util, json, os, shutil, signal, sys, time, traceback
        from pathlib import Path
        PKG = sys.argv[1]
        for _name, _d in (("cape_pipeline", PKG), ("cape_pipeline.pipeline", PKG + "/pipeline")):
            _spec = importlib.util.spec_from_file_location(
                _name, _d + "/__init__.py", submodule_search_locations=[_d]
            )
            sys.modules[_name] = importlib.util.module_from_spec(_spec)
        sys.modules["cape_pipeline"].__version__ = importlib.metadata.version("cape_pipeline")  # as __init__ sets it
        from cape_pipeline._utils import atomic_path
        from cape_pipeline.pipeline.cache import ArtifactCache, code_fingerprint, library_versions
        code_fingerprint(), library_versions()  # cached before forking: kills land in the I/O
        KILL_AT, N, T0, EVENTS = -1, 0, None, []

        def point():
            global N
            if N == KILL_AT:
                os.kill(os.getpid(), signal.SIGKILL)
            N += 1

        def instrument():
            def wrap(mod, name):
                f = getattr(mod, name)

                def w(*a, **k):
                    if T0 is not None:
                        EVENTS.append((name, time.perf_counter() - T0))
                    point()
                    r = f(*a, **k)
                    point()
                    return r

                setattr(mod, name, w)

            for mod, name in ((os, "rename"), (os, "replace"), (os, "chmod"), (shutil, "rmtree")):
                wrap(mod, name)

        def say(msg):
            # one line in one write(2), so that a SIGKILL in a writer lands before or after it,
            # never between the record and its newline (the parent reads whole lines)
            sys.stdout.flush()
            data = (json.dumps(msg) + "\\n").encode()
            while data:
                data = data[os.write(1, data):]

        def ready():
            global T0
            say({"ready": os.getpid()})
            T0 = time.perf_counter()
        """
    )
    + textwrap.dedent(inspect.getsource(_payload))
    + textwrap.dedent(
        """
        def store(root, stage, key, tag):
            files = _payload(tag)

            def write(d):
                for name, data in files.items():
                    (d / name).parent.mkdir(parents=True, exist_ok=True)
                    with open(d / name, "wb") as fh:
                        for i in range(0, len(data), 1 << 18):
                            fh.write(data[i : i + (1 << 18)])
                    point()

            ready()
            ArtifactCache(root).store(stage, key, write, {"version": tag})

        def export(path, size, loops):  # writes b"a" * size, b"b" * size, b"a" * size, ...
            path, size, loops, chunk = Path(path), int(size), int(loops), 1 << 18
            ready()
            i = 0
            while loops < 0 or i < loops:
                block = (b"a", b"b")[i % 2] * chunk
                with atomic_path(path) as tmp:
                    with open(tmp, "wb") as fh:
                        for j in range(size // chunk):
                            fh.write(block)
                            if j == size // chunk // 2:
                                point()
                    point()
                i += 1

        instrument()
        while line := sys.stdin.readline():
            req = json.loads(line)
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    signal.alarm(60)  # a hung writer fails the test instead of hanging it
                    KILL_AT, N, EVENTS = req["kill_at"], 0, []
                    {"store": store, "export": export}[req["job"]](*req["args"])
                    end = time.perf_counter() - T0
                    say({"done": {"end": end, "events": EVENTS, "points": N}})
                except BaseException:
                    say({"error": traceback.format_exc()})
                    code = 1
                finally:
                    os._exit(code)
            sys.stdin.readline()  # "reap"
            _, status = os.waitpid(pid, 0)
            print(json.dumps({"exit": os.waitstatus_to_exitcode(status)}), flush=True)
        """
    )
)


class _Writers:
    """Client of the writer server."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    def _recv(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, f"writer server died ({self.proc.poll()})"
        return json.loads(line)

    def run(self, job: str, args: list[object], kill_at: int = -1, delay: float | None = None):
        """Fork a writer running ``job``; SIGKILL it ``delay`` s after it is ready (None: let it
        finish or kill itself at point ``kill_at``). Returns its exit status (-9 when killed)
        and its "done" record ({} when it did not finish)."""
        self.proc.stdin.write(
            json.dumps({"job": job, "args": list(map(str, args)), "kill_at": kill_at}) + "\n"
        )
        self.proc.stdin.flush()
        msg = self._recv()
        if "ready" in msg and delay is not None:
            time.sleep(delay)
            # not reaped before "reap": the pid is the writer's, alive or a zombie
            os.kill(msg["ready"], signal.SIGKILL)
        self.proc.stdin.write("reap\n")
        self.proc.stdin.flush()
        first, done = msg, {}
        while "exit" not in msg:
            msg = self._recv()
            done = msg.get("done", done)
            first = msg if "error" in msg else first
        assert "error" not in first, first["error"]
        assert msg["exit"] in (0, -signal.SIGKILL), f"writer failed ({msg['exit']})"
        return msg["exit"], done


@pytest.fixture(scope="module")
def writers():
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(_PKG)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
    )
    try:
        yield _Writers(proc)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- cache store -------------------------------------------------------------------------------


def _hashes(d: Path) -> dict[str, str]:
    return {
        p.relative_to(d).as_posix(): hashlib.blake2b(p.read_bytes(), digest_size=16).hexdigest()
        for p in sorted(d.rglob("*"))
        if p.is_file()
    }


def _version_of(d: Path, tags: list[str]) -> str | None:
    """The tag whose files ``d`` holds exactly (same names, same bytes, manifest naming it)."""
    got = _hashes(d)
    got.pop("manifest.json", None)
    try:
        named = json.loads((d / "manifest.json").read_text()).get("version")
    except (OSError, ValueError):
        return None
    return next((t for t in tags if got == _expected(t) and named == t), None)


@lru_cache(maxsize=8)
def _expected(tag: str) -> dict[str, str]:
    return {n: hashlib.blake2b(b, digest_size=16).hexdigest() for n, b in _payload(tag).items()}


def _write(tag: str):
    def write(d: Path) -> None:
        for name, data in _payload(tag).items():
            (d / name).parent.mkdir(parents=True, exist_ok=True)
            (d / name).write_bytes(data)

    return write


def _setup(root: Path, scenario: str, old: str) -> dict[str, str] | None:
    """Prepare the final artifact before a trial; return its snapshot (None when absent)."""
    cache = ArtifactCache(root)
    if scenario == "absent":
        return None
    cache.store(_STAGE, _KEY, _write(old), {"version": old})
    final = cache.path(_STAGE, _KEY)
    if scenario == "corrupt-old":  # store must then go rename(final, trash), rename(tmp, final)
        f = final / "sub" / "b.bin"
        f.write_bytes(f.read_bytes()[: 2**19])
        assert not cache.verify(_STAGE, _KEY)[0]
    return _hashes(final)


def _check_cache(
    root: Path, scenario: str, before: dict[str, str] | None, old: str, new: str
) -> str:
    """The invariant after a kill; returns "untouched", "absent" or "new"."""
    cache = ArtifactCache(root)
    final = cache.path(_STAGE, _KEY)
    if not final.exists():
        # only in the window between rename(final, trash) and rename(tmp, final), where the old
        # artifact is a corrupt one that lookup would have discarded anyway
        assert scenario != "valid-old", "a valid artifact was lost"
        state = "absent"
    elif _hashes(final) == before:
        state = "untouched"
    else:
        ok, why = cache.verify(_STAGE, _KEY)
        assert ok, f"{scenario}: half-written final artifact in place ({why})"
        assert _version_of(final, [new]) == new, f"{scenario}: final artifact mixes versions"
        state = "new"
    if scenario == "valid-old":
        assert state == "untouched", "a valid artifact was replaced or changed"

    served = cache.lookup(_STAGE, _KEY)
    tag = None if served is None else _version_of(served, [old, new])
    assert served is None or tag is not None, f"{scenario}: lookup serves a mixed artifact"
    assert (tag == old) == (scenario == "valid-old")

    # the dead writer's lock is free, and a new store succeeds and is served whole
    with FileLock(str(root / ".locks" / f"{_STAGE}-{_KEY}.lock"), timeout=10):
        pass
    cache.store(_STAGE, _KEY, _write("parent"), {"version": "parent"})
    again = cache.lookup(_STAGE, _KEY)
    assert again is not None and _version_of(again, [tag or "parent"]) == (tag or "parent")
    return state


_SCENARIOS = ("absent", "valid-old", "corrupt-old")


def test_cache_store_survives_sigkill_at_random_moments(tmp_path, writers):
    """45 writers killed at random delays (half near the first rename); 3 calibration runs."""
    rng = random.Random(14)
    timing = {}
    states: dict[tuple[str, str], int] = {}
    killed = 0
    trials = [(s, None) for s in _SCENARIOS] + [(_SCENARIOS[i % 3], i) for i in range(45)]
    for n, (scenario, i) in enumerate(trials):
        root = tmp_path / f"t{n}"
        old, new = f"old{n}", f"new{n}"
        before = _setup(root, scenario, old)
        delay = None
        if i is not None:
            end, t_rename = timing[scenario]
            if i % 2:
                delay = rng.uniform(0.0, 1.25 * end)
            else:
                delay = max(0.0, t_rename + rng.uniform(-0.15, 0.1) * end)
        rc, done = writers.run("store", [root, _STAGE, _KEY, new], delay=delay)
        if i is None:  # calibration: when the store ends and first renames
            assert rc == 0
            first = next((t for name, t in done["events"] if name == "rename"), done["end"])
            timing[scenario] = (done["end"], first)
        killed += rc != 0
        state = _check_cache(root, scenario, before, old, new)
        states[scenario, state] = states.get((scenario, state), 0) + 1
        shutil.rmtree(root)
    # a loaded machine can leave the random moments without a kill between the corrupt artifact's
    # replacement and the store's end: aim at that window directly (at most 6 more trials)
    for n in range(len(trials), len(trials) + 6):
        if states.get(("corrupt-old", "new"), 0) >= 2:
            break
        root = tmp_path / f"t{n}"
        before = _setup(root, "corrupt-old", f"old{n}")
        end, t_rename = timing["corrupt-old"]
        rc, _ = writers.run("store", [root, _STAGE, _KEY, f"new{n}"], delay=t_rename + 0.5 * (end - t_rename))
        killed += rc != 0
        state = _check_cache(root, "corrupt-old", before, f"old{n}", f"new{n}")
        states["corrupt-old", state] = states.get(("corrupt-old", state), 0) + 1
        shutil.rmtree(root)
    assert killed >= 12, (killed, timing)  # the kills did land while the stores ran
    # where a store had work to do, kills landed both before and after it was in place
    interrupted = sum(v for (sc, st), v in states.items() if sc != "valid-old" and st != "new")
    assert interrupted >= 3 and states.get(("corrupt-old", "new"), 0) >= 2, states


@pytest.mark.parametrize("scenario", _SCENARIOS)
def test_cache_store_survives_sigkill_at_every_step(tmp_path, writers, scenario):
    """The child kills itself before/after every rename, replace, chmod, rmtree and file."""
    n = 0
    while True:
        root = tmp_path / f"t{n}"
        before = _setup(root, scenario, "old")
        rc, done = writers.run("store", [root, _STAGE, _KEY, "new"], kill_at=n)
        _check_cache(root, scenario, before, "old", "new")
        shutil.rmtree(root)
        if rc == 0:
            break
        n += 1
    assert n == done["points"] >= 9  # every point was a kill; 9+ points: the steps did run


# --- atomic_path -------------------------------------------------------------------------------

_SIZE = 4 * 2**20


def _check_export(path: Path, mode: int) -> bytes:
    assert path.exists(), "the exported file vanished"
    data = path.read_bytes()
    assert len(data) == _SIZE, f"truncated or overlong: {len(data)} bytes"
    assert data.count(data[:1]) == _SIZE and data[:1] in (b"a", b"b"), "mixed content"
    assert stat.S_IMODE(path.stat().st_mode) == mode
    return data[:1]


def test_atomic_path_survives_sigkill_at_random_moments(tmp_path, writers):
    """40 writers rewriting a 4 MiB file in a loop (a, b, a, ...), each killed at random."""
    rng = random.Random(140)
    path = tmp_path / "out" / "export.bin"
    mode = 0o666 & ~current_umask()
    with atomic_path(path) as tmp:
        tmp.write_bytes(b"b" * _SIZE)
    seen = set()
    for _ in range(40):
        rc, _ = writers.run("export", [path, _SIZE, -1], delay=rng.uniform(0.0, 0.08))
        assert rc == -signal.SIGKILL
        seen.add(_check_export(path, mode))
    assert seen == {b"a", b"b"}  # some rewrites did complete between the kills


def test_atomic_path_survives_sigkill_at_every_step(tmp_path, writers):
    path = tmp_path / "out" / "export.bin"
    mode = 0o666 & ~current_umask()
    with atomic_path(path) as tmp:
        tmp.write_bytes(b"b" * _SIZE)
    n = 0
    while True:
        rc, done = writers.run("export", [path, _SIZE, 2], kill_at=n)
        _check_export(path, mode)
        if rc == 0:
            break
        n += 1
    assert n == done["points"] >= 10
    assert _check_export(path, mode) == b"b"  # a then b: the last rewrite is in place
