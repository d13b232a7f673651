"""Progress display for long loops: a rich bar in a terminal, periodic log lines elsewhere.

Under nohup, SLURM or Snakemake, stderr is a file: a rich bar draws nothing there until it ends,
so a 10-minute fit printed two lines. :func:`progress` gives a rich ``Progress`` when stderr is a
terminal or a Jupyter kernel, and otherwise a :class:`LogProgress` with the same small API that
writes one line every ``CAPE_PROGRESS_INTERVAL`` seconds (default 30) and one at the end:
``[12:03:41] discover phase 2 h=0.013: 120/313 epochs (38%), elapsed 0:00:45, ETA 0:01:12``.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

__all__ = ["LogProgress", "progress", "progress_task", "active", "interactive"]

_ACTIVE: contextvars.ContextVar[Any] = contextvars.ContextVar("cape_progress", default=None)

#: seconds between two progress lines outside a terminal (env ``CAPE_PROGRESS_INTERVAL``)
DEFAULT_INTERVAL = 30.0


def _hms(seconds: float) -> str:
    return str(_dt.timedelta(seconds=int(max(seconds, 0))))


class LogProgress:
    """Line-per-interval stand-in for ``rich.progress.Progress`` (start/stop, add_task, update,
    advance, context manager), for stderr that is not a terminal.

    Parameters
    ----------
    interval
        Seconds between lines (default: ``$CAPE_PROGRESS_INTERVAL`` or 30); 0 writes every update.
    unit
        Word after the counts (e.g. ``"epochs"``).
    stream
        Where lines go (default ``sys.stderr`` at write time).
    clock
        Time source (tests pass a fake one).
    prefix
        Words put before every line's description (e.g. ``"discover"``).
    """

    def __init__(
        self,
        interval: float | None = None,
        unit: str = "steps",
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        prefix: str = "",
    ) -> None:
        if interval is None:
            try:
                interval = float(os.environ.get("CAPE_PROGRESS_INTERVAL", DEFAULT_INTERVAL))
            except ValueError:
                interval = DEFAULT_INTERVAL
        self.interval = max(0.0, interval)
        self.unit = unit
        self.prefix = prefix
        self._stream = stream
        self._clock = clock
        self._tasks: list[dict[str, Any]] = []

    # rich API --------------------------------------------------------------------------
    def start(self) -> None:  # noqa: D102
        return None

    def stop(self) -> None:
        """Write the final line of every task that advanced since its last line."""
        for i, t in enumerate(self._tasks):
            if not t.get("removed") and t["completed"] != t["logged"]:
                self._write(i)

    def add_task(self, description: str, total: float | None = None, *, unit: str | None = None, **fields: Any) -> int:
        """Register a task (``unit``: its own unit word, default the bar's); returns its id."""
        now = self._clock()
        self._tasks.append({"description": description, "total": total, "completed": 0.0, "unit": unit or self.unit,
                            "fields": dict(fields), "start": now, "last": now, "logged": 0.0})
        return len(self._tasks) - 1

    def update(self, task: int, *, advance: float = 0.0, description: str | None = None, **fields: Any) -> None:
        """Advance a task and/or change its description or fields; writes a line when due."""
        t = self._tasks[task]
        if t.get("removed"):
            return
        t["completed"] += advance
        if description is not None:
            t["description"] = description
        t["fields"].update(fields)
        if self._clock() - t["last"] >= self.interval:
            self._write(task)

    def advance(self, task: int, advance: float = 1.0) -> None:  # noqa: D102
        self.update(task, advance=advance)

    def remove_task(self, task: int) -> None:
        """End a task: write its last line if it advanced since the last one (the id stays
        reserved; the task writes no more)."""
        t = self._tasks[task]
        if t["completed"] != t["logged"]:
            self._write(task)
        t["removed"] = True

    def __enter__(self) -> LogProgress:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------
    def _write(self, task: int) -> None:
        t = self._tasks[task]
        now = self._clock()
        t["last"], t["logged"] = now, t["completed"]
        elapsed = now - t["start"]
        done = t["completed"]
        info = " ".join(str(v) for v in t["fields"].values() if v not in (None, ""))
        head = " ".join(p for p in (self.prefix, t["description"], info) if p)
        if t["total"]:
            pct = 100.0 * done / t["total"]
            eta = elapsed / done * (t["total"] - done) if done else float("nan")
            counts = f"{done:g}/{t['total']:g} {t['unit']} ({pct:.0f}%)"
            tail = f", elapsed {_hms(elapsed)}, ETA {_hms(eta) if eta == eta else '?'}"
        else:
            counts, tail = f"{done:g} {t['unit']}", f", elapsed {_hms(elapsed)}"
        stamp = time.strftime("%H:%M:%S")
        stream = self._stream if self._stream is not None else sys.stderr
        print(f"[{stamp}] {head}: {counts}{tail}", file=stream, flush=True)


def interactive() -> bool:
    """Whether stderr is a terminal or a Jupyter kernel (rich's detection): live bars there,
    timestamped log lines elsewhere (CI logs, Snakemake, batch jobs)."""
    from rich.console import Console

    c = Console(stderr=True)
    return bool(c.is_terminal or c.is_jupyter)


def progress(build: Callable[[], Any], unit: str = "steps", prefix: str = "") -> Any:
    """``build()`` (a rich ``Progress``) in a terminal or notebook, else a :class:`LogProgress`.

    Parameters
    ----------
    build
        Makes the rich progress object (called only when it will be shown).
    unit
        Unit word of the log lines.
    prefix
        Words before each log line's description.
    """
    return build() if interactive() else LogProgress(unit=unit, prefix=prefix)


@contextlib.contextmanager
def active(bar: Any) -> Iterator[Any]:
    """Make ``bar`` (a rich ``Progress`` or :class:`LogProgress`) the one that nested loops add
    their tasks to (:func:`progress_task`), inside the block."""
    token = _ACTIVE.set(bar)
    try:
        yield bar
    finally:
        _ACTIVE.reset(token)


class _TaskHandle:
    """What :func:`progress_task` yields: ``update(advance=0, **fields)``; fields (e.g.
    ``loss="loss 0.41"``) are shown after the description."""

    def __init__(self, bar: Any, task: Any, desc: str) -> None:
        self._bar, self._task, self._desc, self._fields = bar, task, desc, {}

    def update(self, advance: float = 0.0, **fields: Any) -> None:
        if self._bar is None:
            return
        if isinstance(self._bar, LogProgress):
            self._bar.update(self._task, advance=advance, **fields)
            return
        self._fields.update(fields)
        info = " ".join(str(v) for v in self._fields.values() if v)
        self._bar.update(self._task, advance=advance, description=f"{self._desc} {info}".strip())


@contextlib.contextmanager
def progress_task(desc: str, total: float | None, *, unit: str = "steps", show: bool = True) -> Iterator[_TaskHandle]:
    """A progress task for a loop of ``total`` items: on the active bar (:func:`active`) when
    an outer loop shows one, else on a bar of its own (:func:`progress`); removed at the end.

    Outside a terminal this writes a line at least every ``$CAPE_PROGRESS_INTERVAL`` seconds
    (30) with the items done, the fields given to ``update`` (loss…), elapsed time and ETA.
    With ``show=False`` the handle does nothing.
    """
    if not show:
        yield _TaskHandle(None, None, desc)
        return
    outer = _ACTIVE.get()
    if outer is not None:
        task = outer.add_task(desc, total=total, **({"unit": unit} if isinstance(outer, LogProgress) else {}))
        try:
            yield _TaskHandle(outer, task, desc)
        finally:
            outer.remove_task(task)
        return
    from rich.progress import Progress

    with progress(lambda: Progress(transient=True), unit=unit) as bar, active(bar):
        task = bar.add_task(desc, total=total)
        yield _TaskHandle(bar, task, desc)
