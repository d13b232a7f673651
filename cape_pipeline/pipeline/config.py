"""Stage configs from defaults, a YAML file and ``--set stage.param=value`` overrides."""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from cape_pipeline.errors import CapeConfigError, CapeFileError


def parse_assignments(items: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Parse ``["stage.param=value", ...]`` into ``{stage: {param: value}}``.

    Values are parsed as YAML scalars/lists (``3``, ``0.5``, ``true``, ``[a, b]``, ``null``);
    anything else stays a string.

    Raises
    ------
    CapeConfigError
        If an item is not of the form ``stage.param=value``.
    """
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        lhs, eq, rhs = item.partition("=")
        stage, dot, param = lhs.strip().partition(".")
        if not eq or not dot or not stage or not param:
            raise CapeConfigError(f"--set {item!r}: expected stage.param=value, e.g. preprocess.n_top_genes=500")
        try:
            value = yaml.safe_load(rhs) if rhs.strip() else ""
        except yaml.YAMLError:
            value = rhs
        out.setdefault(stage, {})[param] = value
    return out


DATA_KEYS: dict[str, tuple[str, str]] = {
    "labels": ("ingest", "label_columns"),
    "counts_layer": ("preprocess", "counts_layer"),
}
"""Where things are in the data, said once (``cape run --labels/--counts-layer``, the YAML
config's top-level ``labels:``/``counts_layer:``, :func:`~cape_pipeline.pipeline.run_pipeline`'s
``labels=``/``counts_layer=``): each key and the stage parameter it sets."""


def data_keys(labels: str | Sequence[str] | None = None, counts_layer: str | None = None) -> dict[str, dict[str, Any]]:
    """The stage parameters that ``labels`` and ``counts_layer`` stand for (:data:`DATA_KEYS`).

    Parameters
    ----------
    labels
        The ``obs`` columns (``.h5ad``) or table columns (Parquet/CSV) that hold labels: a name,
        comma-separated names or a list; the first is the label of annotation and clustering
        (unless ``train.label_key`` names another). Sets ``ingest.label_columns``.
    counts_layer
        The ``.h5ad`` layer of raw counts. Sets ``preprocess.counts_layer``.

    Returns
    -------
    dict
        ``{stage: {param: value}}``, empty for ``None``s.
    """
    out: dict[str, dict[str, Any]] = {}
    if labels is not None:
        items = labels.split(",") if isinstance(labels, str) else [str(v) for v in labels]
        out["ingest"] = {"label_columns": [n.strip() for n in items if n.strip()]}
    if counts_layer is not None:
        out["preprocess"] = {"counts_layer": str(counts_layer)}
    return out


def read_config_file(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Read a YAML file of the form ``{stage: {param: value}}``; the top-level keys ``labels``
    and ``counts_layer`` (:data:`DATA_KEYS`) say where things are in the data, as the CLI's
    ``--labels`` and ``--counts-layer`` do.

    Raises
    ------
    CapeFileError
        Missing file, a directory, an unreadable or non-UTF-8 file, invalid YAML (one line
        naming the line and column of the problem), or not a mapping of mappings.
    """
    from cape_pipeline.io.catalog import yaml_error_message

    p = Path(path)
    if p.is_dir():
        raise CapeFileError(f"{p}: is a directory; expected a YAML config file {{stage: {{param: value}}}}")
    try:
        doc = yaml.safe_load(p.read_text()) or {}
    except FileNotFoundError as exc:
        raise CapeFileError(f"{p}: config file not found") from exc
    except UnicodeDecodeError as exc:
        raise CapeFileError(f"{p}: not a text file (not UTF-8); expected a YAML config file") from exc
    except OSError as exc:
        raise CapeFileError(f"{p}: cannot read config file ({exc.strerror or exc})") from exc
    except yaml.YAMLError as exc:
        raise CapeFileError(yaml_error_message(p, exc)) from exc
    if not isinstance(doc, dict):
        raise CapeFileError(f"{p}: expected a mapping of stage name to a mapping of parameters")
    keys = {k: doc.pop(k) for k in list(doc) if k in DATA_KEYS}
    if not all(isinstance(v, dict) for v in doc.values()):
        raise CapeFileError(f"{p}: expected a mapping of stage name to a mapping of parameters "
                            f"(and the top-level keys {', '.join(DATA_KEYS)})")
    if keys.get("labels") is not None and not isinstance(keys["labels"], str | list):
        raise CapeFileError(f"{p}: labels: expected a column name or a list of them, got {keys['labels']!r}")
    return merge({str(k): dict(v) for k, v in doc.items()}, data_keys(keys.get("labels"), keys.get("counts_layer")))


def merge(*layers: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Merge ``{stage: {param: value}}`` layers; later layers win per parameter."""
    out: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for stage, params in layer.items():
            out.setdefault(stage, {}).update(params)
    return out


def _coerce(value: Any, default: Any, where: str) -> Any:
    if value is None or default is None:
        return value
    try:
        if isinstance(default, bool):
            if isinstance(value, bool):
                return value
            raise ValueError
        if isinstance(default, int) and not isinstance(value, bool):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if isinstance(default, float) and not isinstance(value, bool):
            return float(value)
        if isinstance(default, tuple) and isinstance(value, (list, tuple)):
            return tuple(value)
    except (TypeError, ValueError):
        kind = {"int": "an integer", "float": "a number", "bool": "true or false", "tuple": "a list"}
        what = kind.get(type(default).__name__, f"a {type(default).__name__}")
        raise CapeConfigError(f"{where}: expected {what}, got {value!r}") from None
    return value


def _coerce_nested(default: Any, values: Mapping[str, Any], where: str) -> Any:
    """``values`` for the nested config whose default instance is ``default`` (a dataclass; any
    other default takes the mapping as it is), each coerced to the type of its field's default.

    Raises
    ------
    CapeConfigError
        An unknown key (named as ``stage.field.key``, with the closest and the known ones) or a
        value of the wrong type.
    """
    from cape_pipeline._config import did_you_mean

    if not dataclasses.is_dataclass(default):
        return dict(values)
    sub = {f.name: f for f in dataclasses.fields(default)}
    unknown = sorted(set(values) - set(sub))
    if unknown:
        hint = "".join(did_you_mean(str(k), sub, prefix=f"{where}.") for k in unknown)
        raise CapeConfigError(f"unknown parameter(s) {[f'{where}.{k}' for k in unknown]}{hint}; known: {sorted(sub)}")
    return {k: _coerce(v, getattr(default, k), f"{where}.{k}") for k, v in values.items()}


def _nested_hint(cls: type, name: str, stage: str) -> str:
    """``" (did you mean 'stage.field.option'?)"`` where ``name`` is close to an option of a nested
    config of ``cls`` (``min_efect`` → ``discover.regression.min_effect``), else ``""``."""
    from cape_pipeline._config import did_you_mean

    leaves: dict[str, str] = {}
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(default):
            for g in dataclasses.fields(default):
                leaves.setdefault(g.name, f"{f.name}.{g.name}")
    close = difflib.get_close_matches(name.rsplit(".", 1)[-1], list(leaves), n=1, cutoff=0.6)
    return did_you_mean(leaves[close[0]], [leaves[close[0]]], prefix=f"{stage}.") if close else ""


def build_config(cls: type, stage: str, params: Mapping[str, Any], *, extra_field: str | None = None) -> Any:
    """Instantiate the frozen config dataclass ``cls`` from ``params``.

    Parameters
    ----------
    cls
        A dataclass whose fields are the stage's parameters.
    stage
        Stage name, for error messages.
    params
        Parameter values; strings are coerced to the type of each field's default.
    extra_field
        Name of a mapping field that collects unknown parameters (the ingest stage passes them
        to the dataset loader), except near misses of a field's name (``label_colums``), which
        are an error; without it unknown parameters are an error.

    A field whose default is a config (``discover.regression``) takes its parameters nested:
    ``regression.fdr`` (``--set discover.regression.fdr=0.1``) or a mapping (YAML). Where ``cls``
    has a ``stage_params(params, where=)`` classmethod, the parameters pass through it first
    (the discover stage maps the earlier flat names of its algorithms' options there).

    Raises
    ------
    CapeConfigError
        Unknown parameter (the message names the closest, "did you mean 'stage.name'?", and
        lists the known ones), a value of the wrong type, or one
        the config's ``__post_init__`` rejects; the message starts with ``stage.param``.
    """
    from cape_pipeline._config import did_you_mean, renamed_options

    fields = {f.name: f for f in dataclasses.fields(cls)}
    params = renamed_options(cls, params, stage)
    nest = getattr(cls, "stage_params", None)
    if nest is not None:  # nested parameters (discover.regression.fdr) and their earlier flat names
        params = nest(params, where=f"{stage}.")
    known = {k: v for k, v in params.items() if k in fields and k != extra_field}
    unknown = {k: v for k, v in params.items() if k not in fields or k == extra_field}
    kwargs: dict[str, Any] = {}
    for name, value in known.items():
        f = fields[name]
        default = f.default if f.default is not dataclasses.MISSING else None
        if f.default_factory is not dataclasses.MISSING and isinstance(value, Mapping):
            kwargs[name] = _coerce_nested(f.default_factory(), value, f"{stage}.{name}")
            continue
        kwargs[name] = _coerce(value, default, f"{stage}.{name}")
    if unknown:
        if extra_field is None:
            hint = "".join(did_you_mean(k, fields, prefix=f"{stage}.") or _nested_hint(cls, k, stage)
                           for k in sorted(unknown))
            raise CapeConfigError(
                f"unknown parameter(s) {sorted(unknown)} for stage {stage!r}{hint}; known: {sorted(fields)}"
            )
        own = [f for f in fields if f != extra_field]
        typos = {k: did_you_mean(k, own, prefix=f"{stage}.") for k in sorted(unknown) if k != extra_field}
        typos = {k: hint for k, hint in typos.items() if hint and difflib.get_close_matches(k, own, n=1, cutoff=0.8)}
        if typos:  # a near miss of a field, not a loader argument
            raise CapeConfigError(f"unknown parameter(s) {sorted(typos)} for stage {stage!r}{''.join(typos.values())}")
        kwargs[extra_field] = dict(unknown)
    try:
        return cls(**kwargs)
    except CapeConfigError as exc:  # the config's own checks name the field; add the stage
        msg = str(exc)
        raise CapeConfigError(msg if msg.startswith(f"{stage}.") else f"{stage}.{msg}") from None
