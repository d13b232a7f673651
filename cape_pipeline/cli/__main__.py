"""``python -m cape_pipeline.cli …``: the ``cape`` command (e.g. under ``torchrun``, or where the
console script is not on PATH)."""

from cape_pipeline.cli import entrypoint

if __name__ == "__main__":  # pragma: no cover
    entrypoint()
