"""workflows/Snakefile: dry runs only (`snakemake -n`), nothing is computed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cape_pipeline.io.catalog import load_catalog
from cape_pipeline.pipeline import STAGE_ORDER

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / "workflows"
SNAKEFILE = WORKFLOWS / "Snakefile"
SNAKEMAKE = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or shutil.which("snakemake")

pytestmark = pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed (pip install -e '.[dev]')")


def _dry_run(tmp_path: Path, *args: str) -> str:
    """`snakemake -n -p` in tmp_path (its .snakemake/ lands there); returns stdout + stderr."""
    proc = subprocess.run(
        [SNAKEMAKE, "-s", str(SNAKEFILE), "--directory", str(tmp_path), "-n", "-p", "--nocolor", *args],
        capture_output=True, text=True, timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return out


def _job_counts(out: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run: rule -> number of planned jobs."""
    table = out.split("Job stats:", 1)[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


def _commands(out: str) -> list[str]:
    return re.findall(r"^.*\bcape run .*$", out, re.M)


def _command(out: str, dataset: str, stage: str) -> str:
    found = [c for c in _commands(out) if f"cape run {dataset} --until {stage} " in c]
    assert len(found) == 1, (dataset, stage, found)
    return found[0]


def _bundled() -> list[str]:
    return [e.name for e in load_catalog().values() if e.bundled]


def test_default_config_plans_every_stage_of_every_bundled_dataset(tmp_path):
    datasets = _bundled()
    assert len(datasets) >= 2
    out = _dry_run(tmp_path, "--profile", str(WORKFLOWS / "profiles" / "local"))
    counts = _job_counts(out)
    assert counts.pop("all") == 1
    assert counts.pop("total") == len(STAGE_ORDER) * len(datasets) + 1
    assert counts == {stage: len(datasets) for stage in STAGE_ORDER}
    for name in datasets:
        for stage in STAGE_ORDER:
            cmd = _command(out, name, stage)
            # one shared cache and one out dir per dataset, the same --device/--threads everywhere
            assert f"--workdir cape_work/{name} --out out/{name}" in cmd
            assert "--device auto --threads 1" in cmd
            assert cmd.endswith(f"> out/{name}/logs/{stage}.log 2>&1")
    # each job's output is the stage's export marker in the dataset's out dir
    for marker in ["ingest_manifest.json", "preprocess_manifest.json", "discover_manifest.json",
                   "embed_manifest.json", "encode_manifest.json", "results.json", "report.json"]:
        assert f"output: out/krumsiek11/{marker}" in out
    # a dataset with a workflows/<name>.yaml gets it; one without gets no --config
    assert (WORKFLOWS / "sachs.yaml").is_file() and not (WORKFLOWS / "krumsiek11.yaml").exists()
    assert f"--config {WORKFLOWS / 'sachs.yaml'}" in _command(out, "sachs", "discover")
    assert "--config" not in _command(out, "krumsiek11", "discover")


def test_per_dataset_override_reaches_the_command(tmp_path):
    cfg = tmp_path / "override.yaml"
    cfg.write_text(yaml.safe_dump({
        "datasets": ["krumsiek11", "sachs"],
        "set": ["train.n_seeds=1"],
        "per_dataset": {"krumsiek11": {"set": ["discover.threshold=0.3", "preprocess.n_top_genes=8"]}},
        "device": "cpu",
    }))
    out = _dry_run(tmp_path, "--configfile", str(cfg))
    counts = _job_counts(out)
    assert counts["total"] == 2 * len(STAGE_ORDER) + 1 and counts["train"] == 2
    for stage in STAGE_ORDER:
        k = _command(out, "krumsiek11", stage)
        s = _command(out, "sachs", stage)
        # global --set first, then the dataset's own (they win)
        assert ("--set train.n_seeds=1 --set discover.threshold=0.3 --set preprocess.n_top_genes=8"
                " --device cpu") in k
        assert "discover.threshold" not in s and "--set train.n_seeds=1 --device cpu" in s
        assert "sachs.yaml" in s


def test_unknown_per_dataset_entry_is_refused(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump({"datasets": ["sachs"], "per_dataset": {"sach": {"set": ["x.y=1"]}}}))
    proc = subprocess.run(
        [SNAKEMAKE, "-s", str(SNAKEFILE), "--directory", str(tmp_path), "-n", "--configfile", str(cfg)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0 and "'sach' is not among the datasets" in proc.stdout + proc.stderr
