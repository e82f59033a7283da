"""Rerankers: a protocol, ONNX runners for a cross-encoder and a bi-encoder, and rank fusion.

A cross-encoder reads the query and one passage together and returns one relevance score,
so it sees their interaction where a bi-encoder only compares two separate vectors. No
cross-encoder weights ship with the package (none can be had offline); a user names a folder
holding ``model.onnx`` and ``tokenizer.json``, e.g. cross-encoder/ms-marco-MiniLM-L-6-v2
exported with ``torch.onnx.export`` on a machine with a model hub.

The runtime (onnxruntime, tokenizers) is the ``rerank`` extra, not part of the default install:
``pip install 'worlddb_lite[rerank]'``. It is imported only when a runner is built, and a runner
built without it raises ``MissingExtra`` naming that command.

A bi-encoder (a sentence-transformers model such as all-MiniLM-L6-v2, exported to ONNX with
its ``last_hidden_state`` output) embeds the query and each passage alone, mean-pools the token
vectors and scores by cosine. It is weaker than a cross-encoder but its passage vectors do not
depend on the query, so they can be cached. ``RankFusion`` wraps either: it fuses the order the
passages came in (recall's fused order) with the re-scorer's order by RRF instead of re-sorting.
"""

from __future__ import annotations

import importlib
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..checks import number, whole
from ..errors import InvalidInput, MissingExtra, RerankerError, install_hint
from ..text import caches
from .embed import _digest, is_folder

_KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
RERANK_EXTRA = install_hint("rerank")
_EXPORT_HINT = (
    "a cross-encoder folder must hold model.onnx and tokenizer.json; to make one, export e.g. "
    "cross-encoder/ms-marco-MiniLM-L-6-v2 on a machine with a model hub (torch.onnx.export with inputs "
    "input_ids, attention_mask, token_type_ids; tokenizer.save('tokenizer.json')) and copy the folder here"
)
_BI_EXPORT_HINT = (
    "a bi-encoder folder must hold model.onnx and tokenizer.json: a sentence-transformers model such as "
    "all-MiniLM-L6-v2 exported to ONNX with its token vectors (last_hidden_state) as the first output"
)


@runtime_checkable
class Reranker(Protocol):
    """Scores passages against a query."""

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Return a float32 array with one score per passage, in order; higher is more relevant."""
        ...


def _check_query(query: str) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("the rerank query is empty; give the text the passages should be scored against")


class _OnnxTextModel:
    """What the ONNX runners share: the folder, ``tokenizer.json``, the session, its inputs and the id."""

    kind = "text model"
    hint = ""

    def __init__(self, folder: str | Path, *, max_length: int, batch_size: int, threads: int | None) -> None:
        if max_length < 4 or batch_size < 1 or (threads is not None and threads < 1):
            raise InvalidInput(
                "max_length must be >= 4, batch_size >= 1 and threads >= 1 or None "
                f"(got {max_length}, {batch_size}, {threads})"
            )
        _require_runtime(self.kind)  # before the folder checks: without the extra no folder would do
        self.folder = Path(folder)
        model, vocab = self.folder / "model.onnx", self.folder / "tokenizer.json"
        if not is_folder(self.folder):
            raise RerankerError(f"no {self.kind} folder at {self.folder}; {self.hint}")
        for needed in (model, vocab):
            if not needed.is_file():
                raise RerankerError(f"{self.folder} has no {needed.name}; {self.hint}")
        self.max_length, self.batch_size = max_length, batch_size
        self._tokenizer = _load_tokenizer(vocab)
        self._session = _load_session(model, threads)
        declared = self._session.get_inputs()
        self._inputs = [(i.name, np.int32 if i.type == "tensor(int32)" else np.int64) for i in declared]
        names = [name for name, _ in self._inputs]
        if "input_ids" not in names or not set(names) <= set(_KNOWN_INPUTS):
            raise RerankerError(
                f"{model} declares inputs {names}; a {self.kind} here takes "
                "input_ids and optionally attention_mask and token_type_ids (a text model exported from Hugging Face)"
            )
        self._output = self._session.get_outputs()[0].name  # the first output only; others are not computed
        self._id = f"onnx:{self.folder.resolve().name}@{_digest(model)}"

    @property
    def id(self) -> str:
        """Which model this is: folder name and a digest of model.onnx, so a store can record it."""
        return self._id

    def _infer(self, columns: dict[str, Any]) -> np.ndarray:
        """The first output of the model for one batch, as float32; ``columns`` holds every known input."""
        feed = {name: np.asarray(columns[name], dtype=dtype) for name, dtype in self._inputs}
        try:
            return np.asarray(self._session.run([self._output], feed)[0], dtype=np.float32)
        except Exception as exc:  # onnxruntime raises its own exception types for a graph that fails
            raise RerankerError(f"the {self.kind} {self._id} failed to run: {exc}") from None

    def _finite(self, scores: np.ndarray, what: str) -> np.ndarray:
        if not np.all(np.isfinite(scores)):
            row = int(np.flatnonzero(~np.isfinite(scores))[0])
            raise RerankerError(
                f"the {self.kind} {self._id} returned {scores[row]} for {what} {row}; "
                "the model file is likely damaged or was exported wrongly"
            )
        return scores


class OnnxCrossEncoder(_OnnxTextModel):
    """Runs a cross-encoder ONNX model on CPU with its Hugging Face ``tokenizer.json``.

    Pairs are encoded as (query, passage), truncated to ``max_length`` tokens (the passage is
    cut first, so the query survives whole where it fits) and padded to the longest pair of
    each batch. The model's first output must be one score per pair ((n,) or (n, 1)) or two
    class logits ((n, 2)), read as logit[1] - logit[0].
    """

    kind = "cross-encoder"
    hint = _EXPORT_HINT

    def __init__(
        self, folder: str | Path, *, max_length: int = 512, batch_size: int = 16, threads: int | None = None
    ) -> None:
        super().__init__(folder, max_length=max_length, batch_size=batch_size, threads=threads)

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Return one float32 score per passage, in order; higher is more relevant."""
        _check_query(query)
        passages = list(passages)
        parts = [self._run(query, passages[i : i + self.batch_size]) for i in range(0, len(passages), self.batch_size)]
        scores = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
        return self._finite(scores, "passage")

    def _run(self, query: str, passages: list[str]) -> np.ndarray:
        encodings = self._encode([(query, p) for p in passages])
        raw = self._infer(
            {
                "input_ids": [e.ids for e in encodings],
                "attention_mask": [e.attention_mask for e in encodings],
                "token_type_ids": [e.type_ids for e in encodings],
            }
        )
        n = len(passages)
        if raw.shape in ((n,), (n, 1)):
            return raw.reshape(n)
        if raw.shape == (n, 2):
            logits: np.ndarray = raw[:, 1] - raw[:, 0]
            return logits
        raise RerankerError(
            f"the cross-encoder {self._id} returned shape {raw.shape} for {n} pairs; a cross-encoder returns one "
            "score per pair ((n,) or (n, 1)) or two class logits ((n, 2)); an embedding model "
            "(last_hidden_state) is not a cross-encoder"
        )

    def _encode(self, pairs: list[tuple[str, str]]) -> list[Any]:
        """Truncate the passage only; if the query alone is too long, cut both ("longest_first")."""
        for strategy in ("only_second", "longest_first"):
            self._tokenizer.enable_truncation(self.max_length, strategy=strategy)
            try:
                return list(self._tokenizer.encode_batch(pairs))
            except Exception as exc:  # tokenizers raises a bare Exception when only_second cannot fit
                error = exc
        raise RerankerError(f"cannot tokenize the rerank pairs with {self.folder / 'tokenizer.json'}: {error}")


