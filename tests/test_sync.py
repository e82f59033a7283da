"""Sync between store files (sync/replicas.py): convergence, the merge lattice, purges that follow, refusals."""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import open_device as _open  # each replica's clock runs on its own, as on separate devices
from tests.conftest import table_digest
from worlddb_lite import WorldDB
from worlddb_lite.consolidate import sweep as sweep_module
from worlddb_lite.errors import InvalidInput
from worlddb_lite.sync import changeset
from worlddb_lite.sync.replicas import SWEPT_UPTO

QUERIES = ["tea", "Lisbon", "sister", "chess", "running"]


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[WorldDB, WorldDB]]:
    a = _open(tmp_path / "a.db")
    a.write("Ana likes green tea", scope="ana")
    a.write("Ana moved to Lisbon", scope="ana")
    a.replica(tmp_path / "b.db")
    b = _open(tmp_path / "b.db", offset_s=7)
    yield a, b
    a.close()
    b.close()


def _restore(db: WorldDB, backup: Path, offset_s: int) -> WorldDB:
    """The disk died: the store's copy at ``backup`` comes back in its place."""
    path = Path(db.path)
    db.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    backup.rename(path)
    return _open(path, offset_s)


def _answers(db: WorldDB) -> list[list[str]]:
    return [[hit.node.id for hit in db.recall(q, k=5).hits] for q in QUERIES]


def _converged(a: WorldDB, b: WorldDB) -> None:
    assert a.root() == b.root()
    assert {n.id for n in a.nodes()} == {n.id for n in b.nodes()}
    assert _answers(a) == _answers(b)
    for db in (a, b):
        report = db.verify(deep=True)
        assert report.ok, report.violations


