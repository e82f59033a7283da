"""hashing.py: canonical bytes are deterministic, NFC-normalised and strict; ids are domain-separated."""

from __future__ import annotations

import json
import math
import random
import unicodedata

import pytest
from blake3 import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

from worlddb_lite.errors import InvalidInput
from worlddb_lite.store.hashing import (
    EDGE_DOMAIN,
    EMPTY_TREE,
    NODE_DOMAIN,
    canonical_json,
    edge_id,
    edge_leaf,
    inner,
    node_id,
    state_bytes,
    to_hex,
    world_root,
)

# JSON-safe leaves; floats only finite (the encoder refuses the others on purpose).
_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False)
)
_values = st.recursive(
    _leaf,
    lambda inner_: st.lists(inner_, max_size=4) | st.dictionaries(st.text(max_size=8), inner_, max_size=4),
    max_leaves=12,
)


def _nfc_distinct_keys(keys: list[str]) -> bool:
    """Keys that stay distinct after NFC (colliding keys are a separate, known issue)."""
    return len({unicodedata.normalize("NFC", k) for k in keys}) == len(keys)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.text(max_size=10), _values), max_size=8, unique_by=lambda kv: kv[0]).filter(
        lambda items: _nfc_distinct_keys([k for k, _ in items])
    ),
    st.randoms(use_true_random=False),
)
def test_same_dict_in_any_key_order_gives_the_same_bytes(items: list[tuple[str, object]], rnd: random.Random) -> None:
    shuffled = list(items)
    rnd.shuffle(shuffled)
    a, b = dict(items), dict(shuffled)
    assert canonical_json(a) == canonical_json(b)
    assert node_id(canonical_json(a)) == node_id(canonical_json(b))


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(alphabet=st.characters(max_codepoint=127), max_size=8), _values, max_size=5))
def test_canonical_text_is_compact_sorted_json_and_a_fixed_point(record: dict[str, object]) -> None:
    text = canonical_json(record)
    parsed = json.loads(text)
    assert canonical_json(parsed) == text  # re-encoding the decoded value gives the same bytes
    assert list(parsed) == sorted(parsed)
    assert text == unicodedata.normalize("NFC", text)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=30))
def test_nfc_and_nfd_spellings_hash_the_same(text: str) -> None:
    nfc, nfd = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
    assert canonical_json({"content": nfc}) == canonical_json({"content": nfd})


def test_nfc_normalisation_of_a_known_pair() -> None:
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    assert composed != decomposed
    assert canonical_json({"name": decomposed}) == canonical_json({"name": composed})
    assert canonical_json({"name": decomposed}).encode("utf-8") == '{"name":"café"}'.encode()


def test_canonical_form_is_utf8_not_escaped_and_without_whitespace() -> None:
    assert canonical_json({"b": [1, 2], "a": "ü"}) == '{"a":"ü","b":[1,2]}'


def _reference(record: dict[str, object]) -> str:
    """The plain encoder over an NFC-normalised copy: what canonical_json promises to equal."""

    def norm(value: object) -> object:
        if isinstance(value, str):
            return unicodedata.normalize("NFC", value)
        if isinstance(value, (list, tuple)):
            return [norm(v) for v in value]
        if isinstance(value, dict):
            return {unicodedata.normalize("NFC", k): norm(v) for k, v in value.items()}
        return value

    return json.dumps(norm(record), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _values, max_size=6))
def test_canonical_json_equals_the_plain_sorted_encoder(record: dict[str, object]) -> None:
    # keys that collide after NFC are refused (tested below); everything else matches the plain encoder
    if not all(_nfc_distinct_keys(list(d)) for d in _dicts_in(record)):
        return
    assert canonical_json(record) == _reference(record)


def _dicts_in(value: object) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    if isinstance(value, dict):
        found.append(value)
        for item in value.values():
            found.extend(_dicts_in(item))
    elif isinstance(value, (list, tuple)):
        for item in value:
            found.extend(_dicts_in(item))
    return found


def test_top_level_keys_are_sorted_after_nfc() -> None:
    # regression: keys were sorted before NFC, so NFD and NFC spellings of one record hashed differently
    nfd, nfc = {"e\u0301": 1, "f": 2}, {"\u00e9": 1, "f": 2}
    assert canonical_json(nfd) == canonical_json(nfc) == '{"f":2,"\u00e9":1}'


