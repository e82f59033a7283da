"""Embedders: a protocol, the bundled static model, and the checks on every embedder's output.

The bundled model is all-MiniLM-L6-v2 distilled to a 256-d static model (see
``models/minilm-l6-static-256/README.md`` for provenance, licence and rebuild).
It needs no torch and no network, and no model2vec either: a model2vec folder is read with safetensors
and tokenizers (``NativeStaticModel``, model2vec's ``encode`` reproduced exactly). Any other model2vec
model can be named by folder, or by hub name (``org/name``) where a hub is reachable and the ``hub``
extra (model2vec itself) is installed.
"""

from __future__ import annotations

import functools
import json
import re
import struct
import unicodedata
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import blake3
import numpy as np

from ..errors import EmbedderError, InvalidInput, MissingExtra, install_hint

BUNDLED_MODEL = "minilm-l6-static-256"
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
HUB_EXTRA = install_hint("hub")


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


def embedding_text(name: str | None, content: str | None) -> str:
    """The text a node is embedded by: its name and content ("" when it has neither)."""
    return " ".join(t for t in (name, content) if t)


def embed_checked(embedder: Embedder, texts: Sequence[str], dim: int) -> np.ndarray:
    """Embed and check the result, so a faulty embedder fails before anything is written.

    Returns (n, dim) float32 unit rows; raises ``EmbedderError`` naming what was wrong.
    """
    name = getattr(embedder, "model_id", type(embedder).__name__)
    try:
        raw = embedder.embed(list(texts))
        vectors = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbedderError(f"embedder {name!r} returned something that is not a matrix of numbers ({exc})") from None
    if vectors.ndim != 2 or vectors.shape != (len(texts), dim):
        raise EmbedderError(
            f"embedder {name!r} returned shape {vectors.shape} for {len(texts)} texts; "
            f"this store holds {dim}-dimensional vectors, one row per text"
        )
    norms = np.linalg.norm(vectors, axis=1)
    if not np.all(np.isfinite(norms)):
        row = int(np.flatnonzero(~np.isfinite(norms))[0])
        raise EmbedderError(f"embedder {name!r} returned NaN or infinite values for {_clip(texts[row])!r}")
    if np.any(norms == 0):
        row = int(np.flatnonzero(norms == 0)[0])
        raise EmbedderError(f"embedder {name!r} returned a zero vector for {_clip(texts[row])!r}")
    unit: np.ndarray = vectors / norms[:, None]
    return unit


