"""Every stage parameter with its default, type and meaning, read from the configs themselves.

The meaning of a parameter is taken from the numpydoc ``Attributes`` section of the stage's
config class, else from the ``Parameters`` section of the function the stage calls
(``Stage.doc_from``: :func:`~cape_pipeline.causal.api.discover`,
:func:`~cape_pipeline.hyperbolic.embed`, …), so the text ``cape params`` and ``--help`` show is
the text of the API reference and is written once. A test checks that every field has one.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from dataclasses import dataclass
from typing import Any

import docstring_parser

from cape_pipeline.errors import CapeConfigError

__all__ = ["ParamDoc", "param_docs", "stage_params"]

_ROLE = re.compile(r":\w+:`~?([^`]+)`")


@dataclass(frozen=True)
class ParamDoc:
    """One stage parameter as ``cape params`` lists it.

    Attributes
    ----------
    stage, name
        ``--set stage.name=value``.
    type
        The annotation of the config field, as written (e.g. ``int | None``).
    default
        The default value (``None`` means "chosen by the method", see ``help``).
    help
        One paragraph: what the parameter does, in the docstring's words.
    """

    stage: str
    name: str
    type: str
    default: Any
    help: str


def _plain(text: str) -> str:
    """Docstring text on one line: roles (``:func:`~a.b```) become their last name, no double
    backquotes."""
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~") else m.group(1), text)
    return " ".join(text.replace("``", "").split())


def param_docs(*objects: Any) -> dict[str, str]:
    """``{name: description}`` from the numpydoc ``Attributes``/``Parameters`` of ``objects``
    (classes or functions); the first object that documents a name wins. Grouped entries
    (``epochs, batch_size, lr``) give the same text to each name."""
    out: dict[str, str] = {}
    for obj in objects:
        doc = inspect.getdoc(obj) or ""
        for p in docstring_parser.parse(doc, style=docstring_parser.DocstringStyle.NUMPYDOC).params:
            for name in re.split(r"\s*[,/]\s*", p.arg_name.strip().lstrip("*")):
                if name and name not in out and p.description:
                    out[name] = _plain(p.description)
    return out


def stage_params(stage: str) -> list[ParamDoc]:
    """The parameters of ``stage`` in field order, with default, type and meaning.

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
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:  # pragma: no cover - every stage parameter has a default
            default = None
        out.append(ParamDoc(stage, f.name, str(f.type), default, docs.get(f.name, "")))
    return out
