"""Deprecated name of :mod:`cape_pipeline.models.loops` (the generic training loops); importing
it warns with a :class:`FutureWarning`, and the name will be removed."""

from __future__ import annotations

import warnings

from cape_pipeline.models.loops import *  # noqa: F403
from cape_pipeline.models.loops import __all__  # noqa: F401

warnings.warn("cape_pipeline.models.training is now cape_pipeline.models.loops; the earlier name will be removed",
              FutureWarning, stacklevel=2)