def _clip(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def is_folder(path: str | Path) -> bool:
    """``Path.is_dir``, False (not OSError) for a name the file system cannot look up: too long, a NUL ..."""
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False


def _exists(path: str | Path) -> bool:
    try:
        return Path(path).exists()
    except (OSError, ValueError):
        return False


class StaticEmbedder:
    """A model2vec static model: the bundled one, a folder, or a hub name.

    Folder models load on the first ``embed`` call, so commands that only read pay
    nothing, and once per process: every store embedding with the same model shares it.
    Their dimension comes from the safetensors header and their id carries a digest of the
    weights, so a changed model at the same path is noticed on open (and loaded anew).
    """

    def __init__(self, model: str | Path | None = None) -> None:
        self._model: Any = None
        self._tokens: TokenVectors | None = None
        if model is None:
            self.folder: Path | None = bundled_model_path()
            self.model_id = BUNDLED_MODEL
        elif is_folder(model):
            self.folder = Path(model)
        elif isinstance(model, str) and _HUB_NAME.match(model) and not _exists(model):
            self.folder = None
            self._model = _from_hub(model)
            self.model_id = f"model2vec:{model}"
            self.dim = int(self._model.dim)
            return
        else:
            raise InvalidInput(
                f"no model2vec model at {model}; give the folder of a model2vec model "
                "(config.json, model.safetensors, tokenizer.json) or a hub name like org/name"
            )
        weights = self.folder / "model.safetensors"
        if not weights.is_file():
            raise InvalidInput(
                f"no model2vec model at {self.folder}; give the folder of a model2vec model "
                "(config.json, model.safetensors, tokenizer.json)"
            )
        self.dim = _embedding_dim(weights)
        if model is not None:
            self.model_id = f"model2vec:{self.folder.resolve().name}@{_digest(weights)}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts into unit-length float32 rows (never a zero row: see ``_fallback``)."""
        if self._model is None:
            self._model = _shared_model(str(self.folder), self.model_id)
        texts = list(texts)
        vectors = np.asarray(self._model.encode(texts), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1)
        for row in np.flatnonzero(norms == 0):
            vectors[row] = self._fallback(texts[row])
            norms[row] = np.linalg.norm(vectors[row])
        unit: np.ndarray = vectors / norms[:, None]
        return unit

    def token_vectors(self) -> TokenVectors:
        """The model's own token table, for scoring a query against a text token by token."""
        if self._tokens is None:
            if self.folder is None:  # a hub model, loaded by this instance
                self._tokens = TokenVectors(self._model)
            else:
                self._model = _shared_model(str(self.folder), self.model_id)
                self._tokens = _shared_token_table(str(self.folder), self.model_id)
        return self._tokens

    def _fallback(self, text: str) -> np.ndarray:
        """A vector for text the vocabulary cannot see (emoji, rare scripts).

        First the Unicode names of its characters ("🙂" -> "slightly smiling face"), which
        keeps meaning; failing that a fixed pseudo-random direction derived from the text,
        so equal texts still meet and the store never holds a zero vector.
        """
        names = " ".join(unicodedata.name(ch, "").lower() for ch in text if not ch.isspace())
        if names.strip():
            vector = np.asarray(self._model.encode([names]), dtype=np.float32)[0]
            if np.linalg.norm(vector) > 0:
                return np.asarray(vector, dtype=np.float32)
        seed = int.from_bytes(blake3.blake3(text.encode("utf-8")).digest()[:8], "little")
        fallback: np.ndarray = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return fallback


def token_table(embedder: object) -> Callable[[], TokenVectors] | None:
    """How to get an embedder's token table (the model loads on the first call); None: it has none.

    Only a static model has one: its text vector is a weighted mean of its token vectors.
    """
    return embedder.token_vectors if isinstance(embedder, StaticEmbedder) else None


class TokenVectors:
    """A static model's token table: one unit vector and one weight per vocabulary token.

    A static model embeds a text as the weighted mean of its tokens' vectors; this keeps the
    tokens apart so that a reader can match each query token to its closest token in a text
    (late interaction, ``retrieval/late.py``). The weight is the model's own: the length of
    the token's row (model2vec distils frequent tokens to short rows), times its per-token
    weight where the model has one.
    """

    LENGTH_CHUNK = 4096  # token rows made float32 at a time to find their lengths (bounds the copy)

    def __init__(self, model: Any) -> None:
        # The unit rows are not kept: a float32 copy of the whole table was 29 MiB of a process's peak
        # at 100k memories (bench/footprint.py), while a recall reads a few thousand rows of it. The
        # model's own rows (float16 for the bundled model) are shared with the embedder and each unit
        # row is made on demand by the same float32 division, so scores are bit for bit the same.
        self._rows: np.ndarray = np.asarray(model.embedding)
        mapping = getattr(model, "token_mapping", None)  # quantized vocabularies share rows
        self._mapping = None if mapping is None else np.asarray(mapping, dtype=np.int64)
        self.size = int(self._rows.shape[0] if self._mapping is None else self._mapping.shape[0])
        self.dim = int(self._rows.shape[1])
        length = np.empty(self.size, dtype=np.float32)
        for lo in range(0, self.size, self.LENGTH_CHUNK):
            rows = self._float_rows(np.arange(lo, min(lo + self.LENGTH_CHUNK, self.size)))
            length[lo : lo + rows.shape[0]] = np.sqrt(np.einsum("ij,ij->i", rows, rows))  # norm: ~6x slower
        extra = getattr(model, "weights", None)
        self.weight: np.ndarray = length * (np.asarray(extra, dtype=np.float32) if extra is not None else 1.0)
        self._divisor = np.where(length > 0, length, 1.0).astype(np.float32)
        # the native model's own copy when it has one: get_vocab builds a new dict of 30k tokens (~15 ms)
        self.vocabulary: dict[str, int] = getattr(model, "vocabulary_ids", None) or model.tokenizer.get_vocab()
        self._tokenizer = model.tokenizer
        self._direct = self._model_alone_agrees()

    def unit(self, ids: np.ndarray) -> np.ndarray:
        """The unit vectors (float32) of tokens ``ids``, one row each (a token without a vector: zeros)."""
        rows = self._float_rows(ids)
        rows /= self._divisor[ids][:, None]
        return rows

    def _float_rows(self, ids: np.ndarray) -> np.ndarray:
        """Tokens' rows of the model's table as a new float32 array."""
        at = ids if self._mapping is None else self._mapping[ids]
        return np.asarray(self._rows[at], dtype=np.float32)

    def word_ids(self, word: str) -> list[int]:
        """The token ids of one word (a word the vocabulary lacks is split into pieces)."""
        if self._direct and word.isascii() and word.isalnum() and word.islower():
            ids = [token.id for token in self._tokenizer.model.tokenize(word)]
        else:
            ids = self._tokenizer.encode(word, add_special_tokens=False).ids
        return [i for i in ids if i < self.size]

    def _model_alone_agrees(self) -> bool:
        """Whether the tokenizer's model alone splits a plain lower-case word as the whole pipeline does.

        For a WordPiece vocabulary (the bundled model's) it does, at a seventh of the cost; a
        byte-level or sentencepiece vocabulary marks words in its pre-tokenizer, so it does not.
        """
        probes = ("memory", "campground", "unbelievably", "xylophonist", "2024")
        try:
            return all(
                [t.id for t in self._tokenizer.model.tokenize(word)]
                == self._tokenizer.encode(word, add_special_tokens=False).ids
                for word in probes
            )
        except Exception:  # a tokenizer without a model.tokenize of this shape: use the whole pipeline
            return False


# A folder's model and token table, loaded once per process and shared (read-only) by every store
# that embeds with it: each store loading its own cost ~150 ms at its first write (the bundled
# model, its token table and content tokens). The id carries the weights' digest, so a model
# changed at the same path is loaded again.
@functools.lru_cache(maxsize=4)
def _shared_model(folder: str, model_id: str) -> Any:
    return _load_folder(Path(folder))


@functools.lru_cache(maxsize=4)
def _shared_token_table(folder: str, model_id: str) -> TokenVectors:
    return TokenVectors(_shared_model(folder, model_id))


def _load_folder(folder: Path) -> Any:
    try:
        return NativeStaticModel(folder)
    except Exception as exc:  # safetensors and tokenizers raise a variety of errors for a damaged folder
        raise InvalidInput(f"cannot load the model2vec model at {folder}: {exc}") from None


def _from_hub(name: str) -> Any:
    try:
        from model2vec import StaticModel  # the hub extra: downloading needs model2vec and huggingface_hub
    except ImportError:
        raise MissingExtra(
            f"loading model2vec model {name!r} from the Hugging Face hub needs model2vec, which is not installed; "
            f"it is the hub extra: {HUB_EXTRA} (or download the model elsewhere and give its folder)"
        ) from None
    try:
        return StaticModel.from_pretrained(name)
    except Exception as exc:  # offline hubs fail with several error types
        raise InvalidInput(
            f"cannot load model2vec model {name!r} from the Hugging Face hub ({type(exc).__name__}); "
            "if this machine is offline, download it elsewhere and give its folder instead"
        ) from None


_DEFAULT_MAX_LENGTH = 512  # model2vec's, when a config names none
_BATCH = 1024  # model2vec's encode batch size: rows are averaged in buckets within a batch


class NativeStaticModel:
    """A model2vec model folder loaded with safetensors and tokenizers alone: model2vec's ``encode``, reproduced.

    It follows ``model2vec.StaticModel`` 0.10 (``from_pretrained`` of a folder, then ``encode`` with its
    defaults) step by step, so its vectors are model2vec's bit for bit (tests/test_native_embed.py): each
    text cut to ``max_length`` times the vocabulary's median token length in characters, tokenized without
    special tokens and truncated to ``max_length`` tokens, the unknown token dropped, its token rows
    averaged in the table's own dtype (weighted and remapped where a quantized model has ``weights`` and
    ``mapping``), then L2-normalised when the config says ``normalize``. A text with no known token is a
    zero row. The attributes ``embedding``, ``weights``, ``token_mapping`` and ``tokenizer`` are
    model2vec's names too, which ``TokenVectors`` reads.
    """

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file  # deferred: loading takes ~0.1 s, read-only commands skip it
        from tokenizers import Tokenizer

        if (folder / "config.json").is_file():  # model2vec's own layout
            config_path, tensor_name = folder / "config.json", "embeddings"
        else:  # a sentence-transformers StaticEmbedding saved beside its config
            config_path, tensor_name = folder / "config_sentence_transformers.json", "embedding.weight"
        tensors = load_file(str(folder / "model.safetensors"))
        self.embedding: np.ndarray = tensors[tensor_name]
        self.weights: np.ndarray | None = tensors.get("weights")
        self.token_mapping: np.ndarray | None = tensors.get("mapping")
        config = json.loads(config_path.read_text("utf-8"))
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        padding = tokenizer.padding
        if padding is not None:  # model2vec keeps the pad token but never pads
            tokenizer.enable_padding(
                pad_id=padding["pad_id"], pad_token=padding["pad_token"], pad_type_id=padding["pad_type_id"], length=0
            )
        vocabulary = tokenizer.get_vocab()
        if self.token_mapping is None and len(self.embedding) != len(vocabulary):
            raise ValueError(f"{len(vocabulary)} tokens but {len(self.embedding)} vectors, and no token mapping")
        self.median_token_length = int(np.median([len(token) for token in vocabulary]))
        self.vocabulary_ids: dict[str, int] = vocabulary  # read-only; TokenVectors shares it
        self.normalize = bool(config.get("normalize", False))
        self.max_length: int | None = config.get("max_length", _DEFAULT_MAX_LENGTH)
        if self.max_length is None:
            tokenizer.no_truncation()
        else:
            tokenizer.enable_truncation(self.max_length)
        self.tokenizer = tokenizer
        self.unk_token_id = _unknown_token_id(tokenizer)

    @property
    def dim(self) -> int:
        return int(self.embedding.shape[1])

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids: no special tokens, the unknown token dropped (as model2vec does)."""
        encode = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)  # fast: no offsets
        ids = [encoding.ids for encoding in encode(list(texts), add_special_tokens=False)]
        if self.unk_token_id is not None:
            ids = [[token for token in row if token != self.unk_token_id] for row in ids]
        return ids

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """An (n, dim) array in the table's dtype: ``StaticModel.encode(texts)`` with its defaults."""
        texts = list(texts)
        if self.max_length is not None:
            cut = self.max_length * self.median_token_length
            texts = [text[:cut] for text in texts]
        if not texts:
            return np.zeros(
                (0, self.dim), dtype=np.float32 if self.embedding.dtype == np.int8 else self.embedding.dtype
            )
        return np.concatenate([self._encode_batch(texts[at : at + _BATCH]) for at in range(0, len(texts), _BATCH)])

    def _encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        ids = self.tokenize(texts)
        dtype = np.dtype(np.float32) if self.embedding.dtype == np.int8 else self.embedding.dtype
        out = np.zeros((len(ids), self.dim), dtype=dtype)
        if self.token_mapping is None and self.weights is None:
            buckets: dict[int, list[int]] = {}
            for row, id_list in enumerate(ids):
                if id_list:
                    buckets.setdefault(len(id_list), []).append(row)
            for rows in buckets.values():
                id_matrix = np.array([ids[row] for row in rows], dtype=np.int64)
                out[rows] = self.embedding[id_matrix].mean(axis=1)
        else:
            for row, id_list in enumerate(ids):
                if id_list:
                    remapped = id_list if self.token_mapping is None else self.token_mapping[id_list]
                    emb = self.embedding[remapped]
                    if self.weights is not None:
                        emb = emb * self.weights[id_list][:, None]
                    out[row] = emb.mean(axis=0)
        if self.normalize:
            out32 = out.astype(np.float32)
            norm = np.linalg.norm(out32, axis=1, keepdims=True) + 1e-32
            normalised: np.ndarray = (out32 / norm).astype(out.dtype)
            return normalised
        return out


def _unknown_token_id(tokenizer: Any) -> int | None:
    """The id of the tokenizer's unknown token, or None (model2vec's rule: the model's, else a unigram's unk_id)."""
    model = tokenizer.model
    if hasattr(model, "unk_token"):  # WordPiece, BPE, WordLevel
        token = model.unk_token
        return None if token is None else tokenizer.token_to_id(token)
    unk: int | None = json.loads(tokenizer.to_str())["model"].get("unk_id")  # Unigram
    return unk


def _digest(weights: Path) -> str:
    """Twelve hex digits of blake3 over the weights file (~5 ms for the bundled 15 MB)."""
    hasher = blake3.blake3()
    with weights.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()[:12]


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
