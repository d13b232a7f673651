"""The generic training loop (:func:`cape_pipeline.models.loops.train_epochs`): step budgets and
progress inside a training run; the earlier module name still imports, with a warning."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from cape_pipeline.models.loops import train_epochs


def _quadratic(n: int = 100):
    w = torch.nn.Parameter(torch.zeros(3))
    target = torch.ones(3)
    return [w], (lambda bi: ((w - target) ** 2).sum() + 0.0 * bi.float().sum())


def test_max_steps_caps_optimizer_steps_and_spans_the_schedule() -> None:
    params, step = _quadratic()
    calls = []

    def counted(bi: torch.Tensor) -> torch.Tensor:
        calls.append(bi.numel())
        return step(bi)

    log = train_epochs(params, counted, 100, epochs=5, batch_size=10, lr=0.1, generator=torch.Generator().manual_seed(0),
                       max_steps=12)
    assert len(calls) == 12 and sum(calls) == log.n_seen == 120
    assert len(log.losses) == 2  # one full epoch and the partial second
    uncapped = train_epochs(*_quadratic(), 100, epochs=5, batch_size=10, lr=0.1, generator=torch.Generator().manual_seed(0))
    assert uncapped.n_seen == 500 and len(uncapped.losses) == 5
    with pytest.raises(ValueError, match="max_steps"):
        train_epochs(*_quadratic(), 10, epochs=1, batch_size=5, lr=0.1, generator=torch.Generator(), max_steps=-1)


def test_a_training_run_writes_progress_lines_with_loss_and_eta(capsys, monkeypatch) -> None:
    monkeypatch.setenv("CAPE_PROGRESS_INTERVAL", "0")
    train_epochs(*_quadratic(), 40, epochs=2, batch_size=10, lr=0.1, generator=torch.Generator().manual_seed(0),
                 progress=True, desc="pretrain cape seed 0")
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "pretrain cape seed 0" in ln]
    assert len(lines) >= 8
    assert "8/8 steps (100%)" in lines[-1] and "loss" in lines[-1] and "ETA" in lines[-1]


def test_progress_of_a_run_joins_the_outer_bar(monkeypatch) -> None:
    import io

    from cape_pipeline._progress import LogProgress, active

    out = io.StringIO()
    bar = LogProgress(interval=0, stream=out, prefix="train", unit="runs")
    with bar, active(bar):
        t = bar.add_task("run 1/1", total=1)
        train_epochs(*_quadratic(), 20, epochs=1, batch_size=10, lr=0.1, generator=torch.Generator().manual_seed(0),
                     progress=True, desc="finetune cape seed 0")
        bar.advance(t)
    text = out.getvalue()
    assert "train finetune cape seed 0" in text and "2/2 runs" not in text and "1/1 runs" in text


def test_the_earlier_module_name_warns_and_gives_the_same_functions() -> None:
    sys.modules.pop("cape_pipeline.models.training", None)
    with pytest.warns(FutureWarning, match="cape_pipeline.models.loops"):
        old = importlib.import_module("cape_pipeline.models.training")
    assert old.train_epochs is train_epochs


def test_masked_step_seconds_times_the_steps_of_train_epochs(monkeypatch) -> None:
    """The timed steps are train_epochs' steps: warm-up + timed steps in all, one batch each."""
    import numpy as np

    from cape_pipeline.models import build_backbone, loops

    calls = []
    real = loops.train_epochs

    def spy(params, step, n, **kw):
        calls.append((n, kw["epochs"], kw["batch_size"]))
        return real(params, step, n, **kw)

    monkeypatch.setattr(loops, "train_epochs", spy)
    model = build_backbone("scgpt", {"d_model": 16, "n_heads": 2, "n_layers": 1, "max_tokens": 8}, n_features=12,
                           pe="none")
    xb = torch.as_tensor(np.random.default_rng(0).gamma(1.0, 1.0, (6, 12)), dtype=torch.float32)
    sec = loops.masked_step_seconds(model, xb, steps=2, warmup_steps=1, generator=torch.Generator().manual_seed(0))
    assert sec > 0 and calls == [(6, 3, 6)]
    with pytest.raises(ValueError, match="steps"):
        loops.masked_step_seconds(model, xb, steps=0, generator=torch.Generator())
