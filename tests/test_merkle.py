"""store/merkle.py: the incremental Merkle tree equals the from-scratch tree after any sequence of writes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from worlddb_lite import WorldDB
from worlddb_lite.errors import NotFound
from worlddb_lite.store.hashing import EMPTY_TREE, inner
from worlddb_lite.store.merkle import MerkleWriter, compute_top, tree_height


class DictStore:
    """The two Store methods MerkleWriter uses, over a dict; counts rows written."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int, int, int], bytes] = {}
        self.written = 0

    def merkle_get(self, world: int, level: int, idx: int) -> bytes:
        try:
            return self.rows[(world, level, idx)]
        except KeyError:
            raise NotFound(f"missing ({level}, {idx})") from None

    def merkle_put(self, rows: list[tuple[int, int, int, bytes]]) -> None:
        for world, level, idx, digest in rows:
            self.rows[(world, level, idx)] = digest
            self.written += 1


def leaf(n: int) -> bytes:
    return n.to_bytes(32, "big")


def test_tree_height() -> None:
    assert [tree_height(n) for n in (0, 1, 2, 3, 4, 5, 8, 9, 1024, 1025)] == [0, 0, 1, 2, 2, 3, 3, 4, 10, 11]


def test_compute_top_small_trees() -> None:
    a, b, c = leaf(1), leaf(2), leaf(3)
    assert compute_top([]) == EMPTY_TREE
    assert compute_top([a]) == a
    assert compute_top([a, b]) == inner(a, b)
    assert compute_top([a, b, c]) == inner(inner(a, b), c)  # a lone left child is promoted
    assert compute_top([a, b, c, a]) == inner(inner(a, b), inner(c, a))


# an operation: ("append", how many) or ("set", slot index modulo size, new leaf value)
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 9)),
        st.tuples(st.just("set"), st.integers(0, 10_000), st.integers(0, 2**32)),
        st.tuples(st.just("set-many"), st.lists(st.integers(0, 10_000), min_size=1, max_size=4), st.integers(0, 99)),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=120, deadline=None)
@given(_ops)
def test_incremental_updates_equal_the_tree_from_scratch(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    store = DictStore()
    writer = MerkleWriter(store)  # type: ignore[arg-type]
    leaves: list[bytes] = []
    counter = 0
    for op in ops:
        changed: dict[int, bytes] = {}
        if op[0] == "append":
            for _ in range(op[1]):
                counter += 1
                changed[len(leaves)] = leaf(counter)
                leaves.append(leaf(counter))
        elif leaves:
            slots = [op[1]] if op[0] == "set" else op[1]
            for raw in slots:
                counter += 1
                slot = raw % len(leaves)
                leaves[slot] = changed[slot] = leaf(counter + op[2])
        if not changed:
            continue
        before = store.written
        top = writer.update(7, changed, len(leaves))
        assert top == compute_top(leaves)
        assert writer.top(7, len(leaves)) == top
        # O(changed x log n) rows per update, never the whole tree
        assert store.written - before <= len(changed) * (tree_height(len(leaves)) + 1)


def test_one_write_touches_a_logarithmic_number_of_rows() -> None:
    store = DictStore()
    writer = MerkleWriter(store)  # type: ignore[arg-type]
    leaves = [leaf(i) for i in range(1000)]
    writer.update(1, dict(enumerate(leaves)), len(leaves))
    before = store.written
    leaves.append(leaf(5000))
    assert writer.update(1, {1000: leaves[-1]}, len(leaves)) == compute_top(leaves)
    assert store.written - before == tree_height(1001) + 1


def test_a_big_world_stays_cheap_per_write(db: WorldDB) -> None:
    world = db.world("big")
    with db.batch():
        for i in range(300):
            db.write(f"memory {i}", world=world, valid_at="2024-01-01")
    rows_before = db.sql("select count(*) from merkle")[0][0]
    db.write("one more", world=world, valid_at="2024-01-01")
    rows_after = db.sql("select count(*) from merkle")[0][0]
    assert rows_after - rows_before <= tree_height(301) + 3  # the new path, plus the parents' leaves
    assert db.read(world).members == 301
    assert db.verify().ok


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=20))
def test_store_roots_verify_after_any_sequence_of_world_writes(choices: list[int]) -> None:
    from .conftest import FakeClock, FakeEmbedder

    with WorldDB(":memory:", embedder=FakeEmbedder(), clock=FakeClock()) as db:
        worlds = [db.root_id]
        for i, choice in enumerate(choices):
            target = worlds[choice % len(worlds)]
            if choice == 0:
                worlds.append(db.world(f"w{i}", parent=target))
            else:
                db.write(f"note {i}", world=target, valid_at="2024-01-01")
        assert db.verify().ok