class OnnxBiEncoderReranker(_OnnxTextModel):
    """Re-scores passages by cosine to the query with a bi-encoder ONNX model (mean-pooled token vectors).

    The query and each passage are encoded alone, truncated to ``max_length`` tokens (256 is what
    all-MiniLM-L6-v2 was trained with), padded to the longest text of each batch (texts are
    batched by length, so little padding is computed) and mean-pooled over their attention mask.
    The model's first output must be token vectors (n, tokens, hidden). Up to ``cache`` passage
    vectors are kept (least recently used dropped first), keyed by the passage text: a passage
    scored again costs nothing. ``cache=0`` keeps none.
    """

    kind = "bi-encoder"
    hint = _BI_EXPORT_HINT

    def __init__(
        self,
        folder: str | Path,
        *,
        max_length: int = 256,
        batch_size: int = 16,
        threads: int | None = None,
        cache: int = 4096,
    ) -> None:
        whole(cache, "cache")
        super().__init__(folder, max_length=max_length, batch_size=batch_size, threads=threads)
        self._pad_id = int((self._tokenizer.padding or {}).get("pad_id", 0))
        self._tokenizer.no_padding()  # each batch is padded to its own longest text in _pool
        self._tokenizer.enable_truncation(max_length)
        self.cache_size = cache
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = self.misses = 0  # passage-cache counters
        caches.register("bi-encoder: passage vectors", self._forget)

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Return one float32 cosine per passage, in order; higher is more relevant."""
        _check_query(query)
        passages = list(passages)
        if not passages:
            return np.zeros(0, dtype=np.float32)
        found: dict[str, np.ndarray] = {}
        for text in passages:
            vector = self._cache.get(text)
            if vector is not None:
                self._cache.move_to_end(text)
                found[text] = vector
        missing = list(dict.fromkeys(p for p in passages if p not in found))
        self.hits += len(passages) - len(missing)
        self.misses += len(missing)
        vectors = self.embed([query, *missing])
        for text, vector in zip(missing, vectors[1:], strict=True):
            found[text] = vector
            if self.cache_size:
                self._cache[text] = vector
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        scores = np.stack([found[p] for p in passages]) @ vectors[0]
        return self._finite(scores.astype(np.float32), "passage")

    def _forget(self) -> None:
        self._cache.clear()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors (n, hidden), float32, one per text in order (the cache is not used)."""
        encodings = list(self._tokenizer.encode_batch(list(texts))) if texts else []
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        parts = [
            self._pool([encodings[i] for i in order[s : s + self.batch_size]])
            for s in range(0, len(order), self.batch_size)
        ]
        if not parts:
            return np.zeros((0, 0), dtype=np.float32)
        out = np.empty((len(order), parts[0].shape[1]), dtype=np.float32)
        out[order] = np.concatenate(parts)
        return out

    def _pool(self, encodings: list[Any]) -> np.ndarray:
        """Masked mean of one batch's token vectors, scaled to unit length (a zero vector stays zero)."""
        n, width = len(encodings), max(len(e.ids) for e in encodings)
        columns = {name: np.zeros((n, width), dtype=np.int64) for name in _KNOWN_INPUTS}
        columns["input_ids"][:] = self._pad_id
        for row, e in enumerate(encodings):
            size = len(e.ids)
            columns["input_ids"][row, :size] = e.ids
            columns["attention_mask"][row, :size] = e.attention_mask
            columns["token_type_ids"][row, :size] = e.type_ids
        hidden = self._infer(columns)
        if hidden.ndim != 3 or hidden.shape[:2] != (n, width):
            raise RerankerError(
                f"the bi-encoder {self._id} returned shape {hidden.shape} for {n} texts; a bi-encoder returns token "
                "vectors (n, tokens, hidden), its last_hidden_state; a cross-encoder's scores are not token vectors"
            )
        mask = columns["attention_mask"].astype(np.float32)[:, :, None]
        mean = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
        norms = np.linalg.norm(mean, axis=1, keepdims=True)
        unit: np.ndarray = mean / np.where(norms > 0, norms, 1.0)
        return self._finite(unit.reshape(-1), "value").reshape(unit.shape)


