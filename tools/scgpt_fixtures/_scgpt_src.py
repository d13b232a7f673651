"""Load scGPT 0.2.4's ``scgpt/model/model.py`` alone (its package ``__init__`` needs torchtext,
which does not import with current torch). The source comes from
``pip download scgpt==0.2.4 --no-deps`` unpacked to ``/tmp/scgpt_src``."""

import importlib.util
import pathlib
import sys
import types

SRC = pathlib.Path("/tmp/scgpt_src/scgpt/model")


def load_model_module() -> types.ModuleType:
    """``scgpt.model.model`` (with its siblings ``dsbn`` and ``grad_reverse``), loaded by path
    under placeholder ``scgpt`` / ``scgpt.model`` packages."""
    for name in ("scgpt", "scgpt.model"):
        mod = types.ModuleType(name)
        mod.__path__ = []
        sys.modules[name] = mod

    def load(sub: str) -> types.ModuleType:
        spec = importlib.util.spec_from_file_location(f"scgpt.model.{sub}", SRC / f"{sub}.py")
        m = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = m
        spec.loader.exec_module(m)
        return m

    load("dsbn")
    load("grad_reverse")
    return load("model")
