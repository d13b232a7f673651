"""A fitted backbone (+ task head) that is saved with its config and feature list, and loads back.

:class:`TrainedModel` is what the tasks return (``TaskResult.model``): the backbone after
pre-training / fine-tuning, the head of its task (a classifier for annotation, a regressor for
age), the feature names it was trained on, and what the head predicts (class names, the age
scale). :meth:`TrainedModel.save` writes a directory with fixed file names (as scvi-tools'
``save``); :func:`load` reads it back, and :meth:`TrainedModel.embed` /
:meth:`TrainedModel.predict` work on new data whose features are aligned by name.

Directory layout (format 1)::

    config.json   backbone name and config, pe, attention, task, head, classes, target scale,
                  pooling, feature names, cape_pipeline version
    weights.pt    {"backbone": state_dict, "head": state_dict or None} (torch.save; loaded
                  with weights_only=True)
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from cape_pipeline._utils import atomic_dir
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError

__all__ = ["TrainedModel", "load", "FORMAT_VERSION"]

FORMAT_VERSION = 1
"""Version of the saved-model directory layout."""

_CONFIG, _WEIGHTS = "config.json", "weights.pt"
log = logging.getLogger(__name__)


@dataclass
class TrainedModel:
    """A fitted backbone with its task head and the feature names it was trained on.

    Attributes
    ----------
    backbone
        The :class:`~cape_pipeline.models.backbones.blocks.TokenTransformer` (eval mode).
    backbone_name
        ``scgpt``, ``scbert`` or ``methylgpt``.
    var_names
        The M feature names, in the order of the backbone's per-feature rows.
    task
        ``annotation``, ``age``, ``clustering``, ``perturbation`` or ``None`` (pretrained only).
    head
        The task head (``ClassifierHead`` / ``RegressionHead`` / ``ValueDecoder``) or ``None``.
    pooling
        How token outputs become the observation embedding (``cls``, ``mean``, ``cls+mean``).
    classes
        Class names of the classifier's outputs (annotation).
    target_mean, target_sd
        The regressor predicts ``(y - mean) / sd`` (age).
    meta
        Free-form provenance (seed, PE, data fingerprint, ...), saved as JSON.
    preprocess
        What :func:`cape_pipeline.pp.preprocess` did to the training data
        (``uns["cape_preprocess"]``: modality, config, input state, steps), or ``None``. With
        it, an AnnData given to :meth:`embed` / :meth:`predict` that was not preprocessed by
        cape_pipeline gets the same per-cell transform first (:meth:`prepare`).
    """

    backbone: nn.Module
    backbone_name: str
    var_names: list[str]
    task: str | None = None
    head: nn.Module | None = None
    pooling: str = "cls"
    classes: list[str] | None = None
    target_mean: float | None = None
    target_sd: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    preprocess: dict[str, Any] | None = None

    # ------------------------------------------------------------------------------- module-like
    def to(self, device: str | torch.device) -> TrainedModel:
        """Move the backbone and head to ``device`` (in place); returns ``self``, as ``nn.Module.to``."""
        self.backbone.to(device)
        if self.head is not None:
            self.head.to(device)
        return self

    def eval(self) -> TrainedModel:
        """Put the backbone and head in eval mode (they load in it); returns ``self``."""
        self.backbone.eval()
        if self.head is not None:
            self.head.eval()
        return self

    # ------------------------------------------------------------------------------- io
    def _config(self) -> dict[str, Any]:
        from cape_pipeline import __version__
        from cape_pipeline.models.backbones.heads import (
            ClassifierHead,
            RegressionHead,
            ValueDecoder,
        )

        bb = self.backbone
        pe = bb.pe_name
        angles_dim = None
        if hasattr(bb.pe, "angles"):
            angles_dim = int(bb.pe.angles.shape[1])
        elif hasattr(bb.pe, "e"):
            angles_dim = int(bb.pe.e.shape[1])
        hyperboloid_dim = None if bb.hyperboloid is None else int(bb.hyperboloid.shape[1])
        head_kind = {ClassifierHead: "classifier", RegressionHead: "regressor", ValueDecoder: "value"}.get(
            type(self.head)
        ) if self.head is not None else None
        return {
            "format": FORMAT_VERSION,
            "cape_pipeline": __version__,
            "backbone": self.backbone_name,
            "model_config": dataclasses.asdict(bb.config),
            "pe": pe,
            "attention": bb.attention_name,
            "n_features": int(bb.n_features),
            "angles_dim": angles_dim,
            "hyperboloid_dim": hyperboloid_dim,
            "task": self.task,
            "head": head_kind,
            "pooling": self.pooling,
            "classes": self.classes,
            "target_mean": self.target_mean,
            "target_sd": self.target_sd,
            "var_names": list(map(str, self.var_names)),
            "meta": self.meta,
            "preprocess": self.preprocess,
        }

    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write the model to directory ``path`` (``config.json``, ``weights.pt``) atomically.

        The directory is written under a temporary name beside ``path`` and renamed into place,
        so a failed save never leaves a half-written model.

        Raises
        ------
        CapeFileError
            If ``path`` exists and ``overwrite`` is false.
        """
        path = Path(path)
        if path.exists() and not overwrite:
            raise CapeFileError(f"{path}: exists; pass overwrite=True to replace the saved model")
        with atomic_dir(path) as tmp:
            (tmp / _CONFIG).write_text(json.dumps(self._config(), indent=1, default=str))
            state = {
                "backbone": {k: v.detach().cpu() for k, v in self.backbone.state_dict().items()},
                "head": None if self.head is None else {k: v.detach().cpu() for k, v in self.head.state_dict().items()},
            }
            torch.save(state, tmp / _WEIGHTS)
        return path

    @classmethod
    def load(cls, path: str | Path, *, device: str | torch.device = "cpu") -> TrainedModel:
        """Read a model written by :meth:`save`.

        Raises
        ------
        CapeFileError
            Missing directory or files, unreadable/corrupt files, an unknown format version, or
            weights that do not fit the stored config.
        """
        from cape_pipeline.models.backbones import build_backbone
        from cape_pipeline.models.backbones.heads import (
            ClassifierHead,
            RegressionHead,
            ValueDecoder,
        )
        from cape_pipeline.models.pe import ANGLE_PES
        from cape_pipeline.models.positions import FeaturePositions

        path = Path(path)
        cfg_file, w_file = path / _CONFIG, path / _WEIGHTS
        for f in (cfg_file, w_file):
            if not f.is_file():
                raise CapeFileError(f"{f}: missing; expected a model directory written by TrainedModel.save")
        try:
            cfg = json.loads(cfg_file.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CapeFileError(f"{cfg_file}: not readable JSON ({exc})") from exc
        if not isinstance(cfg, dict) or cfg.get("format") != FORMAT_VERSION:
            got = cfg.get("format") if isinstance(cfg, dict) else type(cfg).__name__
            raise CapeFileError(f"{cfg_file}: format {got!r}, this version reads {FORMAT_VERSION}")
        try:
            state = torch.load(w_file, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises several types for a truncated/corrupt file
            raise CapeFileError(f"{w_file}: not a readable weights file ({type(exc).__name__}: {exc})") from exc
        try:
            m, d = int(cfg["n_features"]), int(cfg["model_config"]["d_model"])
            if len(cfg["var_names"]) != m:
                raise ValueError(f"{len(cfg['var_names'])} var_names for n_features={m}")
            pe = cfg["pe"]
            # placeholders of the right shapes; load_state_dict then restores the stored buffers
            angles = np.zeros((m, int(cfg["angles_dim"])), dtype=np.float32) if pe in ANGLE_PES else None
            hyp = None
            if cfg.get("hyperboloid_dim"):
                hyp = np.zeros((m, int(cfg["hyperboloid_dim"])))
                hyp[:, 0] = 1.0
            forest = (np.full(m, -1), np.zeros(m)) if pe == "ape-tree" else (None, None)
            positions = FeaturePositions(angles=angles, hyperboloid=hyp, parent=forest[0], parent_weight=forest[1])
            table = np.zeros((m, d), dtype=np.float32) if pe == "static-absolute" else None
            backbone = build_backbone(
                cfg["backbone"], cfg["model_config"], n_features=m, pe=pe, attention=cfg["attention"],
                angles=positions, static_table=table,
            )
            head: nn.Module | None = None
            if cfg["head"] == "classifier":
                head = ClassifierHead(d, len(cfg["classes"]))
            elif cfg["head"] == "regressor":
                head = RegressionHead(d)
            elif cfg["head"] == "value":
                head = ValueDecoder(d)
        except (KeyError, TypeError, ValueError, CapeConfigError, CapeDataError) as exc:
            raise CapeFileError(f"{cfg_file}: not a valid model config ({type(exc).__name__}: {exc})") from exc
        try:
            backbone.load_state_dict(state["backbone"])
            if head is not None:
                head.load_state_dict(state["head"])
        except (RuntimeError, KeyError, TypeError) as exc:
            raise CapeFileError(f"{w_file}: weights do not match {cfg_file} ({exc})") from exc
        backbone.to(device).eval()
        if head is not None:
            head.to(device).eval()
        return cls(
            backbone=backbone, backbone_name=cfg["backbone"], var_names=cfg["var_names"], task=cfg["task"], head=head,
            pooling=cfg["pooling"], classes=cfg["classes"], target_mean=cfg["target_mean"],
            target_sd=cfg["target_sd"], meta=cfg.get("meta", {}), preprocess=cfg.get("preprocess"),
        )

    # ------------------------------------------------------------------------------- use
    def align(self, data: Any, *, var_names: Any = None, missing: str | None = None) -> np.ndarray:
        """The model's feature matrix ``(n_obs, M)`` float32 of ``data``, aligned by feature name.

        Parameters
        ----------
        data
            An AnnData (``X`` and ``var_names``; preprocessed the way the training data was,
            e.g. log-normalized) or an ``(n_obs, n_vars)`` array with ``var_names``.
        var_names
            Feature names of an array ``data``.
        missing
            The model's features that ``data`` lacks: ``zero`` (not expressed; logged),
            ``nan`` (missing values) or ``error``; ``None`` = ``nan`` for a ``methylgpt`` model
            (an unmeasured CpG is missing, not β = 0), else ``zero``.

        Raises
        ------
        CapeDataError
            No feature in common, missing features with ``missing="error"``, duplicate names,
            or names not given for an array.
        CapeConfigError
            Unknown ``missing``.
        """
        import scipy.sparse as sp

        if hasattr(data, "var_names") and hasattr(data, "X"):
            data = self.prepare(data)
        if missing is None:
            missing = "nan" if self.backbone_name == "methylgpt" else "zero"
        if missing not in ("zero", "nan", "error"):
            raise CapeConfigError(f"missing: expected 'zero', 'nan' or 'error', got {missing!r}")
        if hasattr(data, "var_names") and hasattr(data, "X"):
            names, x = pd.Index(map(str, data.var_names)), data.X
        else:
            if var_names is None:
                raise CapeDataError("align: an array needs var_names= (one name per column)")
            names, x = pd.Index(map(str, var_names)), data
        if names.has_duplicates:
            raise CapeDataError(f"align: duplicate feature names in the data, e.g. {names[names.duplicated()][:3].tolist()}")
        x = x.toarray() if sp.issparse(x) else np.asarray(x)
        if x.ndim != 2 or x.shape[1] != len(names):
            raise CapeDataError(f"align: data has shape {x.shape} but {len(names)} feature names")
        if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
            raise CapeDataError(f"align: data must be numeric (real), got dtype {x.dtype}")
        if np.isinf(x).any():
            raise CapeDataError("align: data contains inf")
        if self.backbone_name != "methylgpt" and np.isnan(x).any():
            raise CapeDataError("align: data contains NaN (only methylation models accept missing values)")
        pos = names.get_indexer(self.var_names)
        n_missing = int((pos < 0).sum())
        if n_missing == len(self.var_names):
            raise CapeDataError(
                f"align: none of the model's {len(self.var_names)} features is in the data "
                f"(model: {self.var_names[:3]}..., data: {names[:3].tolist()}...)"
            )
        if n_missing and missing == "error":
            lacking = [v for v, p in zip(self.var_names, pos, strict=True) if p < 0]
            raise CapeDataError(f"align: the data lacks {n_missing} of the model's features, e.g. {lacking[:5]}")
        fill = np.nan if missing == "nan" else 0.0
        out = np.full((x.shape[0], len(self.var_names)), fill, dtype=np.float32)
        out[:, pos >= 0] = x[:, pos[pos >= 0]]
        if n_missing:
            log.info("align: %d of %d model features absent from the data, filled with %s", n_missing, len(pos), fill)
        return out

    def prepare(self, adata: Any) -> Any:
        """``adata`` transformed the way the training data was, when it was not preprocessed by
        cape_pipeline (no ``uns["cape_preprocess"]``); else ``adata`` as it is.

        For a model trained on scRNA data preprocessed by :func:`cape_pipeline.pp.preprocess`:
        the same call with the training config, but keeping every cell and gene (no QC filter,
        no HVG selection): ``.raw`` when ``X`` holds scaled values, ``normalize_total`` +
        ``log1p`` for counts, ``log1p`` for normalized values; the alignment by name then
        picks the model's genes. Other modalities and models without a record pass through.

        Raises
        ------
        CapeDataError
            ``X`` holds scaled (z-scored) values and there is no ``.raw`` to undo it; or the
            data was preprocessed for another modality or with another normalization than the
            model's (one line saying what to do).
        """
        rec = self.preprocess
        if not rec or rec.get("modality") != "scrna":
            return adata
        mine = rec.get("config", {})
        theirs = adata.uns.get("cape_preprocess") if hasattr(adata, "uns") else None
        if theirs:
            other = theirs.get("config", {})
            diff = [k for k in ("target_sum", "transform") if k in mine and other.get(k) != mine.get(k)]
            if theirs.get("modality") != "scrna" or diff:
                raise CapeDataError(
                    f"predict: the data was preprocessed with {({k: other.get(k) for k in diff}) or theirs.get('modality')}, "
                    f"the model's training data with {({k: mine.get(k) for k in diff}) or 'scrna'}; preprocess the raw "
                    f"data with cape_pipeline.pp.preprocess(adata, target_sum={mine.get('target_sum')}) or pass raw counts"
                )
            return adata
        from cape_pipeline.pp import PreprocessConfig, detect_input_state
        from cape_pipeline.pp import preprocess as run_pp

        if detect_input_state(adata.X) == "scaled" and (adata.raw is None or detect_input_state(adata.raw.X) == "scaled"):
            raise CapeDataError(
                "predict: the data's X holds scaled values (negatives, e.g. after sc.pp.scale) and there is no .raw "
                "with counts or log-normalized values; the model was trained on log-normalized expression: pass the "
                "counts (or log1p(normalize_total)) instead"
            )
        keep = {k: v for k, v in mine.items() if k in ("target_sum", "use_raw")}
        cfg = PreprocessConfig(modality="scrna", min_genes=0, min_cells=0, n_top_genes=max(int(adata.n_vars), 1), **keep)
        out = run_pp(adata, cfg, copy=True)
        log.info("predict: applied the model's preprocessing to the input: %s", "; ".join(out.uns["cape_preprocess"]["steps"]))
        return out

    @torch.no_grad()
    def embed(self, data: Any, *, var_names: Any = None, missing: str | None = None, batch_size: int = 128) -> np.ndarray:
        """Observation embeddings ``(n_obs, D)`` float32 of new data aligned by feature name.

        Raises
        ------
        CapeDataError
            See :meth:`align`.
        """
        from cape_pipeline.models.loops import as_tensor, cell_embeddings

        x = self.align(data, var_names=var_names, missing=missing)
        dev = next(self.backbone.parameters()).device
        return cell_embeddings(self.backbone, as_tensor(x, dev), pooling=self.pooling, batch_size=batch_size)  # type: ignore[arg-type]

    @torch.no_grad()
    def predict(self, data: Any, *, var_names: Any = None, missing: str | None = None, batch_size: int = 128) -> np.ndarray:
        """Predictions for new data: class names (annotation) or values in data units (age).

        Returns
        -------
        ndarray
            ``(n_obs,)``: ``str`` class names, or float64 predictions.

        Raises
        ------
        CapeConfigError
            The model has no classifier or regressor head.
        CapeDataError
            See :meth:`align`.
        """
        from cape_pipeline.models.backbones.heads import ClassifierHead, RegressionHead

        if not isinstance(self.head, ClassifierHead | RegressionHead):
            raise CapeConfigError(f"predict: a model of task {self.task!r} has no classifier or regressor head")
        emb = torch.as_tensor(self.embed(data, var_names=var_names, missing=missing, batch_size=batch_size))
        self.head.eval()
        out = self.head(emb.to(next(self.head.parameters()).device)).cpu()
        if isinstance(self.head, ClassifierHead):
            assert self.classes is not None
            return np.asarray(self.classes, dtype=object)[out.argmax(1).numpy()]
        return out.double().numpy() * float(self.target_sd or 1.0) + float(self.target_mean or 0.0)

    def angle_ablation(
        self, data: Any, *, var_names: Any = None, missing: str | None = None, batch_size: int = 128
    ) -> dict[str, float]:
        """How much this model uses its CAPE angles: see :func:`cape_pipeline.tasks.ablation.angle_ablation`."""
        from cape_pipeline.tasks.ablation import angle_ablation

        return angle_ablation(self, data, var_names=var_names, missing=missing, batch_size=batch_size)

    @torch.no_grad()
    def predict_proba(
        self, data: Any, *, var_names: Any = None, missing: str | None = None, batch_size: int = 128
    ) -> pd.DataFrame:
        """Class probabilities (softmax of the classifier) for new data, as scikit-learn's
        ``predict_proba``.

        Returns
        -------
        DataFrame
            ``(n_obs, n_classes)`` float64, columns the class names (rows: ``obs_names`` of an
            AnnData, else 0…n−1); each row sums to 1.

        Raises
        ------
        CapeConfigError
            The model has no classifier head.
        CapeDataError
            See :meth:`align`.
        """
        from cape_pipeline.models.backbones.heads import ClassifierHead

        if not isinstance(self.head, ClassifierHead):
            raise CapeConfigError(f"predict_proba: a model of task {self.task!r} has no classifier head")
        emb = torch.as_tensor(self.embed(data, var_names=var_names, missing=missing, batch_size=batch_size))
        self.head.eval()
        p = torch.softmax(self.head(emb.to(next(self.head.parameters()).device)).double(), dim=1).cpu().numpy()
        index = list(map(str, data.obs_names)) if hasattr(data, "obs_names") else None
        return pd.DataFrame(p, columns=list(self.classes or []), index=index)


def load(path: str | Path, *, device: str | torch.device = "cpu") -> TrainedModel:
    """Load a model saved by :meth:`TrainedModel.save` (see there for errors).

    Examples
    --------
    >>> from cape_pipeline.tasks import load   # doctest: +SKIP
    >>> model = load("out/pbmc/models/annotation_cape_seed0")   # doctest: +SKIP
    >>> model.predict(adata)                      # doctest: +SKIP
    """
    return TrainedModel.load(path, device=device)
