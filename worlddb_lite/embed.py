"""Embedders: a protocol, and the static model2vec model that ships in the package.

The bundled model is all-MiniLM-L6-v2 distilled to a 256-d static model (see
``models/minilm-l6-static-256/README.md`` for provenance, licence and rebuild).
It needs no torch and no network. Any other model2vec model can be named by path.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import InvalidInput

BUNDLED_MODEL = "minilm-l6-static-256"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of a fixed dimension."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an (n, dim) float32 array, one L2-normalised row per text."""
        ...


def bundled_model_path() -> Path:
    """Where the bundled static model lives inside the installed package."""
    return Path(str(resources.files("worlddb_lite").joinpath("models", BUNDLED_MODEL)))


class StaticEmbedder:
    """A model2vec static model in a folder (the bundled one by default).

    The weights load on the first ``embed`` call, so commands that only read pay nothing;
    the dimension comes from the safetensors header.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.folder = Path(path) if path is not None else bundled_model_path()
        weights = self.folder / "model.safetensors"
        if not weights.is_file():
            raise InvalidInput(
                f"no model2vec model at {self.folder}; give the folder of a model2vec model "
                "(config.json, model.safetensors, tokenizer.json)"
            )
        self.model_id = BUNDLED_MODEL if path is None else f"model2vec:{self.folder.name}"
        self.dim = _embedding_dim(weights)
        self._model: Any = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts into unit-length float32 rows."""
        if self._model is None:
            from model2vec import StaticModel  # deferred: importing and loading take ~0.5 s

            self._model = StaticModel.from_pretrained(str(self.folder))
        vectors = np.asarray(self._model.encode(list(texts)), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1.0, norms)


def _embedding_dim(weights: Path) -> int:
    """Read the embedding width from a safetensors header without loading the tensor."""
    try:
        with weights.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        tensor = header.get("embeddings") or next(v for k, v in header.items() if k != "__metadata__")
        return int(tensor["shape"][1])
    except (OSError, ValueError, KeyError, IndexError, StopIteration, struct.error):
        raise InvalidInput(f"{weights} is not a model2vec safetensors file") from None