def test_two_replicas_that_wrote_apart_converge_both_ways(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    a.write("Ana runs on Sundays", scope="ana")
    b.write("Ana's sister is Eva", scope="ana")
    b.write("Bob plays chess", scope="bob")
    assert a.root() != b.root()
    result = a.sync(b)
    assert result["converged"]
    assert result["pull"]["nodes"]["added"] >= 2 and result["push"]["nodes"]["added"] >= 1
    _converged(a, b)
    echo = a.sync(b)  # what each adopted from the other stays home: nothing moves
    assert echo["pull"]["records"] == 0 and echo["push"]["records"] == 0
    quiet = a.sync(b)
    assert quiet["pull"]["records"] == 0 and quiet["push"]["records"] == 0


def test_the_same_memory_written_on_both_sides_merges_to_the_earliest(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    a.write("Eva visits in May", scope="ana", valid_at="2024-05-01")  # a's clock is behind b's: a learned it first
    b.write("Eva visits in May", scope="ana", valid_at="2024-05-01")  # the same memory: the same id
    late = b.read(b.search("Eva visits", k=1)[0][0].id)
    a.sync(b)
    _converged(a, b)
    both = [db.read(late.id) for db in (a, b)]
    assert both[0].created_at == both[1].created_at < late.created_at


def test_closes_merge_as_a_lattice_and_never_reopen(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    first = a.search("green tea", k=1)[0][0].id
    second = a.search("Lisbon", k=1)[0][0].id
    a.retire(first, at="2025-02-01")
    b.retire(first, at="2025-01-15")  # the earlier close wins on both sides
    b.retract(second)
    a.sync(b)
    _converged(a, b)
    for db in (a, b):
        assert db.read(first).invalid_at == "2025-01-15T00:00:00.000000Z"
        assert db.read(second).expired_at is not None


def test_apply_order_does_not_matter_for_three_replicas(tmp_path: Path) -> None:
    a = _open(tmp_path / "a.db")
    a.write("Ana likes green tea", scope="ana")
    a.replica(tmp_path / "b.db")
    a.replica(tmp_path / "c.db")
    b, c = _open(tmp_path / "b.db", 3), _open(tmp_path / "c.db", 5)
    a.write("Ana runs", scope="ana")
    b.write("Ana swims", scope="ana")
    c.write("Ana climbs", scope="ana")
    c.write("Cleo is Ana's cat", scope="pets")
    b.sync(c)
    a.sync(c)
    b.sync(a)
    c.sync(b)
    assert a.root() == b.root() == c.root()
    for db in (a, b, c):
        assert db.verify(deep=True).ok
    assert _answers(a) == _answers(b) == _answers(c)
    for db in (a, b, c):
        db.close()


def test_a_purge_follows_and_the_text_never_comes_back(pair: tuple[WorldDB, WorldDB], tmp_path: Path) -> None:
    a, b = pair
    secret = a.write("My bank PIN is pin4711", scope="ana")  # not hex: no id or tip in the files can hold it
    a.replica(tmp_path / "c.db")  # c holds the secret and will not hear of the purge from a
    c = _open(tmp_path / "c.db", 11)
    a.sync(b)
    b.purge(secret)
    a.sync(b)  # the tombstone reaches a
    c.sync(a)  # c still had the text: it is erased there, and a does not get it back
    for db in (a, b, c):
        assert db.read(secret).purged
        assert not db.search("pin4711", k=3)
        assert db.verify(deep=True).ok
        db.checkpoint()
    assert a.root() == b.root() == c.root()
    c.close()
    for name in ("a.db", "b.db", "c.db"):
        for path in tmp_path.glob(name + "*"):
            assert b"pin4711" not in path.read_bytes(), path


def test_a_scope_filter_leaves_other_scopes_at_home(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    a.write("The quarterly report is due", scope="work")
    a.write("Ana's birthday is in June", scope="ana")
    result = b.sync(a, scopes=["ana"])
    assert "converged" not in result
    assert b.search("birthday", k=1) and not b.search("quarterly", k=1)
    assert b.root(a.scope("ana")) == a.root(a.scope("ana"))
    assert b.verify(deep=True).ok


@pytest.mark.parametrize("damage", ["truncate", "flip", "altered"])
def test_a_damaged_change_set_is_refused_whole(pair: tuple[WorldDB, WorldDB], damage: str) -> None:
    a, b = pair
    a.write("Ana runs on Sundays", scope="ana")
    buffer = io.BytesIO()
    a.changes(buffer, since=b.sync_token())
    data = buffer.getvalue()
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data = data[:40] + bytes([data[40] ^ 0xFF]) + data[41:]
    else:  # re-compressed with one record changed and the end line kept: the digest disagrees
        lines = zlib.decompress(data).splitlines(keepends=True)
        body = b"".join(lines[1:-1])
        assert b"Sundays" in body
        data = zlib.compress(lines[0] + body.replace(b"Sundays", b"Mondays") + lines[-1])
    before = table_digest(b)
    # altered: the changed record is refused as it is read (its body no longer hashes to its id), before the digest
    with pytest.raises(InvalidInput, match="nothing was (applied|written)"):
        b.apply_changes(data)
    assert table_digest(b) == before


def test_a_change_set_travels_as_a_file(pair: tuple[WorldDB, WorldDB], tmp_path: Path) -> None:
    a, b = pair
    a.write("Ana runs on Sundays", scope="ana")
    written = a.changes(tmp_path / "changes.bin", since=b.sync_token())
    assert written["records"] > 0
    cs = changeset.read(tmp_path / "changes.bin")
    assert cs.header["store_id"] == a.store_id and cs.header["since"] > 0
    summary = b.apply_changes(tmp_path / "changes.bin")
    assert summary["roots_agree"] and b.root() == a.root()
    assert b.apply_changes(tmp_path / "changes.bin")["nodes"]["added"] == 0  # applying twice changes nothing


def test_refusals_name_the_way_out(pair: tuple[WorldDB, WorldDB], tmp_path: Path) -> None:
    a, b = pair
    buffer = io.BytesIO()
    a.changes(buffer)
    with pytest.raises(InvalidInput, match="this store itself"):
        a.apply_changes(buffer.getvalue())
    with pytest.raises(InvalidInput, match="own"):
        a.changes(io.BytesIO(), since=a.sync_token())
    with pytest.raises(InvalidInput, match="not a sync token"):
        a.changes(io.BytesIO(), since="nonsense")
    a.checkpoint()  # the whole store in the main file: a plain copy of it is a store with a's own id
    (tmp_path / "copy.db").write_bytes(Path(a.path).read_bytes())
    with pytest.raises(InvalidInput, match="replica"):
        a.sync(tmp_path / "copy.db")


def _proposed_on_both(a: WorldDB, b: WorldDB) -> None:
    """A same_as proposal between two entities of a, pending on both replicas."""
    x = a.write("Dana", scope="ana", type="Entity", name="Dana")
    y = a.write("Dana S.", scope="ana", type="Entity", name="Dana S.")
    a.link(x, y, "same_as")
    a.sync(b)


def test_conflicting_merge_decisions_are_reported_not_guessed(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    _proposed_on_both(a, b)
    (pid_a,) = [p.pid for p in a.merge_proposals()]
    (pid_b,) = [p.pid for p in b.merge_proposals()]
    a.accept_merge(pid_a)
    b.reject_merge(pid_b)
    result = a.sync(b)
    assert result["pull"]["conflicts"] == 1 and result["push"]["conflicts"] == 1
    assert a.merge_proposal(pid_a).status.value == "accepted"
    assert b.merge_proposal(pid_b).status.value == "rejected"


def test_members_keep_their_written_order_and_verify_checks_it(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    for i in range(5):
        a.write(f"note {i}", scope="ana")
    conn = a._conn
    slots = [row[0] for row in conn.execute("select slot from node order by nid")][-5:]
    assert slots == sorted(slots)
    conn.execute("drop trigger node_blob_immutable")  # a foreign writer swaps two members' places
    last = conn.execute("select nid, slot from node order by nid desc limit 2").fetchall()
    conn.execute("update node set slot = ? where nid = ?", (last[1][1], last[0][0]))
    conn.execute("update node set slot = ? where nid = ?", (last[0][1], last[1][0]))
    problems = [v.detail for v in a.verify().violations]
    assert any("(created_at, ord, id) sequence" in p for p in problems)


def test_the_change_log_records_every_kind_of_write(pair: tuple[WorldDB, WorldDB]) -> None:
    a, _ = pair
    before = {k for (k,) in a.sql("select distinct kind from change_log")}
    x = a.write("Dana", scope="ana", type="Entity", name="Dana")
    a.add_alias(x, "my manager")
    y = a.write("Dana S.", scope="ana", type="Entity", name="Dana S.")
    a.link(x, y, "same_as")
    a.purge(y)
    kinds = {k for (k,) in a.sql("select distinct kind from change_log")}
    assert {"node", "edge"} <= before
    assert {"alias", "proposal", "tombstone"} <= kinds
    assert json.loads(json.dumps(a.sync_token().split(",")))[0].startswith(a.store_id)


def test_values_of_one_slot_learned_apart_are_flagged_after_the_sync(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    a.write("I live in Porto", scope="ana", valid_at="2025-03-01")
    b.write("I live in Berlin", scope="ana", valid_at="2025-03-01")
    result = a.sync(b)
    assert result["pull"]["swept"] >= 1 and result["converged"]
    for db in (a, b):
        (row,) = db.sql("select a_content, b_content from open_contradiction")
        assert {"Porto" in text for text in row if text} == {True, False}
    _converged(a, b)


def test_a_failed_write_of_a_change_set_leaves_the_store_writable(pair: tuple[WorldDB, WorldDB]) -> None:
    a, _ = pair

    class Full(io.RawIOBase):
        def write(self, data: object) -> int:
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        a.changes(Full())
    a.write("still writable", scope="ana")  # the change set's read snapshot did not outlive the failure


def test_an_accept_and_a_reject_of_one_merge_are_listed_and_both_verify(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    _proposed_on_both(a, b)
    a.accept_merge(a.merge_proposals()[0].pid)
    b.reject_merge(b.merge_proposals()[0].pid)
    a.sync(b)
    for db, here, elsewhere in ((a, "accepted", "rejected"), (b, "rejected", "accepted")):
        rows = db.sql("select decided_here, decided_elsewhere from merge_conflict")
        assert rows == [(here, elsewhere)]
        assert db.verify(deep=True).ok
    assert a.root() == b.root()


def test_one_memory_written_in_two_commits_takes_its_first_place(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    with a.batch():  # a writes two memories in one commit (their ords 0 and 1); b writes the second alone
        a.write("Ana likes tea", scope="ana", extractor=None, valid_at="2024-05-01")
        a.write("Ana runs daily", scope="ana", extractor=None, valid_at="2024-05-01")
    b.write("Ana runs daily", scope="ana", extractor=None, valid_at="2024-05-01")
    assert a.sync(b)["converged"]
    _converged(a, b)


def test_a_store_restored_from_an_older_backup_gets_back_what_it_lost(
    pair: tuple[WorldDB, WorldDB], tmp_path: Path
) -> None:
    a, b = pair
    a.backup(tmp_path / "a-backup.db")
    lost = [a.write("Ana moved to Lisbon", scope="ana"), a.write("Ana runs daily", scope="ana")]
    a.sync(b)
    a = _restore(a, tmp_path / "a-backup.db", 100)  # the disk died: last night's copy comes back
    new = [a.write(f"note number {i} about Ana", scope="ana") for i in range(5)]  # numbers handed out again
    assert a.sync(b)["converged"]
    held = {n.id for n in a.nodes()}, {n.id for n in b.nodes()}
    assert set(lost) <= held[0] and set(new) <= held[1]
    _converged(a, b)
    a.close()


def test_a_purged_node_takes_no_alias_back(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    x = a.write("Teatime Tom", scope="ana", type="Entity", name="Teatime Tom")
    a.sync(b)
    a.add_alias(x, "Teatime")  # said on a, which has not heard of b's purge
    b.purge(x)
    a.sync(b)
    for db in (a, b):
        assert db.read(x).purged and not db.lookup_alias("Teatime")
    _converged(a, b)


def test_a_file_lifted_from_version_7_syncs_only_with_its_replicas(tmp_path: Path) -> None:
    fixture = Path(__file__).parent / "fixtures" / "store-v7.db"
    (tmp_path / "old.db").write_bytes(fixture.read_bytes())
    with WorldDB(tmp_path / "old.db", create=False) as old, WorldDB(tmp_path / "fresh.db") as fresh:
        assert old.migrated_from == 7
        old.replica(tmp_path / "copy.db")
        with WorldDB(tmp_path / "copy.db", create=False) as copy:
            copy.write("written on the copy", scope="ana")
            result = old.sync(copy)
            assert result["converged"]
            assert result["pull"]["records"] < 10  # the difference, not the lifted store's rows again
        with pytest.raises(InvalidInput, match="different orders"):
            fresh.sync(old)


def test_a_restored_sender_that_changes_the_same_row_again_is_still_caught(
    pair: tuple[WorldDB, WorldDB], tmp_path: Path
) -> None:
    a, b = pair
    x = b.write("Ana likes chess", scope="ana")
    b.backup(tmp_path / "b-backup.db")
    b.write("before the restore", scope="ana")
    b.retire(x)  # this change's number comes again after the restore, for the same row
    a.sync(b)
    b = _restore(b, tmp_path / "b-backup.db", 100)
    after = b.write("after the restore", scope="ana")
    b.retire(x)
    assert a.sync(b)["converged"]
    assert after in {n.id for n in a.nodes()}
    _converged(a, b)
    b.close()


def test_a_scoped_sync_leaves_a_proposal_half_outside_the_scopes(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    x = a.write("Dana", scope="work", type="Entity", name="Dana")
    y = a.write("Dana S.", scope="ana", type="Entity", name="Dana S.")
    a.link(x, y, "same_as")
    result = b.sync(a, push=False, scopes=["ana"])  # refused whole before: the pair's other node was not sent
    assert result["pull"]["nodes"]["added"] >= 1 and not b.merge_proposals()
    assert b.sync(a)["converged"] and len(b.merge_proposals()) == 1


def test_an_alias_time_merged_on_one_replica_reaches_a_third(pair: tuple[WorldDB, WorldDB], tmp_path: Path) -> None:
    a, b = pair
    x = a.write("Tom", scope="ana", type="Entity", name="Tom")
    a.sync(b)
    b.add_alias(x, "Teatime")
    b.replica(tmp_path / "c.db")
    c = _open(tmp_path / "c.db", 40)
    a.add_alias(x, "Teatime")  # a's clock is behind b's: its time is the earlier
    a.sync(b)
    c.sync(b)
    times = [db.sql("select created_at from alias where norm = 'teatime'") for db in (a, b, c)]
    assert times[0] == times[1] == times[2]
    c.close()


def _set(sender: WorldDB, receiver: WorldDB) -> bytes:
    buffer = io.BytesIO()
    sender.changes(buffer, since=receiver.sync_token())
    return buffer.getvalue()


def test_rows_adopted_from_a_replica_are_not_sent_back_to_it(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    mine = a.write("Ana runs on Sundays", scope="ana")
    theirs = b.write("Bob plays chess", scope="bob")
    a.apply_changes(_set(b, a))
    back = _set(a, b)
    sent = {record.get("id") for record in changeset.read(back).records}
    assert mine in sent and theirs not in sent
    assert changeset.read(back).header["echo"] is not None  # names b's change a has seen, for b to check
    assert b.apply_changes(back)["resend"] is False
    _converged(a, b)


def test_a_receiver_restored_from_an_older_copy_asks_for_everything_once(
    pair: tuple[WorldDB, WorldDB], tmp_path: Path
) -> None:
    a, b = pair
    b.backup(tmp_path / "b-backup.db")
    lost = b.write("Ana's sister is Eva", scope="ana")
    a.sync(b)  # a holds it now, adopted from b
    b = _restore(b, tmp_path / "b-backup.db", 100)
    b.write("written after the restore", scope="ana")
    first = b.apply_changes(_set(a, b))  # a left out what it had from b: b no longer holds all of it
    assert first["resend"] is True
    assert lost not in {n.id for n in b.nodes()}
    again = b.apply_changes(_set(a, b))
    assert again["resend"] is False and lost in {n.id for n in b.nodes()}
    assert a.sync(b)["converged"]
    _converged(a, b)
    b.close()


def test_a_late_change_set_made_before_a_restore_leaves_no_gap(pair: tuple[WorldDB, WorldDB], tmp_path: Path) -> None:
    a, b = pair
    a.sync(b)
    b.backup(tmp_path / "b-backup.db")
    middle = a.write("Ana moved to Porto", scope="ana")
    a.sync(b)
    a.write("Ana plays chess", scope="ana")
    late = _set(a, b)  # made for b's newer token, delivered after b lost the middle change
    b = _restore(b, tmp_path / "b-backup.db", 100)
    b.apply_changes(late)
    assert middle not in {n.id for n in b.nodes()}
    assert a.sync(b)["converged"]  # b still counts a's changes from before the middle one as seen
    assert middle in {n.id for n in b.nodes()}
    _converged(a, b)
    b.close()


def test_a_late_set_from_before_the_senders_restore_goes_back_to_it(
    pair: tuple[WorldDB, WorldDB], tmp_path: Path
) -> None:
    a, b = pair
    b.write("written on b", scope="ana")
    a.sync(b)
    b.backup(tmp_path / "b-backup.db")
    only = b.write("only b wrote this, then its disk died", scope="ana")
    secret = b.write("the door code is zebra", scope="ana")
    b.purge(secret)
    late = _set(b, a)  # travels slowly
    b = _restore(b, tmp_path / "b-backup.db", 100)  # b loses both, and holds the secret's text again
    for i in range(4):
        b.write(f"b after the restore {i}", scope="ana")
    assert a.sync(b)["converged"]
    a.apply_changes(late)  # behind a's count of b: its rows are not b's to keep home
    assert a.sync(b)["converged"]
    assert b.read(only).id == only and b.read(secret).purged
    _converged(a, b)
    b.close()
    assert b"zebra" not in (tmp_path / "b.db").read_bytes()


def test_rows_of_a_gap_set_go_back_to_a_sender_restored_later(pair: tuple[WorldDB, WorldDB], tmp_path: Path) -> None:
    a, b = pair
    b.write("b one", scope="ana")
    a.sync(b)
    a.backup(tmp_path / "a-backup.db")
    b.backup(tmp_path / "b-backup.db")
    b.write("b two", scope="ana")
    a.sync(b, push=False)
    x = b.write("x written on b", scope="ana")
    late = _set(b, a)  # for a's count after "b two"
    a = _restore(a, tmp_path / "a-backup.db", 50)
    assert not a.apply_changes(late)["resend"]
    b = _restore(b, tmp_path / "b-backup.db", 100)  # b loses "b two" and x
    for i in range(4):
        b.write(f"b after the restore {i}", scope="ana")
    assert a.sync(b)["converged"]
    assert b.read(x).id == x
    _converged(a, b)
    a.close()
    b.close()


def test_a_value_arriving_for_an_amended_fact_is_flagged(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    a.write("I live in Porto", scope="ana", valid_at="2025-03-01")
    (fact,) = [n for n in a.nodes(type="Fact", as_of="2025-06-01") if n.props.get("value") == "Porto"]
    a.amend(fact.id, "I live in Porto, in the old town", valid_at="2025-03-01")  # the slot's alias goes along
    b.write("I live in Berlin", scope="ana", valid_at="2025-03-01")
    assert a.sync(b, push=False)["pull"]["swept"] == 1


def test_an_apply_whose_sweep_did_not_run_is_swept_by_the_next(
    pair: tuple[WorldDB, WorldDB], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    a.write("I live in Porto", scope="ana", valid_at="2025-03-01")
    b.write("I live in Berlin", scope="ana", valid_at="2025-03-01")
    assert a.apply_changes(_set(b, a), sweep=False)["swept"] == 0
    b.write("Bob plays chess", scope="bob")
    with monkeypatch.context() as patched:  # the process dies after the apply committed, before its sweep
        patched.setattr(sweep_module, "sweep", lambda *args, **kwargs: (_ for _ in ()).throw(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            a.apply_changes(_set(b, a))
    b.write("I go running every morning", scope="ana")
    assert a.apply_changes(_set(b, a))["swept"] == 1  # the conflict the first apply brought
    assert not a.sql("select 1 from meta where key = ?", (SWEPT_UPTO,))  # all swept
    a.write("I work at Acme", scope="ana")  # written here: the write path handled it, the next sweep skips it
    assert a.apply_changes(_set(b, a))["swept"] == 0
    assert a.consolidate(only="sweep")["sweep"] == 0


def test_a_restored_replica_learns_of_a_merge_decided_both_ways(tmp_path: Path) -> None:
    a = _open(tmp_path / "a.db")
    dana = a.write("Dana", scope="ana", type="Entity", name="Dana")
    a.link(dana, a.write("Dana S.", scope="ana", type="Entity", name="Dana S."), "same_as")  # pending
    a.replica(tmp_path / "b.db")
    b = _open(tmp_path / "b.db", 7)
    a.backup(tmp_path / "a-backup.db")
    a.accept_merge(a.merge_proposals()[0].pid)
    b.reject_merge(b.merge_proposals()[0].pid)
    assert a.sync(b, pull=False)["push"]["conflicts"] == 1  # b keeps its rejection and holds a's same_as edges
    a = _restore(a, tmp_path / "a-backup.db", 100)  # a forgot its acceptance
    assert a.sync(b)["converged"]
    (proposal,) = a.merge_proposals(None)
    assert proposal.status.value == "rejected"
    assert a.sql("select decided_elsewhere from merge_conflict") == [("accepted",)]
    _converged(a, b)
    a.close()
    b.close()


def test_a_merge_decided_both_ways_stops_moving_between_three_replicas(tmp_path: Path) -> None:
    a = _open(tmp_path / "a.db")
    dana = a.write("Dana", scope="ana", type="Entity", name="Dana")
    a.link(dana, a.write("Dana S.", scope="ana", type="Entity", name="Dana S."), "same_as")
    for name in ("b", "c"):
        a.replica(tmp_path / f"{name}.db")
    b, c = _open(tmp_path / "b.db", 7), _open(tmp_path / "c.db", 11)
    a.reject_merge(a.merge_proposals()[0].pid)
    b.accept_merge(b.merge_proposals()[0].pid)
    ring = [(a, b), (b, c), (c, a)]
    for _ in range(4):  # noting the conflict again where it is noted changes nothing, so nothing travels back
        moved = [x.sync(y) for x, y in ring]
        if all(m["pull"]["records"] == m["push"]["records"] == 0 for m in moved):
            break
    else:
        raise AssertionError("records still move after four rounds")
    for db in (a, b, c):
        assert db.verify(deep=True).ok
        db.close()


def test_the_link_to_an_older_note_a_newer_memory_may_update_travels(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    newer = b.write("I switched from green tea to coffee", scope="ana")
    older = next(n.id for n in b.nodes(type="Memory") if n.content == "Ana likes green tea")
    assert _may_update(b) == [(newer, older)]  # written beside the memory, by System 2 on b
    assert a.sync(b)["converged"]
    assert _may_update(a) == [(newer, older)]  # and received by a as any edge is
    _converged(a, b)


def _may_update(db: WorldDB) -> list[tuple[str, str]]:
    return [
        (bytes(src).hex(), bytes(dst).hex())
        for src, dst in db.sql(
            "select s.id, d.id from edge as e join node as s on s.nid = e.src join node as d on d.nid = e.dst "
            "where e.type = 'may_update'"
        )
    ]


def test_a_change_written_on_another_device_is_linked_by_the_consolidator(pair: tuple[WorldDB, WorldDB]) -> None:
    a, b = pair
    older = a.write("Ana plays chess on Sundays", scope="ana")
    newer = b.write("Ana stopped playing chess on Sundays", scope="ana")
    assert a.sync(b)["converged"]
    pair_of_devices = (newer, older)
    assert pair_of_devices not in _may_update(a) + _may_update(b)  # neither device saw both when it wrote
    assert b.consolidate(only="updates")["updates"] == 1
    assert pair_of_devices in _may_update(b)
    assert a.sync(b)["converged"]
    assert pair_of_devices in _may_update(a)
    _converged(a, b)
