"""embed.py: the Embedder protocol and the bundled static model (its size is read without loading it)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from worlddb_lite import Embedder, InvalidInput, StaticEmbedder
from worlddb_lite.embed import BUNDLED_MODEL, bundled_model_path

from .conftest import FakeEmbedder


def test_the_fake_embedder_fits_the_protocol() -> None:
    fake = FakeEmbedder()
    assert isinstance(fake, Embedder)
    vectors = fake.embed(["Hello world", "hello   WORLD", "", "something else"])
    assert vectors.shape == (4, 32) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.allclose(vectors[0], vectors[1])  # lower-cased words: deterministic features
    assert not np.allclose(vectors[0], vectors[3])


def test_bundled_model_is_described_without_loading_it() -> None:
    model = StaticEmbedder()
    assert model.model_id == BUNDLED_MODEL
    assert model.dim == 256
    assert model._model is None  # nothing loaded until the first embed
    assert (bundled_model_path() / "model.safetensors").is_file()


def test_a_folder_without_a_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="model2vec"):
        StaticEmbedder(tmp_path)


def test_a_broken_safetensors_header_is_refused(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 5) + b"nope!")
    with pytest.raises(InvalidInput, match="safetensors"):
        StaticEmbedder(tmp_path)


def test_another_model_folder_is_named_by_its_folder(tmp_path: Path) -> None:
    header = json.dumps({"embeddings": {"dtype": "F32", "shape": [10, 48], "data_offsets": [0, 1920]}}).encode()
    folder = tmp_path / "tiny-model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(1920))
    model = StaticEmbedder(folder)
    assert model.model_id == "model2vec:tiny-model" and model.dim == 48


def test_the_bundled_model_embeds_unit_vectors() -> None:
    # loads the real model once (~0.5 s): the default every CLI command uses
    vectors = StaticEmbedder().embed(["I moved to Porto in May", "I moved to Porto in May", "quantum chromodynamics"])
    assert vectors.shape == (3, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[0], vectors[1])
    assert float(vectors[0] @ vectors[2]) < 0.9
