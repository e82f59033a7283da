"""The change-set file: what one store sends another when they cannot open each other's file (issue 26).

>>> data = b"".join(encode({"since": "t1"}, [{"kind": "node", "id": "ab12"}]))
>>> read(data).records
[{'id': 'ab12', 'kind': 'node'}]

A change set is a zlib stream (level 6) of UTF-8 JSON lines, each one object written with compact
separators, sorted keys and ``ensure_ascii=False``, each ended by a newline:

* line 1, the header: ``{"format": "worlddb-changes", "kind": "header", "version": 1, ...}`` and the
  caller's own fields;
* then the records, each with a text ``kind`` other than ``"header"`` and ``"end"``;
* last, ``{"digest": HEX, "kind": "end", "records": N}``: N records, and the blake3 hex digest of every
  uncompressed byte before this line.

``read`` checks the whole set (and refuses a decompression bomb) before it returns anything, so a
truncated, altered or foreign file is refused with ``InvalidInput`` and nothing is applied. The digest
catches damage, not forgery: whoever can rewrite the file can rewrite the end line too.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from blake3 import blake3

from ..errors import Hint, InvalidInput, WorldDBError

FORMAT = "worlddb-changes"
VERSION = 1
READS = (1,)  # the versions ``read`` understands
# Uncompressed bytes ``read`` accepts: 20 times a 100k-record set of export-like node records (~450 bytes
# a line, 44 MB), far below what a few MB of crafted zlib could expand to (zlib reaches ~1000:1).
DEFAULT_MAX = 1 << 30
MAX_LINE = 16 << 20  # a record is a node's text (500,000 characters at most) with its index rows: a few MB
# Records kept, at most one per this many compressed bytes read (plus RECORD_SLACK): a real record carries a
# random 64-hex id (~36 bytes compressed; a LoCoMo conversation's set takes 118 a record), while tiny crafted
# records cost a few bytes each and ~900 bytes of memory once parsed (21 per inflated byte)
RECORD_COST = 24
RECORD_SLACK = 50_000
# The memory of the records parsed, estimated from each line before it is parsed (``line_cost``: its bytes and
# ITEM per JSON value, counted also inside a node's body text): no line above COST_SLACK (the longest record a
# store writes, a 500,000-character note), and all of them at most COST_RATE per compressed byte read plus
# COST_SLACK. A LoCoMo set needs 26 a byte, 30 with three long notes (3.2x below); a hostile 2 MB set peaks
# ~100 MB at worst, as an honest one does ~75 (bench/file_memory.py, docs/decisions.md 2026-11-29).
ITEM = 64
COST_RATE = 96
COST_SLACK = 16 << 20
_SHARED_LENGTHS = (27, 64)  # a canonical time, an id: kept once however many records name it
_SHARED_KEYS = 64  # the keys of a dict this small are kept once too (a big dict's would fill the table)
_CHUNK = 1 << 16  # bytes read, and most bytes inflated, per step
_RESERVED = ("kind", "format", "version")
_NOTHING = "; nothing was applied"


@dataclass(frozen=True)
class ChangeSet:
    """A change set that checked: the caller's header fields (without kind, format, version), its records."""

    header: dict[str, Any]
    records: list[dict[str, Any]]
    digest: str
    rate: float = 0.0  # the least COST_RATE this set would have passed with (``bench/file_memory.py`` reports it)


