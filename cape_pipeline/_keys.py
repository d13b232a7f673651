"""Default AnnData keys written by :mod:`cape_pipeline.tl` (one place, as scanpy's ``_keys``), and the
pipeline's stage order (read by the stages, the CLI and ``workflows/Snakefile``; importing this
module imports nothing heavy)."""

from __future__ import annotations

DAG = "cape_dag"
"""``varp``: (n_vars, n_vars) sparse float64, ``[i, j]`` = weight of edge i → j (Step I)."""
HYPERBOLOID = "cape_hyperboloid"
"""``varm``: (n_vars, d + 1) float64 points on the hyperboloid (Step II, Eq. 11)."""
POINCARE = "cape_poincare"
"""``varm``: (n_vars, d) float64 Poincaré-ball coordinates e (Eq. A.22)."""
PAGERANK = "cape_pagerank"
"""``var``: (n_vars,) float64 causal PageRank π (Eq. 18)."""
ANGLES = "cape_angles"
"""``varm``: (n_vars, d) float64 rotary angles φ = c·e in radians (Sec. 3.5, the map stated below Eq. 25)."""
LIBRARY_SIZE = "cape_library_size"
"""``obs``: (n_obs,) float64 total counts per cell before normalization, written by
:func:`cape_pipeline.pp.preprocess` when the input held counts; Step I's library-size covariate."""
UNS = "cape"
"""``uns``: parameters and diagnostics of each step, under ``"discover"``, ``"embed"``, ``"encode"``."""

STAGE_ORDER = ("ingest", "preprocess", "discover", "embed", "encode", "train", "evaluate")
"""The pipeline's stages in the order they run (``cape run --until``, one ``cape STAGE`` command each,
one Snakemake rule each)."""
