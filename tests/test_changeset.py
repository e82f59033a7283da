"""sync/changeset.py: the change-set file round-trips, streams, and refuses anything not whole and unaltered."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from blake3 import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

from worlddb_lite.errors import InvalidInput, StoreUnwritable
from worlddb_lite.sync import changeset
from worlddb_lite.sync.changeset import ChangeSet, encode, read, write

HEADER: dict[str, Any] = {"from": "phone", "since": {"laptop": 41}, "roots": ["ab" * 32]}
RECORDS: list[dict[str, Any]] = [
    {"kind": "node", "id": "01" * 32, "body": {"content": "Ana moved to Lisbon", "tags": ["move", "é"]}},
    {"kind": "edge", "src": "01" * 32, "dst": "02" * 32, "weight": 0.25, "open": None, "ok": True},
    {"kind": "tombstone", "id": "03" * 32, "text": "line\u2028separator \x85 next-line \x1c file-sep"},
]


def _data(header: dict[str, Any] | None = None, records: list[dict[str, Any]] | None = None) -> bytes:
    return b"".join(encode(HEADER if header is None else header, RECORDS if records is None else records))


def _lines(data: bytes) -> list[bytes]:
    return zlib.decompress(data).splitlines(keepends=True)  # bytes.splitlines: only \n \r and \r\n


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def _sealed(lines: list[bytes]) -> bytes:
    """Lines made by hand, closed with a correct end line, compressed: only the check under test can refuse."""
    body = b"".join(lines)
    end = {"kind": "end", "records": len(lines) - 1, "digest": blake3(body).hexdigest()}
    return zlib.compress(body + _line(end))


def _header_line(**fields: Any) -> bytes:
    return _line({"kind": "header", "format": "worlddb-changes", "version": 1, **fields})


def _refused(data: bytes, *words: str) -> str:
    with pytest.raises(InvalidInput) as caught:
        read(data)
    message = caught.value.message  # without the hint's "(next: ...)"
    assert message.endswith("; nothing was applied")
    for word in words:
        assert word in message
    return message


# ---- round trip and the format on the wire


def test_round_trip_keeps_header_fields_records_and_a_stable_digest(tmp_path: Path) -> None:
    data = _data()
    cs = read(data)
    assert cs == ChangeSet(header=HEADER, records=RECORDS, digest=cs.digest)
    assert _data() == data  # the same input gives the same bytes and digest
    assert read(_data()).digest == cs.digest
    assert read(_data(records=RECORDS[:2])).digest != cs.digest
    target = io.BytesIO()
    summary = write(target, HEADER, iter(RECORDS))
    assert summary == {"records": 3, "bytes": len(data), "digest": cs.digest}
    assert target.getvalue() == data
    path = tmp_path / "changes.bin"
    assert write(path, HEADER, RECORDS) == summary
    assert read(path) == read(str(path)) == read(io.BytesIO(data)) == cs


def test_the_wire_format_is_compact_sorted_json_lines_with_a_digest_of_everything_before_the_end() -> None:
    lines = _lines(_data())
    assert lines[0] == _header_line(**HEADER)
    assert lines[1:-1] == [_line(r) for r in RECORDS]
    assert "é".encode() in lines[1]  # ensure_ascii=False: text stays UTF-8
    assert json.loads(lines[-1]) == {"kind": "end", "records": 3, "digest": blake3(b"".join(lines[:-1])).hexdigest()}


def test_an_empty_set_round_trips() -> None:
    assert read(_data({}, [])) == ChangeSet(header={}, records=[], digest=blake3(_header_line()).hexdigest())


# ---- streaming


def test_encode_streams_records_and_yields_many_chunks() -> None:
    taken = 0

    def records() -> Iterator[dict[str, Any]]:
        nonlocal taken
        for i in range(20_000):
            taken += 1
            yield {"kind": "node", "id": f"{i:064x}", "text": f"memory {i} " + os.urandom(8).hex()}

    chunks = encode({}, records())
    first = next(chunks) + next(chunks)  # the zlib header, then the first block of records
    assert taken < 20_000  # that block left before every record was read
    rest = list(chunks)
    assert len(rest) >= 2 and taken == 20_000
    assert len(read(first + b"".join(rest)).records) == 20_000


def test_write_to_a_path_renames_into_place_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "changes.bin"
    summary = write(path, {}, ({"kind": "node", "n": i} for i in range(5000)))
    assert sorted(os.listdir(tmp_path)) == ["changes.bin"]
    assert summary["bytes"] == path.stat().st_size and summary["records"] == 5000
    assert len(read(path).records) == 5000


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "changes.bin"
    path.write_bytes(b"old")

    def records() -> Iterator[dict[str, Any]]:
        yield from ({"kind": "node", "n": i} for i in range(5000))
        raise RuntimeError("the store went away")

    with pytest.raises(RuntimeError):
        write(path, {}, records())
    assert os.listdir(tmp_path) == ["changes.bin"] and path.read_bytes() == b"old"
    with pytest.raises(ValueError, match="text kind"):
        write(path, {}, [{"kind": "node"}, {"kind": "end"}])
    assert os.listdir(tmp_path) == ["changes.bin"] and path.read_bytes() == b"old"


def test_a_written_file_has_ordinary_permissions_and_a_store_error_passes_through(tmp_path: Path) -> None:
    path = tmp_path / "changes.bin"
    write(path, {}, RECORDS)
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # as open() would make it, not a temp file's 0600

    def records() -> Iterator[dict[str, Any]]:
        yield RECORDS[0]
        raise StoreUnwritable("the disk is full")  # an OSError too: not to be mistaken for the target's

    with pytest.raises(StoreUnwritable):
        write(tmp_path / "other.bin", {}, records())
    assert os.listdir(tmp_path) == ["changes.bin"]


def test_writing_into_a_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot write the change set"):
        write(tmp_path / "nowhere" / "changes.bin", {}, RECORDS)


# ---- refusals


def test_every_truncation_is_refused_never_a_partial_result() -> None:
    data = _data(records=[{"kind": "node", "n": i, "text": os.urandom(16).hex()} for i in range(300)])
    for cut in {1, 2, 5, 100, len(data) // 2, len(data) - 5, len(data) - 4, len(data) - 1}:
        _refused(data[:cut], "truncated")
    _refused(zlib.compress(_header_line()), "no end line")
    _refused(zlib.compress(_header_line() + b'{"kind":"node"'), "truncated", "line 2")


def test_a_flipped_byte_anywhere_in_the_compressed_data_is_refused() -> None:
    data = _data()
    original = read(data)
    for at in range(len(data)):
        damaged = bytearray(data)
        damaged[at] ^= 0xFF
        _refused(bytes(damaged))
        for bit in (0x01, 0x80):
            damaged = bytearray(data)
            damaged[at] ^= bit
            # a few bits are ones deflate ignores (the padding after the last block): those may read,
            # but only ever as the very same change set
            with contextlib.suppress(InvalidInput):
                assert read(bytes(damaged)) == original


def test_an_altered_record_recompressed_with_the_end_line_kept_is_refused() -> None:
    lines = _lines(_data())
    lines[1] = lines[1].replace(b"Lisbon", b"Madrid")
    _refused(zlib.compress(b"".join(lines)), "digest", "altered or damaged")
    lines = _lines(_data())
    lines[0] = lines[0].replace(b"phone", b"thief")  # the header is covered too
    _refused(zlib.compress(b"".join(lines)), "digest")


def test_a_dropped_record_is_refused() -> None:
    lines = _lines(_data())
    del lines[2]
    _refused(zlib.compress(b"".join(lines)), "counts 3 records but 2", "altered or damaged")
    lines = _lines(_data())
    end = json.loads(lines.pop())
    del lines[2]
    lines.append(_line({**end, "records": 2}))  # the count fixed up: the digest still catches it
    _refused(zlib.compress(b"".join(lines)), "digest")


def test_anything_after_the_end_is_refused() -> None:
    data = _data()
    _refused(data + b"x", "follow")
    _refused(data + data, "follow")  # a second zlib stream
    _refused(zlib.compress(zlib.decompress(data) + _line({"kind": "node"})), "follows the end line")
    _refused(zlib.compress(zlib.decompress(data) + b"junk"), "follow the end line")


def test_a_stream_of_another_format_or_version_is_refused() -> None:
    _refused(_sealed([_line({"kind": "header", "format": "other", "version": 1})]), "not a change set", "line 1")
    _refused(_sealed([_line({"kind": "node", "format": "worlddb-changes", "version": 1})]), "not a change set")
    _refused(_sealed([_line({"kind": "end", "records": 0, "digest": blake3(b"").hexdigest()})]), "not a change set")
    message = _refused(_sealed([_header_line(version=2)]), "version 2", "reads version 1")
    assert "upgrade" in message
    _refused(_sealed([_line({"kind": "header", "format": "worlddb-changes", "version": True})]), "reads version 1")
    _refused(_sealed([_line({"kind": "header", "format": "worlddb-changes"})]), "version None")
    _refused(_sealed([_line({"kind": "header", "format": "worlddb-changes", "version": 1.0})]), "version 1.0")


def test_empty_input_and_data_that_is_not_zlib_are_refused(tmp_path: Path) -> None:
    _refused(b"", "empty")
    _refused(zlib.compress(b""), "no lines")
    _refused(b"hello, this is plain text\n", "not zlib")
    _refused(gzip.compress(_lines(_data())[0]), "not zlib")
    _refused(b"\x00" * 64, "not zlib")
    with pytest.raises(InvalidInput, match="cannot read the change set"):
        read(tmp_path / "missing.bin")


def test_lines_that_are_not_json_objects_or_records_without_a_text_kind_are_refused() -> None:
    head = _header_line()
    _refused(_sealed([head, b"[1, 2]\n"]), "line 2", "list, not an object")
    _refused(_sealed([head, b"{not json}\n"]), "line 2", "not UTF-8 JSON")
    _refused(_sealed([head, b'{"kind": "node", "x": NaN}\n']), "line 2", "not UTF-8 JSON")
    _refused(_sealed([head, b'{"kind": "caf\xe9"}\n']), "line 2", "not UTF-8 JSON")  # Latin-1, not UTF-8
    _refused(_sealed([head, b"[" * 100_000 + b"\n"]), "line 2")  # too deep to decode
    _refused(_sealed([head, _line({"x": 1})]), "line 2", "kind")
    _refused(_sealed([head, _line({"kind": 7})]), "line 2", "kind")
    _refused(_sealed([head, _header_line()]), "line 2", "header")


def test_a_decompression_bomb_is_refused_at_max_bytes() -> None:
    packer = zlib.compressobj(9)
    bomb = packer.compress(_header_line()) + b"".join(packer.compress(b" " * (1 << 20)) for _ in range(64))
    bomb += packer.flush()
    assert len(bomb) < 100_000  # 64 MiB in well under 100 kB
    _refused_bomb = pytest.raises(InvalidInput, match="decompression bomb")
    with _refused_bomb:
        read(bomb, max_bytes=1 << 20)
    data = _data()
    size = len(zlib.decompress(data))
    assert read(data, max_bytes=size).records == RECORDS  # the bound is exact
    with pytest.raises(InvalidInput, match="past 1 bytes"):
        read(data, max_bytes=1)
    with pytest.raises(InvalidInput, match=f"past {size - 1} bytes"):
        read(data, max_bytes=size - 1)
    assert changeset.DEFAULT_MAX >= 1 << 28


# ---- a caller's mistakes are ValueErrors, raised before anything is written


@pytest.mark.parametrize("record", [{"kind": "end"}, {"kind": "header"}, {"text": "no kind"}, {"kind": 3}])
def test_a_record_without_an_ordinary_text_kind_is_a_value_error(record: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="text kind other than header or end"):
        _data(records=[RECORDS[0], record])


@pytest.mark.parametrize("field", ["format", "version", "kind"])
def test_a_header_that_sets_a_format_field_is_a_value_error(field: str) -> None:
    with pytest.raises(ValueError, match=f"sets {field}"):
        encode({field: "mine", "ok": 1}, RECORDS)  # at once, not at the first chunk
    with pytest.raises(ValueError):
        write(io.BytesIO(), {field: "mine"}, RECORDS)


def test_values_that_json_cannot_hold_are_a_value_error() -> None:
    with pytest.raises(ValueError):
        _data(records=[{"kind": "node", "x": float("nan")}])


# ---- the property: any small JSON-able records round-trip, and no truncation ever reads

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
_records = st.lists(
    st.builds(
        lambda kind, rest: {**rest, "kind": kind},
        st.text(min_size=1, max_size=10).filter(lambda k: k not in ("header", "end")),
        st.dictionaries(st.text(max_size=8), _values, max_size=5),
    ),
    max_size=12,
)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.text(max_size=8).filter(lambda k: k not in ("kind", "format", "version")), _values, max_size=4),
    _records,
    st.data(),
)
def test_any_small_records_round_trip_and_any_truncation_is_refused(
    header: dict[str, Any], records: list[dict[str, Any]], data: st.DataObject
) -> None:
    encoded = b"".join(encode(header, records))
    cs = read(encoded)
    assert cs.header == header and cs.records == records
    cut = data.draw(st.integers(0, len(encoded) - 1), label="cut")
    with pytest.raises(InvalidInput, match="nothing was applied$"):
        read(encoded[:cut])