def _line(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def encode(header: Mapping[str, Any], records: Iterable[Mapping[str, Any]]) -> Iterator[bytes]:
    """Yield the compressed change set in chunks, one record at a time (ValueError: a caller's mistake)."""
    return _encoder(header, records, {})


def _encoder(
    header: Mapping[str, Any], records: Iterable[Mapping[str, Any]], summary: dict[str, Any]
) -> Iterator[bytes]:
    """Check the header now (records as they come); ``summary`` gets the count and digest at the end."""
    taken = sorted(set(_RESERVED) & set(header))
    if taken:
        raise ValueError(f"the change-set header sets {', '.join(taken)}; the format owns those fields")
    return _chunks({**header, "kind": "header", "format": FORMAT, "version": VERSION}, records, summary)


def _chunks(header: dict[str, Any], records: Iterable[Mapping[str, Any]], summary: dict[str, Any]) -> Iterator[bytes]:
    packer, hasher, count = zlib.compressobj(6), blake3(), 0

    def pack(obj: Mapping[str, Any]) -> bytes:
        line = _line(obj)
        hasher.update(line)
        return packer.compress(line)

    if out := pack(header):
        yield out
    for record in records:
        kind = record.get("kind")
        if not isinstance(kind, str) or kind in ("header", "end"):
            raise ValueError(f"a change-set record needs a text kind other than header or end, not {kind!r}")
        count += 1
        if out := pack(record):
            yield out
    summary.update(records=count, digest=hasher.hexdigest())
    yield packer.compress(_line({"kind": "end", "records": count, "digest": summary["digest"]})) + packer.flush()


def write(
    target: str | os.PathLike[str] | IO[bytes], header: Mapping[str, Any], records: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """Write a change set to a binary file or a path (whole or not at all); return its records, bytes, digest."""
    summary: dict[str, Any] = {}
    chunks, size = _encoder(header, records, summary), 0
    if not isinstance(target, str | os.PathLike):
        for chunk in chunks:
            target.write(chunk)
            size += len(chunk)
        return {"records": summary["records"], "bytes": size, "digest": summary["digest"]}
    path = Path(target)
    # a unique name beside the target, renamed once whole: a crash never leaves half a set under PATH
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    try:
        with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as out:
            for chunk in chunks:
                out.write(chunk)
                size += len(chunk)
            out.flush()
            os.fsync(out.fileno())  # the bytes reach the disk before the name does
        os.replace(partial, path)
    except OSError as exc:
        if isinstance(exc, WorldDBError):  # the records' source failed (StoreUnwritable is an OSError too)
            raise
        raise InvalidInput(
            f"cannot write the change set to {path} ({exc.strerror or exc}); choose a writable path"
        ) from None
    finally:
        partial.unlink(missing_ok=True)
    return {"records": summary["records"], "bytes": size, "digest": summary["digest"]}


Check = Callable[[dict[str, Any]], None]


def read(
    source: bytes | str | os.PathLike[str] | IO[bytes],
    *,
    max_bytes: int = DEFAULT_MAX,
    header: Check | None = None,
    record: Callable[[int, dict[str, Any]], None] | None = None,
    rate: float = COST_RATE,
) -> ChangeSet:
    """Decompress, split and check a whole change set; InvalidInput says what is wrong with it.

    Read as a stream, so a hostile set is refused early: ``header`` checks the caller's header fields before
    any record is parsed, and ``record`` checks each record (its line number, the object) as it is parsed.
    """
    taken = [0]  # compressed bytes read so far: _inflate counts them, _parse bounds the records by them
    parse = functools.partial(_parse, header_check=header, record_check=record, taken=taken, rate=rate)
    if isinstance(source, bytes):
        return parse(_inflate((source[i : i + _CHUNK] for i in range(0, len(source), _CHUNK)), max_bytes, taken))
    if not isinstance(source, str | os.PathLike):
        return parse(_inflate(iter(lambda: source.read(_CHUNK), b""), max_bytes, taken))
    try:
        with open(source, "rb") as file:
            return parse(_inflate(iter(lambda: file.read(_CHUNK), b""), max_bytes, taken))
    except OSError as exc:
        raise _refuse(f"cannot read the change set {os.fspath(source)!r} ({exc.strerror or exc})") from None


def _refuse(what: str, hint: Hint | None = None) -> InvalidInput:
    return InvalidInput(what + _NOTHING, hint=hint)


def _inflate(chunks: Iterator[bytes], max_bytes: int, taken: list[int]) -> Iterator[bytes]:
    """The uncompressed bytes, at most ``max_bytes`` of them, of exactly one whole zlib stream.

    ``taken[0]`` counts the compressed bytes read so far.
    """
    inflater, total, empty = zlib.decompressobj(), 0, True
    for chunk in chunks:
        if not chunk:
            continue
        taken[0] += len(chunk)
        if inflater.eof:
            raise _refuse("bytes follow the change set's zlib stream: the change set was altered or damaged")
        empty, data = False, chunk
        while True:
            try:
                out = inflater.decompress(data, _CHUNK)  # output bounded per step: a bomb never inflates at once
            except zlib.error as exc:
                if total == 0:
                    raise _refuse(f"not a change set: the data is not zlib-compressed ({exc})") from None
                raise _refuse(f"the change set is damaged: its zlib stream is invalid ({exc})") from None
            total += len(out)
            if total > max_bytes:
                raise _refuse(
                    f"the change set inflates past {max_bytes} bytes, the most this reader takes: "
                    "a decompression bomb (or pass a larger max_bytes)"
                )
            if out:
                yield out
            if inflater.eof:
                if inflater.unused_data:
                    raise _refuse("bytes follow the change set's zlib stream: the change set was altered or damaged")
                break
            data = inflater.unconsumed_tail
            if not data and len(out) < _CHUNK:  # a full step may leave output pending: ask again with no input
                break
    if empty:
        raise _refuse("the change set is empty (no bytes at all): not a change set")
    if not inflater.eof:
        raise _refuse("the change set is truncated: its zlib stream ends early")


def _parse(
    pieces: Iterator[bytes],
    *,
    header_check: Check | None = None,
    record_check: Callable[[int, dict[str, Any]], None] | None = None,
    taken: list[int],
    rate: float = COST_RATE,
) -> ChangeSet:
    """Split the inflated bytes into lines and check header, records and end line (and the caller's checks)."""
    hasher, buffer, scan, number = blake3(), bytearray(), 0, 0
    spent, needed = 0, 0.0  # the estimated memory of the lines parsed so far; the least rate that allowed it
    shared: dict[str, str] = {}  # keys, ids and times: one string each for every record that holds them

    def one(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len(pairs) > _SHARED_KEYS:  # not a record's fields: its keys are rarely another record's too
            return dict(pairs)
        return {
            shared.setdefault(k, k): shared.setdefault(v, v) if type(v) is str and len(v) in _SHARED_LENGTHS else v
            for k, v in pairs
        }

    header: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    for piece in pieces:
        buffer += piece
        start = 0
        # split on b"\n" only: str.splitlines would also split inside text at U+2028 and friends
        while (stop := buffer.find(b"\n", scan)) >= 0:
            line = bytes(buffer[start : stop + 1])
            start = scan = stop + 1
            number += 1
            if end is not None:
                raise _refuse(f"line {number} follows the end line: the change set was altered or damaged")
            cost = line_cost(line)
            if cost > COST_SLACK:
                raise _refuse(
                    f"line {number} would take ~{cost >> 20} MB of memory to read ({cost // ITEM:,} JSON values), "
                    f"more than the {COST_SLACK >> 20} MB of the longest record a store writes: a hostile set"
                )
            spent += cost
            needed = max(needed, (spent - COST_SLACK) / max(taken[0], 1))
            if needed > rate:
                raise _refuse(
                    f"line {number} would take the records read past ~{spent >> 20} MB of memory from {taken[0]:,} "
                    f"compressed bytes, more than {rate:g} bytes a compressed byte (plus {COST_SLACK >> 20} MB), "
                    "which no set a store writes needs: a hostile set (or, if you trust its sender, one to send "
                    "again in smaller parts, a scope at a time)",
                    hint=Hint("changes", (("store", "sender"), ("scope", ""))),
                )
            obj = _object(line, number, one)
            if header is None:
                header = _header(obj)
                if header_check is not None:
                    header_check(header)
            elif obj.get("kind") == "end":
                end = obj
                continue
            elif not isinstance(obj.get("kind"), str) or obj["kind"] == "header":
                raise _refuse(f"line {number} is a record without a text kind (or a second header): not a change set")
            else:
                if len(records) >= taken[0] // RECORD_COST + RECORD_SLACK:
                    raise _refuse(
                        f"the change set holds more than {len(records)} records in {taken[0]} compressed bytes, "
                        f"fewer than {RECORD_COST} bytes a record, which no set a store writes does: a hostile set"
                    )
                if record_check is not None:
                    record_check(number, obj)
                records.append(obj)
            hasher.update(line)
        del buffer[:start]
        scan = len(buffer)
        if scan > MAX_LINE:
            raise _refuse(f"line {number + 1} runs past {MAX_LINE} bytes without ending: no record is that long")
    if buffer:
        if end is not None:
            raise _refuse("bytes follow the end line: the change set was altered or damaged")
        raise _refuse(f"the change set is truncated: line {number + 1} has no line end")
    if header is None:
        raise _refuse("the change set holds no lines: not a change set")
    if end is None:
        raise _refuse("the change set is truncated: it has no end line")
    digest = hasher.hexdigest()
    if type(end.get("records")) is not int or end["records"] != len(records):
        raise _refuse(
            f"the end line counts {end.get('records')!r} records but {len(records)} came before it: "
            "the change set was altered or damaged"
        )
    if end.get("digest") != digest:
        raise _refuse("the end line's digest disagrees with the lines before it: the change set was altered or damaged")
    return ChangeSet(header=header, records=records, digest=digest, rate=needed)


def line_cost(line: bytes) -> int:
    """A line's memory once parsed, at most: its bytes, ITEM a value (commas, lists) and 3 ITEM a dict."""
    return len(line) + ITEM * (line.count(b",") + line.count(b"[") + 3 * line.count(b"{") + 1)


def _object(line: bytes, number: int, hook: Callable[[list[tuple[str, Any]]], dict[str, Any]]) -> dict[str, Any]:
    try:
        obj = json.loads(line.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=hook)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _refuse(f"line {number} of the change set is not UTF-8 JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise _refuse(f"line {number} of the change set is a JSON {type(obj).__name__}, not an object")
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _header(obj: dict[str, Any]) -> dict[str, Any]:
    """The caller's header fields, once line 1 proves to be a header this code reads."""
    if obj.get("kind") != "header" or obj.get("format") != FORMAT:
        raise _refuse(f"not a change set: line 1 is not a {FORMAT} header")
    version = obj.get("version")
    if type(version) is not int or version not in READS:  # not True, not 1.0
        raise _refuse(
            f"the change set is format version {version!r} and this code reads version "
            f"{', '.join(map(str, READS))} only: upgrade worlddb_lite to read it"
        )
    return {k: v for k, v in obj.items() if k not in _RESERVED}
