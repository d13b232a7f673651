"""Data in: readers for .h5ad / .parquet / .csv / catalog names, validation, the catalog."""

from __future__ import annotations

from cape_pipeline.io.catalog import CatalogEntry, get_entry, load_catalog
from cape_pipeline.io.readers import read, read_csv, read_h5ad, read_parquet, validate_adata

__all__ = [
    "read",
    "read_h5ad",
    "read_parquet",
    "read_csv",
    "validate_adata",
    "load_catalog",
    "get_entry",
    "CatalogEntry",
]