@pytest.mark.parametrize("where", ["top-level", "nested"])
def test_keys_that_collide_after_nfc_are_refused_not_silently_dropped(where: str) -> None:
    # regression: colliding keys were silently dropped (nested) or duplicated (top level)
    first = {"e\u0301": 1, "\u00e9": 2}
    second = {"\u00e9": 2, "e\u0301": 1}
    assert first == second
    wrap = (lambda d: d) if where == "top-level" else (lambda d: {"props": d})
    for record in (first, second):
        with pytest.raises(InvalidInput, match="normalisation"):
            canonical_json(wrap(record))


@pytest.mark.parametrize(
    "bad",
    [
        {"x": math.nan},
        {"x": math.inf},
        {"x": -math.inf},
        {"x": b"bytes"},
        {"x": {1, 2}},
        {"x": object()},
        {1: "int key"},
        {"x": {("tuple",): 1}},
        {"x": "lone \ud800 surrogate"},
        {"lone \udfff": 1},
        {"x": [1, math.nan]},
    ],
    ids=[
        "nan",
        "inf",
        "-inf",
        "bytes",
        "set",
        "object",
        "int-key",
        "tuple-key",
        "surrogate",
        "surrogate-key",
        "nested-nan",
    ],
)
def test_values_that_cannot_be_canonical_are_refused(bad: dict[object, object]) -> None:
    with pytest.raises(InvalidInput):
        canonical_json(bad)  # type: ignore[arg-type]


def test_tuples_encode_as_lists() -> None:
    assert canonical_json({"x": (1, "a")}) == canonical_json({"x": [1, "a"]})


def test_node_id_is_blake3_of_domain_and_body() -> None:
    body = canonical_json({"v": 1, "type": "Memory", "content": "hello"})
    assert node_id(body) == blake3(NODE_DOMAIN + body.encode("utf-8")).digest()
    assert len(node_id(body)) == 32
    assert edge_id(body) == blake3(EDGE_DOMAIN + body.encode("utf-8")).digest()


def test_domains_separate_node_edge_and_tree_hashes() -> None:
    body = canonical_json({"a": 1})
    ids = {node_id(body), edge_id(body)}
    leaf = b"\x00" * 32
    ids |= {edge_leaf(leaf, b""), inner(leaf, leaf), world_root(leaf, b"", EMPTY_TREE, 0)}
    assert len(ids) == 5


def test_known_answer_vectors_pin_the_encoding() -> None:
    # If these change, every id of every existing store changes: that needs a new format version.
    body = canonical_json(
        {
            "v": 1,
            "type": "Memory",
            "name": None,
            "content": "I live in Lisbon",
            "parent": "00" * 32,
            "props": {},
            "valid_at": "2024-05-01T09:30:00.000000Z",
        }
    )
    assert body == (
        '{"content":"I live in Lisbon","name":null,"parent":"'
        + "00" * 32
        + '","props":{},"type":"Memory","v":1,"valid_at":"2024-05-01T09:30:00.000000Z"}'
    )
    assert to_hex(node_id(body)) == blake3(b"worlddb/node/v1\n" + body.encode()).hexdigest()
    assert EMPTY_TREE == blake3(b"worlddb/empty/v1\n").digest()


def test_world_root_covers_every_argument() -> None:
    nid, top = b"\x01" * 32, b"\x02" * 32
    base = world_root(nid, b"s", top, 3)
    assert world_root(b"\x03" * 32, b"s", top, 3) != base
    assert world_root(nid, b"t", top, 3) != base
    assert world_root(nid, b"s", b"\x04" * 32, 3) != base
    assert world_root(nid, b"s", top, 4) != base


def test_inner_is_order_sensitive() -> None:
    a, b = b"\x01" * 32, b"\x02" * 32
    assert inner(a, b) != inner(b, a)


def test_state_bytes_distinguishes_none_from_fields() -> None:
    assert state_bytes("a", None) == b"a\x1f"
    assert state_bytes("a", None) != state_bytes(None, "a")
    assert state_bytes(1, 0) == b"1\x1f0"
