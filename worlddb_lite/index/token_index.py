"""The token index: each indexed text's first content tokens under the store's static model.

The late-interaction stage (``retrieval/late.py``) matches a question's tokens to each candidate's.
Tokenizing its 300 candidates at read time cost ~6 ms a recall at 100k memories, where most texts
are new to the process; so a text's token ids are written once, beside its full-text row and in
the same transaction (``node_tokens``: the ids of its first ``TOKENS`` content tokens, unsigned
16-bit when the vocabulary fits, else 32-bit, little-endian). What a row holds depends on the
model's vocabulary, which meta ``embedder_id`` pins (re-embedding rewrites the rows), and on this
module's rules, which ``FORMAT`` names; meta ``token_format`` records the format the rows were
written in, and opening a store written in another (or before the index existed) rewrites them.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence
from itertools import chain, islice
from weakref import WeakKeyDictionary, ref

import blake3
import numpy as np

from ..models.embed import TokenVectors
from ..store.rows import Store
from ..text import caches
from ..text.stopwords import STOPWORDS

TEXT_CHARS = 800  # characters of a text read (name, a space, content): enough for TOKENS content tokens
TOKENS = 64  # content tokens kept: a long message states its subject first (docs/decisions.md)
# the rules' version (bump it when ContentTokens reads a text otherwise: what a word is, which tokens
# are skipped), the text's cut, and the function words
FORMAT = f"1:{TEXT_CHARS}:{TOKENS}:" + blake3.blake3(" ".join(sorted(STOPWORDS)).encode()).hexdigest()[:12]

# ASCII punctuation becomes a space, then the text splits at spaces: a third of a regex's cost. A
# word still holding other punctuation ("café—") is tokenized whole once, and the pieces dropped.
_APART = str.maketrans(dict.fromkeys(string.punctuation, " "))
_WORD_MARKS = "#▁Ġ"  # where a vocabulary marks a piece as a word's start or continuation


class ContentTokens:
    """A token table's content tokens (no function words, no pieces without a letter or digit) of a text.

    Words are tokenized once each and remembered: a text costs a dictionary lookup per word once
    its words have been seen, where the tokenizer would cost ~50 µs a text.
    """

    WORDS = 100_000  # distinct words remembered (each at most LONGEST characters); past this it starts again
    LONGEST = 40  # a longer "word" (a hash, a blob of base64) is tokenized each time, not kept

    def __init__(self, tokens: TokenVectors) -> None:
        self._tokens = ref(tokens)  # weak: _CONTENT holds this only as long as the table lives
        size = tokens.size
        self.dtype = np.dtype("<u2") if size <= 1 << 16 else np.dtype("<i4")
        self.skip = np.zeros(size, dtype=bool)
        for piece, tid in tokens.vocabulary.items():
            core = piece.lstrip(_WORD_MARKS)  # "##ing" (WordPiece), "▁the" (sentencepiece), "Ġdog" (byte-level)
            function_word = not piece.startswith("##") and core.lower() in STOPWORDS  # "##s" ends a word
            if tid < size and (function_word or not core.isalnum()):
                self.skip[tid] = True
        self.words: dict[str, tuple[int, ...]] = {}
        caches.register("token index: words of texts indexed", self._forget)

    def _forget(self) -> None:
        self.words.clear()

    def ids(self, text: str, most: int) -> list[int]:
        """The ids of ``text``'s first ``most`` content tokens, in order."""
        words = text.lower().translate(_APART).split()
        found = list(map(self.words.get, words))  # one C-level pass; a new word is rare after the first texts
        if None in found:
            for at, word in enumerate(words):
                if found[at] is None:
                    found[at] = self._learn(word)
        return list(islice(chain.from_iterable(found), most))  # type: ignore[arg-type]

    def row(self, name: str | None, content: str | None) -> bytes:
        """The index row of a full-text row: its name, a space, its content, cut at ``TEXT_CHARS``."""
        text = f"{name or ''} {content or ''}"[:TEXT_CHARS]
        return np.asarray(self.ids(text, TOKENS), dtype=self.dtype).tobytes()

    def decode(self, row: bytes) -> np.ndarray:
        """A row's token ids."""
        return np.frombuffer(row, dtype=self.dtype)

    def _learn(self, word: str) -> tuple[int, ...]:
        tokens = self._tokens()
        assert tokens is not None, "content tokens outlived their token table"
        ids = tuple(i for i in tokens.word_ids(word) if not self.skip[i])
        if len(word) <= self.LONGEST:
            if len(self.words) >= self.WORDS:
                self.words.clear()
            self.words[word] = ids
        return ids


_CONTENT: WeakKeyDictionary[TokenVectors, ContentTokens] = WeakKeyDictionary()  # gone with their token table


def content_tokens(tokens: TokenVectors) -> ContentTokens:
    """The (shared) content tokens of a token table."""
    found = _CONTENT.get(tokens)
    if found is None:
        found = _CONTENT[tokens] = ContentTokens(tokens)
    return found


def index_rows(
    tokens: TokenVectors | None, texts: Iterable[tuple[int, str | None, str | None]]
) -> list[tuple[int, bytes]]:
    """(nid, row) for (nid, name, content) texts; none without a token table (a store of another embedder)."""
    if tokens is None:
        return []
    reader = content_tokens(tokens)
    return [(nid, reader.row(name, content)) for nid, name, content in texts]


def index_texts(
    store: Store, tokens: TokenVectors | None, rows: Sequence[tuple[int, str, str, str | None, str | None]]
) -> None:
    """``Store.index_texts`` of (nid, name, content, added, context) rows, and their token rows under ``tokens``."""
    indexed = store.index_texts(rows)
    if tokens is not None:
        store.write_tokens(index_rows(tokens, indexed))


def rewrite(store: Store, tokens: TokenVectors | None, batch: int = 4096) -> int:
    """Rewrite the whole token index from the full-text rows (none without a token table); rows written."""
    store.clear_tokens()
    written = 0
    if tokens is not None:
        for chunk in store.text_rows(batch):
            store.write_tokens(index_rows(tokens, chunk))
            written += len(chunk)
    return written
