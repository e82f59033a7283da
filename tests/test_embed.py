"""embed.py: the Embedder protocol and the bundled static model (its size is read without loading it)."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from worlddb_lite import Embedder, EmbedderError, InvalidInput, StaticEmbedder, WorldDB
from worlddb_lite.models.embed import BUNDLED_MODEL, bundled_model_path
from worlddb_lite.store import vector_codes

from .conftest import FakeEmbedder, table_digest


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
    assert model.model_id.startswith("model2vec:tiny-model@") and model.dim == 48


def test_the_bundled_model_embeds_unit_vectors() -> None:
    # loads the real model once (~0.5 s): the default every CLI command uses
    vectors = StaticEmbedder().embed(["I moved to Porto in May", "I moved to Porto in May", "quantum chromodynamics"])
    assert vectors.shape == (3, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[0], vectors[1])
    assert float(vectors[0] @ vectors[2]) < 0.9


def test_the_bundled_model_loads_offline_and_ranks_a_paraphrase_above_an_unrelated_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    a, b, c = StaticEmbedder().embed(
        [
            "My sister adopted a puppy last week",
            "Last week my sister got a new dog",
            "The quarterly tax report is due on Friday",
        ]
    )
    assert float(a @ b) > float(a @ c) + 0.2


def test_text_outside_the_vocabulary_still_gets_a_stable_non_zero_vector() -> None:
    model = StaticEmbedder()
    smile, smile_again, frown, control = model.embed(["🙂", "🙂", "☹", "\u200b\u200b"])
    assert np.allclose(np.linalg.norm([smile, frown, control], axis=1), 1.0, atol=1e-5)
    assert np.allclose(smile, smile_again)
    assert float(smile @ model.embed(["slightly smiling face"])[0]) > 0.99  # named by its Unicode name


def test_a_hub_name_that_cannot_be_fetched_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InvalidInput, match="hub.*give its folder"):
        StaticEmbedder("minishlab/no-such-model-here")


def test_a_path_that_is_neither_a_folder_nor_a_hub_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no model2vec model"):
        StaticEmbedder(str(tmp_path / "missing" / "deeper" / "model"))


class _Faulty:
    """An embedder that returns whatever a test tells it to."""

    model_id = "faulty"
    dim = 32

    def __init__(self, make: Callable[[int], object]) -> None:
        self.make = make

    def embed(self, texts: Sequence[str]) -> object:
        return self.make(len(texts))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda n: np.ones((n, 16), dtype=np.float32), "shape"),
        (lambda n: np.ones((n + 1, 32), dtype=np.float32), "shape"),
        (lambda n: np.full((n, 32), np.nan, dtype=np.float32), "NaN"),
        (lambda n: np.zeros((n, 32), dtype=np.float32), "zero vector"),
        (lambda n: [["x"] * 32] * n, "not a matrix of numbers"),
    ],
)
def test_a_faulty_embedder_fails_the_write_and_leaves_the_store_unchanged(
    tmp_path: Path, make: Callable[[int], object], message: str
) -> None:
    path = tmp_path / "faulty.db"
    WorldDB(path, embedder=FakeEmbedder()).close()
    faulty = _Faulty(make)
    faulty.model_id = FakeEmbedder.model_id  # same id as the store: only the output is wrong
    db = WorldDB(path, embedder=faulty)  # type: ignore[arg-type]
    try:
        before = table_digest(db)
        with pytest.raises(EmbedderError, match=message):
            db.write_many([{"text": "one memory"}, {"text": "another"}])
        assert table_digest(db) == before
    finally:
        db.close()


def test_a_caller_vector_is_stored_unit_length_and_a_zero_vector_is_refused(tmp_path: Path) -> None:
    db = WorldDB(tmp_path / "ext.db", embedder=None, dim=4)
    try:
        node = db.write("given", scope="s", vector=[3, 0, 4, 0])
        stored = db.sql(
            "select embedding, scale from node_vec where rowid = (select nid from node where id = ?)",
            (bytes.fromhex(node),),
        )[0]
        assert np.allclose(vector_codes.row(*stored), [0.6, 0, 0.8, 0], atol=4e-3)  # int8: half a step at most
        with pytest.raises(InvalidInput, match="zero vector"):
            db.write("nothing", scope="s", vector=[0, 0, 0, 0])
    finally:
        db.close()


def test_stores_share_one_loaded_model_and_a_changed_folder_loads_its_own(tmp_path: Path) -> None:
    first, second = StaticEmbedder(), StaticEmbedder()
    first.embed(["camping"])
    second.embed(["camping"])
    assert first._model is second._model and first.token_vectors() is second.token_vectors()
    copy = tmp_path / "copy"
    shutil.copytree(bundled_model_path(), copy)
    weights = bytearray((copy / "model.safetensors").read_bytes())
    weights[-1] ^= 1  # one bit of the last weight: another model at another path
    (copy / "model.safetensors").write_bytes(bytes(weights))
    other = StaticEmbedder(copy)
    other.embed(["camping"])
    assert other.model_id != first.model_id and other._model is not first._model
    assert other.token_vectors() is not first.token_vectors()
