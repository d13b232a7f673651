"""Every stage parameter with its default, type and meaning, read from the configs themselves.

The meaning of a parameter is taken from the numpydoc ``Attributes`` section of the stage's
config class, else from the ``Parameters`` section of the function the stage calls
(``Stage.doc_from``: :func:`~cape_pipeline.causal.api.discover`,
:func:`~cape_pipeline.hyperbolic.embed`, …), so the text ``cape params`` and ``--help`` show is
the text of the API reference and is written once. A test checks that every field has one.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docstring_parser

from cape_pipeline.errors import CapeConfigError

__all__ = ["USER_OPTIONS", "ParamDoc", "param_docs", "plain_meaning", "stage_params"]

_ROLE = re.compile(r":\w+:`~?([^`]+)`")

USER_OPTIONS: dict[str, tuple[str, ...]] = {
    "ingest": ("label_columns", "modality", "index_column"),
    "preprocess": ("n_top_genes", "min_genes", "min_cells", "target_sum", "counts_layer", "transform"),
    "discover": ("method", "algorithm", "regression.regulators", "regression.min_effect", "regression.fdr",
                 "regression.n_splits", "covariates", "regression.interventions", "hold_out_test_conditions",
                 "device", "seed"),
    "embed": ("dim", "max_epochs", "device", "seed"),
    "encode": ("scale",),
    "train": ("tasks", "label_key", "backbone", "arm", "n_seeds", "encodings", "device", "seed"),
    "evaluate": ("umap",),
}
"""The options a user sets first, per stage, in the order ``cape params`` lists them; every other
field is a research setting, listed after them under "advanced". A field that holds a config
(``discover.regression``) is listed by its fields, ``regression.fdr``; a field the pipeline
derives from other stages (``metadata={"derived": True}``, discover's ``held_out_split``) is not
listed and cannot be set. :func:`cape_pipeline.tl.discover` and :func:`cape_pipeline.tl.embed`
take these as keywords, by their last name (``fdr``; a test keeps them in step), all but the
pipeline's own (discover's ``hold_out_test_conditions``: the blind split needs the train stage)."""


@dataclass(frozen=True)
class ParamDoc:
    """One stage parameter as ``cape params`` lists it.

    Attributes
    ----------
    stage, name
        ``--set stage.name=value`` (``name`` dotted for a field of a nested config:
        ``regression.fdr``).
    type
        The annotation of the config field, as written (e.g. ``int | None``).
    default
        The default value (``None`` means "chosen by the method", see ``help``).
    help
        One paragraph: what the parameter does, in the docstring's words without internal
        constant names or file paths (:func:`plain_meaning`).
    advanced
        A research setting (not in :data:`USER_OPTIONS`).
    """

    stage: str
    name: str
    type: str
    default: Any
    help: str
    advanced: bool = False


def _plain(text: str) -> str:
    """Docstring text on one line: roles (``:func:`~a.b```) become their last name, no double
    backquotes."""
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~") else m.group(1), text)
    return " ".join(text.replace("``", "").split())


def param_docs(*objects: Any) -> dict[str, str]:
    """``{name: description}`` from the numpydoc ``Attributes``/``Parameters`` of ``objects``
    (classes or functions; a class with its base classes after it, so a field is documented once,
    where it is declared); the first object that documents a name wins. Grouped entries
    (``epochs, batch_size, lr``) give the same text to each name."""
    out: dict[str, str] = {}
    sources = [o for obj in objects for o in (obj.__mro__[:-1] if isinstance(obj, type) else (obj,))]
    for src in sources:
        doc = inspect.getdoc(src) or ""
        for p in docstring_parser.parse(doc, style=docstring_parser.DocstringStyle.NUMPYDOC).params:
            for name in re.split(r"\s*[,/]\s*", p.arg_name.strip().lstrip("*")):
                if name and name not in out and p.description:
                    out[name] = _plain(p.description)
    return out


_PATH = re.compile(r"(?:\b(?:benchmarks|docs|workflows|tests|cape_pipeline)/[\w./-]*\w)|\b[\w-]+\.(?:md|py|yaml|json)\b")
_CONSTANT = re.compile(r"\b(?:[a-z_][\w]*\.)*([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z][A-Z0-9]{3,})\b")
"""An upper-case name: ``N_SPLITS``, ``cape_pipeline.models.PE_NAMES``; one without ``_``
(``COVARIATES``) counts only where a module of the package defines it (``DAG`` does not)."""


def _clauses(text: str) -> list[tuple[int, int]]:
    """``(start, stop)`` of each clause of ``text``: the stretches between ``;``, the parentheses
    and sentence ends (``. `` before a capital or the end)."""
    cuts = [0]
    for i, ch in enumerate(text):
        if ch in ";()":
            cuts += [i, i + 1]
        elif ch == "." and (i + 1 == len(text) or (text[i + 1] == " " and text[i + 2 : i + 3].isupper())):
            cuts += [i, i + 1]
    cuts.append(len(text))
    return [(cuts[k], cuts[k + 1]) for k in range(0, len(cuts) - 1, 2)]


@functools.cache
def _constant_value(name: str) -> str | None:
    """The value of an upper-case module constant of the package, as a user reads it (a
    number, or names joined by commas), or None when it is not a plain value."""
    import sys

    modules = [m for n, m in list(sys.modules.items()) if n.startswith("cape_pipeline") and m is not None]
    if "_" in name and not any(hasattr(m, name) for m in modules):  # in a module not imported yet: find it
        root = Path(__file__).resolve().parents[1]
        pattern = re.compile(rf"^{name}\b[^=\n]*=", re.MULTILINE)
        for path in sorted(root.rglob("*.py")):
            if pattern.search(path.read_text(encoding="utf-8")):
                parts = path.relative_to(root.parent).with_suffix("").parts
                modules.append(importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts)))
                break
    for mod in modules:
        value = getattr(mod, name, None)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float)):
            return f"{value:g}" if isinstance(value, float) else str(value)
        if isinstance(value, (tuple, list, frozenset)) and all(isinstance(v, str) for v in value):
            return ", ".join(value)
        return None
    return None


def plain_meaning(text: str) -> str:
    """A parameter's meaning as ``cape params`` shows it: module constants replaced by their
    values (``N_SPLITS (8)`` → ``8``), clauses that cite a file path (``benchmarks/…``) left out.

    Examples
    --------
    >>> plain_meaning("Partial R² (0.003; chosen on two generators, benchmarks/x/RESULTS.md).")
    'Partial R² (0.003).'
    """

    def present(v: str) -> bool:
        return re.search(rf"(?<![\w.]){re.escape(v)}(?![\w.])", text) is not None

    def constant(m: re.Match[str]) -> str:
        value = _constant_value(m.group(1))
        if value is None:
            return "the default" if "_" in m.group(1) else m.group(0)
        if value.isdigit():
            return "" if present(value) or present(f"{int(value):,}") else value
        return "" if present(value) or all(present(f'"{v}"') or present(v) for v in value.split(", ")) else value

    for m in reversed(list(_CONSTANT.finditer(text))):  # "NAME (8)" → "8"
        value = _constant_value(m.group(1))
        if value is not None and text[m.end() :].startswith(f" ({value})"):
            text = text[: m.start()] + value + text[m.end() + len(value) + 3 :]
    text = _CONSTANT.sub(constant, text)
    for start, stop in reversed(_clauses(text)):
        if _PATH.search(text[start:stop]):
            text = text[:start] + text[stop:]
    for pattern, repl in ((r",\s*(?=[;.)])", ""), (r"\(\s*[;,]?\s*\)", ""), (r"\(\s*;\s*", "("), (r"\s*;\s*\)", ")"), (r";\s*;", ";"),
                          (r"\s*;\s*\.", "."), (r"\.\s*\.", "."), (r"\s+([,;)]|\.(?!\w))", r"\1"), (r"\s{2,}", " "),
                          (r"^\s*\.\s*", "")):
        text = re.sub(pattern, repl, text)
    return text.strip()


def stage_params(stage: str) -> list[ParamDoc]:
    """The parameters of ``stage`` in field order, with default, type and meaning; the fields the
    pipeline derives (``metadata={"derived": True}``) are not parameters.

    Raises
    ------
    CapeConfigError
        Unknown stage name.
    """
    from cape_pipeline.pipeline.stages import STAGE_ORDER, STAGES

    if stage not in STAGES:
        raise CapeConfigError(f"stage {stage!r}: expected one of {', '.join(STAGE_ORDER)}")
    st = STAGES[stage]
    sources = []
    for ref in st.doc_from:
        module, _, attr = ref.partition(":")
        sources.append(getattr(importlib.import_module(module), attr))
    docs = param_docs(st.config_cls, *sources)
    out = []
    for f in dataclasses.fields(st.config_cls):
        if f.metadata.get("derived"):
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:  # pragma: no cover - every stage parameter has a default
            default = None
        if dataclasses.is_dataclass(default):  # a config of its own: its fields, nested
            sub = param_docs(type(default))
            out += [ParamDoc(stage, f"{f.name}.{g.name}", str(g.type), getattr(default, g.name),
                             plain_meaning(sub.get(g.name, "")),
                             advanced=f"{f.name}.{g.name}" not in USER_OPTIONS.get(stage, ()))
                    for g in dataclasses.fields(default)]
            continue
        out.append(ParamDoc(stage, f.name, str(f.type), default, plain_meaning(docs.get(f.name, "")),
                            advanced=f.name not in USER_OPTIONS.get(stage, ())))
    return out
