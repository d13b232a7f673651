"""The algorithm configs of Step I by name, and the earlier flat spelling of their options.

``DiscoverConfig`` holds one config per algorithm (:data:`CONFIG_CLASSES`). Until the flat
spelling goes, :func:`nest_options` maps a flat option (``min_effect=0.01``, ``--set
discover.fdr=0.1``) onto its algorithm's config, with a FutureWarning naming the new spelling.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Any

from cape_pipeline.causal.learned.config import LearnedConfig
from cape_pipeline.causal.lowrank.config import LowRankConfig
from cape_pipeline.causal.regression.config import RegressionConfig
from cape_pipeline.causal.screened.config import ScreenedConfig
from cape_pipeline.errors import CapeConfigError

__all__ = ["ALGORITHM_FIELDS", "CONFIG_CLASSES", "FLAT_OPTIONS", "nest_options"]

#: each algorithm of method "cape" → the field of DiscoverConfig that holds its config
ALGORITHM_FIELDS = {"regression": "regression", "low-rank": "low_rank", "screened": "screened", "learned": "learned"}
#: each such field → its config class
CONFIG_CLASSES: dict[str, type] = {
    "regression": RegressionConfig, "low_rank": LowRankConfig, "screened": ScreenedConfig, "learned": LearnedConfig,
}


def _options_of() -> dict[str, tuple[str, ...]]:
    """Each option name of an algorithm config → the DiscoverConfig fields whose config has it."""
    out: dict[str, tuple[str, ...]] = {}
    for name, cls in CONFIG_CLASSES.items():
        for f in dataclasses.fields(cls):
            out[f.name] = (*out.get(f.name, ()), name)
    return out


#: the flat spelling of an algorithm's option (``min_effect``) → the algorithm configs that have it
FLAT_OPTIONS = _options_of()


def _spelling(name: str, key: str, value: Any, where: str) -> str:
    """The nested spelling of the flat option ``key`` of config field ``name``, as the caller writes it."""
    if where:
        return f"{where}{name}.{key}"
    return f"{name}={{{key!r}: {value!r}}}"


def nest_options(
    options: Mapping[str, Any], method: str = "cape", algorithm: str = "auto",
    method_options: Mapping[str, Any] | None = None, *, where: str = "",
) -> dict[str, Any]:
    """``options`` of :class:`DiscoverConfig` with the earlier spellings mapped to the current ones,
    each with a :class:`FutureWarning` naming the new spelling: ``support`` → ``algorithm``, and
    with method ``"cape"`` a flat option of an algorithm (``min_effect``) → that algorithm's
    config (``regression={"min_effect": …}``). A flat name that several algorithms have
    (``epochs``, ``lr``, ``threshold``, ``n_candidates``, …) goes to the explicitly chosen
    algorithm. With a baseline method the flat names are the baseline's options
    (``method_options``), as they always were.

    Parameters
    ----------
    options
        Option name → value. Dotted names (``"regression.fdr"``, the pipeline's ``--set``) are
        gathered into a dict per algorithm config.
    method, algorithm, method_options
        Those of the config the options are put into (they apply unless ``options`` sets them).
    where
        ``""`` for Python keywords; the pipeline passes ``"discover."`` and the messages then use
        its ``discover.regression.fdr`` spelling.

    Returns
    -------
    dict
        The options, every algorithm option inside a dict under its config's field name.

    Raises
    ------
    CapeConfigError
        Both ``support`` and ``algorithm``; a flat name of several algorithms with
        ``algorithm="auto"`` (naming the nested spellings); a flat name the chosen algorithm
        does not have; the same option given flat and nested.
    """
    out: dict[str, Any] = {}
    for key, value in options.items():
        head, dot, rest = str(key).partition(".")
        if dot and head in CONFIG_CLASSES:
            nested = out.setdefault(head, {})
            if not isinstance(nested, Mapping):
                raise CapeConfigError(f"{where}{head}: given both whole and as {where}{key}")
            nested[rest] = value
        else:
            if key in CONFIG_CLASSES and isinstance(out.get(key), dict) and isinstance(value, Mapping):
                out[key] = {**value, **out[key]}
                continue
            out[key] = value
    if "support" in out:
        warnings.warn(f"{where}support is now called {where}algorithm; the earlier name will be removed",
                      FutureWarning, stacklevel=3)
        support = out.pop("support")
        if out.get("algorithm", support) != support:
            raise CapeConfigError(f"{where}support is the earlier name of {where}algorithm; give only algorithm")
        out["algorithm"] = support
    flat = [k for k in out if k in FLAT_OPTIONS]
    if out.get("method", method) != "cape":
        if flat:
            out["method_options"] = {**(method_options or {}), **out.get("method_options", {}),
                                     **{k: out.pop(k) for k in flat}}
        return out
    algorithm = out.get("algorithm", algorithm)
    for key in flat:
        owners = FLAT_OPTIONS[key]
        own = ALGORITHM_FIELDS.get(algorithm)
        if len(owners) == 1:
            name = owners[0]
        elif own in owners:
            name = own
        elif algorithm == "auto":
            raise CapeConfigError(
                f"{where}{key}: an option of several algorithms; give it to one: "
                f"{' or '.join(_spelling(o, key, out[key], where) for o in owners)} (or set {where}algorithm)"
            )
        else:
            raise CapeConfigError(
                f"{where}{key}: not an option of algorithm {algorithm!r}; it is one of "
                f"{', '.join(_spelling(o, key, out[key], where) for o in owners)}"
            )
        value = out.pop(key)
        warnings.warn(f"{where}{key} is now {_spelling(name, key, value, where)}; the flat name will be removed",
                      FutureWarning, stacklevel=3)
        nested = out.get(name, {})
        if dataclasses.is_dataclass(nested):
            out[name] = dataclasses.replace(nested, **{key: value})  # type: ignore[arg-type]
        elif key in nested:
            raise CapeConfigError(f"{where}{key}: given both flat and as {_spelling(name, key, nested[key], where)}")
        else:
            out[name] = {**nested, key: value}
    return out