class RankFusion:
    """Fuses the order the passages came in with a re-scorer's order by reciprocal rank fusion.

    ``score`` gives passage i (0-based, in the order given: recall's fused order) the score
    1 / (k + i + 1) + weight / (k + r_i), r_i its 1-based rank under ``inner`` (ties: first given
    first). Sorting by it moves a passage the re-scorer likes up without letting the re-scorer
    alone decide the order, as a plain re-sort would.
    """

    def __init__(self, inner: Reranker, *, k: int = 60, weight: float = 1.0) -> None:
        if not isinstance(inner, Reranker):
            raise InvalidInput(f"inner must have score(query, passages), not {type(inner).__name__}")
        whole(k, "k")
        if number(weight, "weight") < 0:
            raise InvalidInput(f"weight must be a number >= 0, got {weight!r}")
        self.inner, self.k, self.weight = inner, k, float(weight)

    @property
    def id(self) -> str:
        inner = getattr(self.inner, "id", type(self.inner).__name__)
        return f"rrf(k={self.k},w={self.weight:g}):{inner}"

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One float32 fused score per passage, in order; higher is more relevant."""
        raw = np.asarray(self.inner.score(query, passages), dtype=np.float64)
        n = len(raw)
        ranks = np.empty(n, dtype=np.float64)
        ranks[np.argsort(-raw, kind="stable")] = np.arange(1, n + 1)
        given = np.arange(1, n + 1, dtype=np.float64)
        fused: np.ndarray = (1.0 / (self.k + given) + self.weight / (self.k + ranks)).astype(np.float32)
        return fused


def _require_runtime(kind: str) -> None:
    """Raise ``MissingExtra`` naming the ``rerank`` extra when onnxruntime or tokenizers cannot be imported."""
    missing = []
    for module in ("onnxruntime", "tokenizers"):  # deferred: importing onnxruntime costs ~0.2 s
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise MissingExtra(
            f"the ONNX {kind} needs onnxruntime and tokenizers, and {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed; they are the rerank extra: {RERANK_EXTRA}"
        )


def _load_tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for a malformed file
        raise RerankerError(f"cannot load {path} as a Hugging Face tokenizer.json: {exc}") from None
    pad = tokenizer.padding or {}
    token = pad.get("pad_token") or next((t for t in ("[PAD]", "<pad>") if tokenizer.token_to_id(t) is not None), "")
    pad_id = pad.get("pad_id", tokenizer.token_to_id(token) if token else 0)
    # A saved tokenizer often pads to a fixed length (128 for MiniLM); pad each batch to its longest instead.
    # Padded positions are masked out, so the pad id only has to be a valid token id.
    tokenizer.enable_padding(pad_id=pad_id, pad_token=token or "[PAD]", pad_type_id=0)
    return tokenizer


def _load_session(path: Path, threads: int | None) -> Any:
    import onnxruntime as ort  # deferred, and checked by _require_runtime

    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises several types for unreadable or unsupported graphs
        raise RerankerError(
            f"onnxruntime cannot load {path}: {exc}; re-export the model (opset 17 works with this onnxruntime)"
        ) from None
