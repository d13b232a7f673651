"""The dataset catalog (``data_catalog.yaml``): names → loaders, modality, labels, tasks."""

from __future__ import annotations

import importlib
import inspect
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from cape_pipeline.errors import CapeConfigError, CapeFileError

MODALITIES = ("scrna", "proteomics", "methylation", "synthetic")
CATALOG_ENV = "CAPE_CATALOG"


def yaml_error_message(path: str | os.PathLike[str], exc: BaseException) -> str:
    """One line for a YAML file that failed to parse: the file, where, and the YAML problem.

    ``PATH: not valid YAML at line L, column C: PROBLEM (while CONTEXT from line L', column C')``,
    from the ``problem_mark``/``problem`` (and ``context``/``context_mark``) of a
    :class:`yaml.MarkedYAMLError`; line and column count from 1. Other errors give their text
    with the lines joined.

    It raises nothing itself: any exception is described.
    """
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if not problem:
        text = " ".join(str(exc).split()) or type(exc).__name__
        return f"{path}: not valid YAML: {text}"
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    msg = f"{path}: not valid YAML{where}: {' '.join(str(problem).split())}"
    context = getattr(exc, "context", None)
    cmark = getattr(exc, "context_mark", None)
    if context:
        at = f" from line {cmark.line + 1}, column {cmark.column + 1}" if cmark is not None else ""
        msg += f" ({' '.join(str(context).split())}{at})"
    return msg


@dataclass(frozen=True)
class CatalogEntry:
    """One dataset of the catalog (see the header of ``data_catalog.yaml`` for the fields)."""

    name: str
    modality: str
    loader: str
    description: str = ""
    source: str = ""
    citation: str = ""
    labels: tuple[str, ...] = ()
    ground_truth: str | None = None
    tasks: tuple[str, ...] = ()
    bundled: bool = True
    path_env: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def load(self, **kwargs: Any) -> Any:
        """Call the loader with ``kwargs`` and return its AnnData.

        Raises
        ------
        CapeConfigError
            If a keyword is not a parameter of the loader (the message lists the accepted ones).
        """
        module, _, func = self.loader.partition(":")
        fn = getattr(importlib.import_module(module), func)
        accepted = list(inspect.signature(fn).parameters)
        unknown = sorted(set(kwargs) - set(accepted))
        if unknown:
            raise CapeConfigError(
                f"dataset {self.name!r}: unknown parameter(s) {unknown}; accepted: {accepted or 'none'}"
            )
        return fn(**kwargs)


def catalog_path() -> Path:
    """Path of the active catalog: ``$CAPE_CATALOG`` if set, else the packaged one."""
    env = os.environ.get(CATALOG_ENV)
    if env:
        return Path(env)
    return Path(str(resources.files("cape_pipeline") / "data_catalog.yaml"))


def load_catalog(path: str | os.PathLike[str] | None = None) -> dict[str, CatalogEntry]:
    """Read a catalog file into ``{name: CatalogEntry}``.

    Raises
    ------
    CapeFileError
        If the file is missing or not valid YAML of the expected shape.
    """
    p = Path(path) if path is not None else catalog_path()
    try:
        doc = yaml.safe_load(p.read_text())
    except FileNotFoundError as exc:
        raise CapeFileError(f"{p}: catalog file not found") from exc
    except yaml.YAMLError as exc:
        raise CapeFileError(yaml_error_message(p, exc)) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("datasets"), list):
        raise CapeFileError(f"{p}: expected a mapping with a 'datasets' list")
    known = {f for f in CatalogEntry.__dataclass_fields__ if f != "extra"}
    out: dict[str, CatalogEntry] = {}
    for i, raw in enumerate(doc["datasets"]):
        if not isinstance(raw, dict) or "name" not in raw or "loader" not in raw or "modality" not in raw:
            raise CapeFileError(f"{p}: datasets[{i}] needs at least name, modality and loader")
        if raw["modality"] not in MODALITIES:
            raise CapeFileError(
                f"{p}: dataset {raw['name']!r} has modality {raw['modality']!r}; expected one of {MODALITIES}"
            )
        kw = {k: v for k, v in raw.items() if k in known}
        kw["labels"] = tuple(kw.get("labels") or ())
        kw["tasks"] = tuple(kw.get("tasks") or ())
        entry = CatalogEntry(**kw, extra={k: v for k, v in raw.items() if k not in known})
        out[entry.name] = entry
    return out


def get_entry(name: str, path: str | os.PathLike[str] | None = None) -> CatalogEntry:
    """Look up one catalog entry by name.

    Raises
    ------
    CapeConfigError
        If ``name`` is not in the catalog (the message lists the known names).
    """
    cat = load_catalog(path)
    if name not in cat:
        raise CapeConfigError(
            f"unknown dataset {name!r}: not a file and not in the catalog {catalog_path()} "
            f"(known: {', '.join(sorted(cat))})"
        )
    return cat[name]
