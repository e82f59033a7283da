"""Near-duplicate memories: linked by ``duplicates``, never deleted; recall returns one of each group.

``dedup(writer)`` looks at every current note, turn and fact the vector index holds. For each,
the index's nearest rows of the same type (``NEIGHBOURS``, in the few partitions nearest its
vector, as the resolver's near-duplicate tier does: O(n x k), not O(n^2)) are candidates; an
earlier one (written first) in the same scope is its duplicate when

* their vectors' cosine is at least ``threshold``, and
* their words say the same (``restates``): the same values (numbers, names, days and months),
  and the content words of one, up to their first letters, all among the other's, which adds
  at most a fifth more. "I live in Lisbon" and "I live in Porto" never pass, whatever the cosine.

The later memory gets ``duplicates`` -> the earliest of its duplicates (``{"cosine": ...}``).
A pair whose link was closed is not linked again. Short memories ("Thanks!", "Yes, I did") are
left alone: under ``MIN_WORDS`` content words, two of them agreeing says little.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from ..errors import InvalidInput
from ..store import graph_rows
from ..text import caches
from ..text.stopwords import is_function_word
from ..write.writer import Writer
from .batches import BATCH, Link, Progress, check_options, write_links

DUPLICATES = "duplicates"
KINDS = ("Memory", "Turn", "Fact")
THRESHOLD = 0.8  # cosine: below the 0.82 of one short turn said twice in two contexts (docs/decisions.md)
NEIGHBOURS = 16  # nearest rows read per memory
NEAR_PROBE = 4  # partitions scanned per memory: a near-duplicate lies in the few nearest its vector
MIN_WORDS = 3  # content words a memory needs to be linked at all
MOST_ADDED = 0.2  # the longer may add at most this share of the shorter's content words
STEM = 5  # words are compared by their first letters: "appointment" and "appointments" agree
_TOKEN = re.compile(r"[^\W\d_]+|\d+")  # "3pm" is "3" and "pm", as "3 pm" is
_SENTENCE = re.compile(r"(?:^|[.!?:;]\s+|\n)\s*([^\W\d_]+)")
_CALENDAR = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june july "
    "august september october november december today tomorrow yesterday tonight".split()
)


def dedup(
    writer: Writer,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    threshold: float = THRESHOLD,
    batch: int = BATCH,
) -> int:
    """Link near-duplicate memories of one scope and type; how many links (would be, with ``dry_run``).

    ``progress(done, total)`` runs after each committed batch of ``batch`` links.
    """
    size = check_options(dry_run, batch)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < threshold <= 1.0:
        raise InvalidInput(f"threshold is a cosine: above 0 and at most 1, not {threshold!r}")
    return write_links(writer, duplicates(writer, float(threshold)), dry_run=dry_run, progress=progress, batch=size)


def duplicates(writer: Writer, threshold: float = THRESHOLD) -> list[Link]:
    """The ``duplicates`` links missing from the store, later memory -> earliest duplicate, in nid order."""
    index = writer.vectors()  # holding every memory, those written in this transaction too
    codes = [index.type_names[t] for t in KINDS if t in index.type_names]
    held = np.flatnonzero(index.pos >= 0)
    held = held[np.isin(index.type_code[held], codes)]
    if not held.size:
        return []
    names = {code: name for name, code in index.type_names.items()}
    current = graph_rows.current_among(writer.conn, held.tolist())
    known = graph_rows.linked_pairs(writer.conn, DUPLICATES)
    withdrawn = {frozenset(p) for p in graph_rows.withdrawn_pairs(writer.conn, DUPLICATES)}
    texts: dict[int, str] = {}
    out: list[Link] = []
    for nid in sorted(current):
        kind = names[int(index.type_code[nid])]
        found = index.near_duplicates(index.vector(nid), NEIGHBOURS, types=[kind], probes=NEAR_PROBE)
        scope = index.scope_of[nid]
        near = [
            (other, score)
            for other, score in found
            if other < nid and score >= threshold and other in current and index.scope_of[other] == scope
        ]
        if not near:
            continue
        wanted = [n for n in (nid, *(o for o, _ in near)) if n not in texts]
        if wanted:
            texts.update(graph_rows.contents(writer.conn, wanted))
        if nid not in texts:
            continue
        for other, score in sorted(near):  # the earliest that says the same
            if other in texts and frozenset((nid, other)) not in withdrawn and restates(texts[nid], texts[other]):
                if (nid, other) not in known:
                    out.append((nid, other, DUPLICATES, {"cosine": round(min(score, 1.0), 4)}))
                break
    return out


def restates(a: str, b: str) -> bool:
    """True if one text says what the other does: the same values, and no word of its own but a few added."""
    (words_a, values_a), (words_b, values_b) = _read(a), _read(b)
    if values_a != values_b:
        return False
    short, long = sorted((words_a, words_b), key=len)
    return len(short) >= MIN_WORDS and short <= long and len(long - short) <= MOST_ADDED * len(short)


@lru_cache(maxsize=4096)
def _read(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(content word stems, values) of a text; values are numbers, days, months and capitalised names."""
    starts = {m.start(1) for m in _SENTENCE.finditer(text)}
    stems: set[str] = set()
    values: set[str] = set()
    for match in _TOKEN.finditer(text):
        word = match.group()
        lower = word.casefold()
        if is_function_word(lower):
            continue
        stems.add(lower[:STEM])
        if word.isdigit() or lower in _CALENDAR or (word[:1].isupper() and match.start() not in starts):
            values.add(lower)
    return frozenset(stems), frozenset(values)


caches.register("dedup: texts read", _read.cache_clear)
