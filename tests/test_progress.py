"""Progress outside a terminal: periodic one-line logs."""

from __future__ import annotations

import io

import numpy as np

from cape_pipeline._progress import LogProgress, progress


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_log_progress_writes_a_line_per_interval_with_eta() -> None:
    out, clock = io.StringIO(), _Clock()
    bar = LogProgress(interval=10, unit="epochs", stream=out, clock=clock, prefix="discover")
    with bar:
        task = bar.add_task("phase 1", total=100, info="")
        for _ in range(50):
            clock.t += 1.0
            bar.update(task, advance=1, info="loss 0.5")
    lines = out.getvalue().splitlines()
    assert len(lines) == 5  # one per 10 s of 50 s (the last update already wrote the end)
    assert "discover phase 1 loss 0.5: 50/100 epochs (50%)" in lines[-1]
    assert "elapsed 0:00:50, ETA 0:00:50" in lines[-1]


def test_stop_writes_the_final_state() -> None:
    out, clock = io.StringIO(), _Clock()
    bar = LogProgress(interval=1000, stream=out, clock=clock)
    bar.start()
    t = bar.add_task("train", total=3)
    bar.advance(t)
    clock.t = 5
    bar.stop()
    assert out.getvalue().count("\n") == 1 and "1/3 steps (33%)" in out.getvalue()


def test_not_a_terminal_gives_log_lines(capsys, monkeypatch) -> None:
    """Under pytest stderr is captured (not a terminal): a discover fit logs its progress."""
    monkeypatch.setenv("CAPE_PROGRESS_INTERVAL", "0")
    assert isinstance(progress(lambda: None), LogProgress)
    from cape_pipeline.causal.api import discover

    x = np.random.default_rng(0).normal(size=(200, 4))
    discover(x, low_rank={"epochs": 4, "max_outer": 2}, device="cpu", progress=True)
    err = capsys.readouterr().err
    assert "discover" in err and "4/4 epochs (100%)" in err
