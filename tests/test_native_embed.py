"""The bundled static model loads without model2vec, and its vectors are model2vec's.

``NativeStaticModel`` reads a model2vec folder with safetensors and tokenizers alone. Where model2vec is
importable (the ``hub`` extra, which the ``test`` extra pulls in) its ``encode`` is compared with the
native one on several hundred varied texts; a few vectors computed with model2vec are pinned below, so
parity stays guarded where model2vec is not installed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from worlddb_lite import MissingExtra, StaticEmbedder
from worlddb_lite.models.embed import BUNDLED_MODEL, NativeStaticModel, bundled_model_path, token_table

ROOT = Path(__file__).resolve().parent.parent
TOLERANCE = 1e-6

# StaticEmbedder().embed(text)[:4], computed with model2vec 0.10.0 on 2026-11-25.
PINNED = {
    "I moved to Porto in May": [-0.03335370868444443, 0.11840108782052994, 0.3913339078426361, 0.01126031018793583],
    "where did I move?": [-0.23120321333408356, -0.09857264906167984, 0.17138822376728058, -0.06286676228046417],
    "The spare key is under the blue flowerpot": [
        0.078669972717762,
        -0.21385538578033447,
        0.09710157662630081,
        -0.18089821934700012,
    ],
    "My sister Emma loves pottery 🙂 1999-05-01": [
        -0.06793326884508133,
        0.011444284580647945,
        0.15210217237472534,
        -0.28174301981925964,
    ],
}


def varied_texts() -> list[str]:
    """Several hundred texts: empty-ish, long (> 512 tokens), unicode, numbers, the README's and the fixtures'."""
    readme = ROOT / "README.md"
    quoted = re.findall(r'"([^"\n]{3,200})"', readme.read_text("utf-8"))
    fixtures = ROOT / "tests" / "fixtures" / "extract_labels.jsonl"
    labelled = [json.loads(line)["text"] for line in fixtures.read_text("utf-8").splitlines() if line.strip()]
    words = "memory Porto Lisbon pottery flowerpot quantum the a of 2024 unbelievably xylophonist".split()
    rng = np.random.default_rng(25)
    generated = [" ".join(rng.choice(words, size=int(size))) for size in rng.integers(1, 40, size=60)]
    edge = [
        "",
        " ",
        "\n\t",
        ".",
        "?!",
        "a",
        "[UNK]",
        "[CLS] [SEP] [PAD] [MASK]",
        "🙂",
        "🙂🙃🤖",
        "日本語のテキストです",
        "Ünïcödé façade naïve café",
        "Привет, как дела?",
        "مرحبا بالعالم",
        "12345",
        "3.14159 2,718 -42 1e-9 0x1F",
        "2024-05-01T10:00:00Z",
        "tel: +351 912 345 678",
        "x" * 5000,
        "word " * 900,
        "The spare key is under the blue flowerpot. " * 80,
        "".join(chr(c) for c in range(0x20, 0x250)),
        "e\u0301 \u00e9 \ufb01 \u2163",
        "\u200b\u200d\ufeff",
    ]
    return edge + quoted + labelled + generated


def test_the_corpus_is_several_hundred_varied_texts() -> None:
    texts = varied_texts()
    assert len(texts) >= 300
    model = NativeStaticModel(bundled_model_path())
    assert max(len(ids) for ids in model.tokenize(texts)) == 512  # some are truncated to max_length


def test_native_vectors_equal_model2vecs() -> None:
    model2vec = pytest.importorskip("model2vec", reason="model2vec (the hub extra) is not installed")
    folder = bundled_model_path()
    theirs = model2vec.StaticModel.from_pretrained(str(folder))
    ours = NativeStaticModel(folder)
    texts = varied_texts()
    for batch in (texts, texts * 4):  # the second is more than one 1,024-text batch
        mine, reference = ours.encode(batch), theirs.encode(batch)
        assert mine.dtype == reference.dtype and mine.shape == reference.shape
        assert float(np.abs(mine.astype(np.float64) - reference.astype(np.float64)).max()) <= TOLERANCE
    assert ours.dim == theirs.dim and ours.median_token_length == theirs.median_token_length
    assert ours.tokenize(texts) == theirs.tokenize(texts)


def test_the_pinned_vectors_hold() -> None:
    vectors = StaticEmbedder().embed(list(PINNED))
    for row, expected in zip(vectors, PINNED.values(), strict=True):
        assert np.abs(row[:4] - np.asarray(expected)).max() <= TOLERANCE
        assert abs(float(np.linalg.norm(row)) - 1.0) < 1e-5


def test_the_bundled_model_keeps_its_id_and_loads_natively() -> None:
    embedder = StaticEmbedder()
    assert embedder.model_id == BUNDLED_MODEL  # stores record it: a change would re-embed them
    embedder.embed(["hello"])
    assert isinstance(embedder._model, NativeStaticModel)
    get_table = token_table(embedder)
    assert get_table is not None
    table = get_table()
    assert (table.size, table.dim) == (29525, 256) and table.word_ids("memory") == [2641]


def test_a_hub_name_without_model2vec_names_the_hub_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "model2vec", None)
    with pytest.raises(MissingExtra, match=re.escape("pip install 'worlddb_lite[hub]'")):
        StaticEmbedder("minishlab/potion-base-8M")


def test_an_empty_batch_is_an_empty_matrix() -> None:
    assert NativeStaticModel(bundled_model_path()).encode([]).shape == (0, 256)
