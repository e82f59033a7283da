"""Canonical bytes and blake3-256 ids: what a node or edge *says* decides its id.

The canonical encoding is JSON with sorted keys, no whitespace, UTF-8, NFC
strings and no floats that JSON cannot round-trip; the same value always gives
the same bytes on every platform. Each kind of hash has its own domain prefix so
a node id can never collide with an edge id or a Merkle node.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Mapping
from typing import Any

from blake3 import blake3

from ..errors import InvalidInput

ID_BYTES = 32
NODE_DOMAIN = b"worlddb/node/v1\n"
EDGE_DOMAIN = b"worlddb/edge/v1\n"
ROOT_DOMAIN = b"worlddb/root/v1\n"
EDGE_LEAF_DOMAIN = b"worlddb/edge-leaf/v1\n"
INNER_DOMAIN = b"worlddb/inner/v1\n"
EMPTY_TREE = blake3(b"worlddb/empty/v1\n").digest()


def _clean_text(value: str, path: str) -> str:
    """NFC text that encodes as UTF-8 (the fast path skips work for plain ASCII)."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{path}: text is not valid UTF-8 (lone surrogate); decode it properly first") from None
    return value if unicodedata.is_normalized("NFC", value) else unicodedata.normalize("NFC", value)


def nfc(text: str) -> str:
    """``text`` as a blob holds it (NFC): what the full-text index is given, so node_text reads it back."""
    return text if text.isascii() or unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


# Lists and dicts nest at most this deep in a record: deeper (or a list that holds itself) would
# exhaust Python's recursion here and in every reader's json.loads, long before SQLite minds
MAX_DEPTH = 64


def _normalise(value: Any, path: str, depth: int = 0) -> Any:
    """Return a JSON-ready copy with NFC strings; refuse what cannot be canonical."""
    if isinstance(value, str):
        return _clean_text(value, path)
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{path}: {value} is not a finite number; store it as text")
        return value
    if isinstance(value, (list, tuple, dict)) and depth >= MAX_DEPTH:
        where = path if len(path) <= 80 else path[:80] + "..."
        raise InvalidInput(
            f"{where}: lists and dicts nest deeper than {MAX_DEPTH} levels (or one holds itself); "
            "nothing was written. Flatten the value, or store it as text"
        )
    if isinstance(value, (list, tuple)):
        return [_normalise(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():  # plain text and None inline: this runs on every write
            if type(key) is not str:
                raise InvalidInput(f"{path}: keys must be text, got {type(key).__name__}")
            if not key.isascii():
                key = _clean_text(key, path)
            if key in out:
                raise InvalidInput(f"{path}: two keys read the same after Unicode normalisation ({key!r})")
            if type(item) is str:
                out[key] = item if item.isascii() else _clean_text(item, path + "." + key)
            elif item is None:
                out[key] = None
            else:
                out[key] = _normalise(item, path + "." + key, depth + 1)
        return out
    raise InvalidInput(f"{path}: {type(value).__name__} cannot be stored; use text, numbers, booleans, lists or dicts")


_encode_text = json.encoder.encode_basestring
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: dict[str, Any]) -> str:
    """The canonical text of a record (keys sorted, compact, NFC).

    Same output as ``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
    over the NFC-normalised record; top-level text and None are encoded inline because this
    runs on every write (a property test holds it equal to the plain encoder).
    """
    keyed: dict[str, Any] = {}
    for raw_key, item in value.items():
        if type(raw_key) is not str:
            raise InvalidInput(f"record: keys must be text, got {type(raw_key).__name__}")
        key = raw_key if raw_key.isascii() else _clean_text(raw_key, "record")
        if key in keyed:
            raise InvalidInput(f"record: two keys read the same after Unicode normalisation ({key!r})")
        keyed[key] = item
    parts = []
    for key in sorted(keyed):
        item = keyed[key]
        if type(item) is str:
            encoded = _encode_text(item if item.isascii() else _clean_text(item, "record." + key))
        elif item is None:
            encoded = "null"
        elif type(item) is int:
            encoded = str(item)
        elif type(item) is dict and not item:
            encoded = "{}"
        else:
            encoded = _ENCODER.encode(_normalise(item, "record." + key))
        parts.append(_encode_text(key) + ":" + encoded)
    return "{" + ",".join(parts) + "}"


def node_id(body: str) -> bytes:
    """blake3-256 of a node's canonical body."""
    return blake3(NODE_DOMAIN + body.encode("utf-8")).digest()


def edge_body(type_: str, src_hex: str, dst_hex: str, valid_at: str, props_json: str) -> str:
    """The canonical body an edge id hashes, from its columns (``props_json`` already canonical)."""
    return (
        '{"dst":'
        + _encode_text(dst_hex)
        + ',"props":'
        + props_json
        + ',"src":'
        + _encode_text(src_hex)
        + ',"type":'
        + _encode_text(type_)
        + ',"v":1,"valid_at":'
        + _encode_text(valid_at)
        + "}"
    )


def edge_id(body: str) -> bytes:
    """blake3-256 of an edge's canonical body."""
    return blake3(EDGE_DOMAIN + body.encode("utf-8")).digest()


def state_bytes(*fields: str | int | None) -> bytes:
    """Encode the mutable projection of a node or edge for its Merkle leaf."""
    return "\x1f".join("" if f is None else str(f) for f in fields).encode("utf-8")


def world_root(nid: bytes, state: bytes, top: bytes, size: int) -> bytes:
    """Root of a world: its id, its projection, the top of its member tree and the member count."""
    return blake3(ROOT_DOMAIN + nid + top + size.to_bytes(8, "big") + state).digest()


def edge_leaf(eid: bytes, state: bytes) -> bytes:
    """Merkle leaf of an interior edge: its id and its projection."""
    return blake3(EDGE_LEAF_DOMAIN + eid + state).digest()


def inner(left: bytes, right: bytes) -> bytes:
    """An interior node of a member tree."""
    return blake3(INNER_DOMAIN + left + right).digest()


def to_hex(raw: bytes) -> str:
    """Lower-case hex of an id."""
    return raw.hex()


def node_body(
    type_: str,
    parent_hex: str,
    name: str | None,
    content: str | None,
    props: Mapping[str, Any] | None,
    valid_at: str | None,
) -> str:
    """The canonical JSON a node's id hashes (``valid_at`` None for a timeless world)."""
    record: dict[str, Any] = {
        "v": 1,
        "type": type_,
        "name": name,
        "content": content,
        "parent": parent_hex,
        "props": dict(props or {}),
    }
    if valid_at is not None:
        record["valid_at"] = valid_at
    return canonical_json(record)
