"""vector_index.py: the in-memory IVF index, its filters, and its coherence with node_vec."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from worlddb_lite import WorldDB
from worlddb_lite.index import vector_index
from worlddb_lite.index.ivf import IvfIndex, Source, assign, nprobe_for, quantize, spherical_kmeans
from worlddb_lite.index.vector_index import nlist_for
from worlddb_lite.store import vector_codes
from worlddb_lite.store.vector_table import VectorTable

from .conftest import FakeClock, FakeEmbedder

DIM = 32


def _clustered(n: int, centres: int = 40, seed: int = 0) -> np.ndarray:
    """Unit vectors around random centres: the shape text embeddings have."""
    rng = np.random.default_rng(seed)
    hubs = rng.standard_normal((centres, DIM))
    rows = hubs[rng.integers(0, centres, n)] + 0.6 * rng.standard_normal((n, DIM))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _source(vectors: np.ndarray, first: int) -> Source:
    """The float32 rows an index re-scores from: node ``first + i`` holds ``vectors[i]``."""
    return lambda ids: vectors[ids - first]


def _index(
    vectors: np.ndarray, *, lists: int | None, parents: np.ndarray | None = None, types: list[str] | None = None
) -> IvfIndex:
    centroids = spherical_kmeans(vectors, lists) if lists else None
    index = IvfIndex(DIM, centroids, source=_source(vectors, 1))
    nids = np.arange(1, len(vectors) + 1, dtype=np.int64)
    index.load(
        nids,
        assign(vectors, centroids),
        quantize(vectors),
        parents if parents is not None else np.zeros(len(vectors), dtype=np.int64),
        types or ["Turn"] * len(vectors),
    )
    return index


def _exact(vectors: np.ndarray, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[int]:
    scores = vectors @ query
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    return [int(i) + 1 for i in np.argsort(-scores, kind="stable")[:k] if np.isfinite(scores[i])]


def test_one_partition_is_exact_search() -> None:
    vectors = _clustered(500)
    index = _index(vectors, lists=None)
    for query in _clustered(20, seed=1):
        assert [nid for nid, _ in index.search(query, 10)] == _exact(vectors, query, 10)


def test_a_rough_search_reads_no_row_from_the_source_and_finds_the_near_ones() -> None:
    vectors = _clustered(500)
    read: list[int] = []
    exact = _source(vectors, 1)
    index = _index(vectors, lists=None)
    index.source = lambda ids: (read.extend(ids.tolist()), exact(ids))[1]
    for query in _clustered(20, seed=1):
        rough = [nid for nid, _ in index.search(query, 30, rough=True)]
        assert len(set(rough) & set(_exact(vectors, query, 10))) >= 8  # the codes keep the near ones near
    assert read == []
    index.search(_clustered(1, seed=3)[0], 10)
    assert read  # an exact search re-scores from the source


def test_trained_partitions_keep_recall_at_ten_above_095() -> None:
    vectors = _clustered(20_000)
    index = _index(vectors, lists=nlist_for(20_000))
    queries = _clustered(50, seed=2)
    found = [len(set(nid for nid, _ in index.search(q, 10)) & set(_exact(vectors, q, 10))) for q in queries]
    assert sum(found) / (10 * len(queries)) >= 0.95
    assert nprobe_for(index.nlist) < index.nlist / 5  # it did not just scan everything


def test_a_replaced_vector_moves_partitions_and_is_found_at_its_new_place() -> None:
    vectors = _clustered(3000)
    index = _index(vectors, lists=32)
    target = vectors[2000]
    new_part = int(assign(target[None, :], index.centroids)[0])
    index.upsert(1, new_part, target, 0, "Turn")
    assert index.size == 3000
    hits = [nid for nid, _ in index.search(target, 2)]
    assert set(hits) == {1, 2001}


def test_many_inserts_grow_partitions_and_compact_without_losing_rows() -> None:
    vectors = _clustered(6000)
    index = _index(vectors[:100], lists=None)
    centroids = spherical_kmeans(vectors[:1000], 16)
    index = IvfIndex(DIM, centroids, source=_source(vectors, 1))
    empty = quantize(np.zeros((0, DIM), np.float32))
    index.load(np.zeros(0, np.int64), np.zeros(0, np.int32), empty, np.zeros(0, np.int64), [])
    parts = assign(vectors, centroids)
    for i, vector in enumerate(vectors):
        index.upsert(i + 1, int(parts[i]), vector, 0, "Turn")
    assert index.size == 6000
    live = index.row_nid[: index.used]
    assert sorted(live[live >= 0].tolist()) == list(range(1, 6001))
    for nid in (1, 777, 6000):
        row = int(index.pos[nid])
        decoded = index.matrix[row] * index.scales[row, 0] * index.spread  # the codes decoded
        assert np.linalg.norm(decoded - vectors[nid - 1]) <= index.scales[row, 1]  # within its recorded error
        assert np.array_equal(index.vector(nid), vectors[nid - 1])


def test_world_and_type_filters_apply_inside_the_search() -> None:
    # nodes 1..2 are worlds under the root 3000; every other node sits in world 1 or 2
    vectors = _clustered(3000)
    parents = np.where(np.arange(3000) % 2 == 0, 1, 2).astype(np.int64)
    parents[[0, 1]] = 3000
    parents[2999] = -1
    types = ["Fact" if i % 10 == 0 else "Turn" for i in range(3000)]
    index = _index(vectors, lists=32, parents=parents, types=types)
    nids = np.arange(1, 3001)
    inside_1 = parents == 1
    fact = np.array([t == "Fact" for t in types])
    for query in _clustered(10, seed=3):
        hits = index.search(query, 10, world=1)
        assert all(parents[nid - 1] == 1 for nid, _ in hits) and len(hits) == 10
        facts = index.search(query, 10, types=["Fact"])
        assert [nid for nid, _ in facts] == _exact(vectors, query, 10, fact)  # a rare type: exact
        both = index.search(query, 10, world=1, types=["Fact"])
        assert [nid for nid, _ in both] == _exact(vectors, query, 10, inside_1 & fact)
    assert index.search(vectors[0], 5, types=["Nothing"]) == []
    assert set(index.members(1).tolist()) == set(nids[inside_1].tolist())


def _store(path: Path) -> WorldDB:
    return WorldDB(path, embedder=FakeEmbedder(), clock=FakeClock())


def test_a_second_process_sees_new_writes_without_reopening(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    clock = FakeClock()  # one clock: the reader's "now" is after the writer's writes
    writer = WorldDB(path, embedder=FakeEmbedder(), clock=clock)
    reader = WorldDB(path, embedder=FakeEmbedder(), clock=clock)
    try:
        writer.write("the red kite flew over the valley", scope="a")
        first = reader.nearest("red kite valley", k=1, types=["Memory"])
        assert first[0][0].content == "the red kite flew over the valley"
        second = writer.write("a blue whale sang in the deep ocean", scope="a")
        assert reader.nearest("blue whale ocean", k=1, types=["Memory"])[0][0].id == second  # caught up
    finally:
        writer.close()
        reader.close()


def test_a_rolled_back_batch_leaves_nothing_in_the_index(db: WorldDB) -> None:
    db.write("something permanent", scope="a")
    with pytest.raises(RuntimeError), db.batch():
        db.write("a ghost that never lands", scope="a")
        assert db.nearest("ghost never lands", k=1)[0][0].content == "a ghost that never lands"
        raise RuntimeError("abandon the batch")
    assert all(n.content != "a ghost that never lands" for n, _ in db.nearest("ghost never lands", k=5))


def test_training_starts_at_the_threshold_and_rebuilds_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_index, "TRAIN_AT", 200)
    db = _store(tmp_path / "train.db")
    try:
        session = db.write("a long session", scope="s", type="Session")
        db.write_many(
            [{"text": f"note {i} about subject {i % 13} and detail {i % 7}", "world": session} for i in range(150)]
        )
        assert db.sql("select count(*) from vec_centroid")[0][0] == 0
        before = db.nearest("note 3 about subject 3", k=3)
        db.write_many([{"text": f"later note {i} on subject {i % 13}", "world": session} for i in range(100)])
        lists = db.sql("select count(*) from vec_centroid")[0][0]
        assert lists == nlist_for(db.sql("select count(*) from node_vec")[0][0])
        parts = {r[0] for r in db.sql("select distinct part from node_vec")}
        assert len(parts) > 1
        assert db.nearest("note 3 about subject 3", k=3)[0][0].id == before[0][0].id
        assert db.verify(deep=True).ok
    finally:
        db.close()


def test_nearest_filters_by_world_type_and_time(db: WorldDB) -> None:
    a = db.write("project kickoff meeting notes", scope="work", type="Turn")
    db.write("kickoff of the football season", scope="home", type="Turn")
    fact = db.write("the project kickoff is on monday", scope="work", type="Fact", valid_at="2024-05-01")
    work = db.read(a).parent
    hits = db.nearest("project kickoff", k=10, world=work)
    assert {n.parent for n, _ in hits} <= {work} and len(hits) == 2
    assert [n.id for n, _ in db.nearest("project kickoff", k=10, types=["Fact"])] == [fact]
    assert db.nearest("project kickoff", k=10, types=["Fact"], as_of="2024-01-01") == []
    with pytest.raises(Exception, match="types must be a list"):
        db.nearest("x", types="Fact")  # type: ignore[arg-type]


def test_reindex_trains_partitions_on_demand_and_search_still_finds_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from worlddb_lite.cli import main

    path = tmp_path / "re.db"
    with _store(path) as db:
        ids = db.write_many([{"text": f"entry {i} on theme {i % 9}", "scope": "s"} for i in range(300)])
        assert db.reindex(partitions=12) == {"vectors": 301, "partitions": 12}  # + the scope
        stats = db.stats()
        assert (stats["vectors"], stats["vector_partitions"], stats["composed_worlds"]) == (301, 12, 1)
        hits = db.nearest("entry 17 on theme 8", k=3, types=["Memory"])  # 32-d hashed words collide
        assert ids[17] in [n.id for n, score in hits if score > 0.999]
        assert db.verify().ok
    assert main(["reindex", str(path), "--json"]) == 2  # the CLI opens with the bundled model: refused
    assert "embedded with 'fake-hash-32'" in capsys.readouterr().err


def test_the_cli_reindexes_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from worlddb_lite.cli import main

    path = str(tmp_path / "cli.db")
    for text in ("I moved to Porto in May", "My sister has a dog", "We met at the cafe"):
        assert main(["write", path, text, "--scope", "me"]) == 0
    capsys.readouterr()
    assert main(["reindex", path, "--partitions", "2", "--json"]) == 0
    assert '"partitions": 2' in capsys.readouterr().out
    assert main(["verify", path]) == 0


def test_a_scope_that_outgrows_the_shared_cells_gets_its_own_and_filters_stay_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from worlddb_lite.index import ivf

    monkeypatch.setattr(ivf, "BIG_SCOPE", 300)
    monkeypatch.setattr(ivf, "GATHER_COST", 1e9)  # never exact: the scans are what is tested
    vectors = _clustered(1500)
    centroids = spherical_kmeans(vectors, 8)
    exact = np.zeros((1510, DIM), dtype=np.float32)
    exact[[2, 3]], exact[12:1510] = vectors[:2], vectors[2:]
    index = IvfIndex(DIM, centroids, source=lambda ids: exact[ids])
    parts = assign(vectors, centroids)
    # root 1; scopes 2 and 3; rows 10.. alternate between them, a tenth of them Facts
    index.upsert(2, int(parts[0]), vectors[0], 1, "Scope")
    index.upsert(3, int(parts[1]), vectors[1], 1, "Scope")
    scope_of_row = {}
    for i in range(2, 1500):
        scope = 2 if i % 3 else 3
        index.upsert(10 + i, int(parts[i]), vectors[i], scope, "Fact" if i % 10 == 0 else "Turn")
        scope_of_row[10 + i] = scope
    assert index.big_scopes == {2, 3} and index.size == 1500
    assert {index.cell_scope[c] for c in range(len(index.cell_scope)) if index.count[c]} == {2, 3}
    rows = np.array(sorted(scope_of_row))
    for query in _clustered(10, seed=5):
        for scope in (2, 3):
            inside = rows[[scope_of_row[r] == scope for r in rows]]
            wanted_all = index.nlist  # compare with exact: probe everything
            got = index._scan(query, 10, scope, None, wanted_all)
            scores = vectors[inside - 10] @ query
            assert [n for n, _ in got] == [int(inside[i]) for i in np.argsort(-scores)[:10]]
        facts = index._scan(query, 5, None, {index.type_names["Fact"]}, index.nlist)
        assert all((nid - 10) % 10 == 0 for nid, _ in facts) and len(facts) == 5
        # the resolver's near-duplicate probe: the same typed scan, public, over the nearest partitions only
        assert index.near_duplicates(query, 5, types=["Fact"], probes=index.nlist) == facts
        few = index.near_duplicates(query, 5, types=["Fact"], probes=1)
        assert all((nid - 10) % 10 == 0 for nid, _ in few) and few[0][1] <= facts[0][1]
        assert [c for _, c in few] == sorted((c for _, c in few), reverse=True)


OLD_TOPIC = ["apple", "pear", "plum", "fig", "kiwi", "lime"]
NEW_TOPIC = ["rocket", "orbit", "comet", "lunar", "solar", "probe", "nebula", "quasar"]


def new_topic(i: int) -> str:
    """The i-th memory of a topic the partitions were not trained on: enough of them swell one into a split."""
    return f"{NEW_TOPIC[i % 8]} {NEW_TOPIC[(i // 8) % 8]} {NEW_TOPIC[(i // 64) % 8]} {i}"


@pytest.fixture
def trained_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[WorldDB, WorldDB]]:
    """(writer, reader) on one file, trained once on the first topic only; the reader hydrated already."""
    monkeypatch.setattr(vector_index, "TRAIN_AT", 100)
    monkeypatch.setattr(vector_index, "AUTO_TRAIN_LIMIT", 150)  # trained once, on the first topic only
    path = tmp_path / "split.db"
    clock = FakeClock()
    writer = WorldDB(path, embedder=FakeEmbedder(), clock=clock)
    reader = WorldDB(path, embedder=FakeEmbedder(), clock=clock)
    try:
        old = OLD_TOPIC
        writer.write_many([{"text": f"{old[i % 6]} {old[(i // 6) % 6]} {i}", "scope": "s"} for i in range(120)])
        reader.nearest("apple pear", k=1)  # the reader hydrates before any split
        yield writer, reader
    finally:
        writer.close()
        reader.close()


def test_a_partition_swollen_by_a_new_topic_splits_and_every_reader_follows(
    trained_pair: tuple[WorldDB, WorldDB],
) -> None:
    writer, reader = trained_pair
    lists = writer.sql("select count(*) from vec_centroid")[0][0]
    assert lists > 0
    for i in range(300):
        writer.write(new_topic(i), scope="s")
    splits = int(writer.sql("select value from meta where key = 'vec_splits'")[0][0])
    assert splits > 0
    assert writer.sql("select count(*) from vec_centroid")[0][0] == lists + splits
    sizes = [r[0] for r in writer.sql("select count(*) from node_vec group by part")]
    top = writer.sql("select max(nid) from node_vec")[0][0]
    assert max(sizes) <= 2 * vector_index.split_limit(top)  # no partition stays swollen
    probe = "comet lunar rocket 17"
    want = writer.nearest(probe, k=1, types=["Memory"])[0][0].id
    for db in (writer, reader):
        index = db._reconciler.lane.index()
        assert index.nlist == lists + splits
        got = index._scan(FakeEmbedder().embed([probe])[0], 1, None, None, index.nlist)
        assert db.nearest(probe, k=1, types=["Memory"])[0][0].id == want
        assert got[0][0] == db.sql("select nid from node where id = ?", (bytes.fromhex(want),))[0][0]
    assert writer.verify().ok


def test_a_split_committed_while_a_reader_catches_up_is_not_half_seen(
    trained_pair: tuple[WorldDB, WorldDB], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader reads the partition count, then another process commits a split, then the reader
    reads the rows: without one snapshot it met rows in a partition it had no centroid for."""
    writer, reader = trained_pair
    store = reader._reconciler.lane.store
    real = store.meta_values
    fired = []

    def meta_then_split(keys: Sequence[str]) -> dict[str, str]:
        found = real(keys)
        if "vec_splits" in keys and not fired:  # between this read and the rows: a split lands
            fired.append(True)
            for i in range(300):
                writer.write(new_topic(i), scope="s")
            assert int(writer.sql("select value from meta where key = 'vec_splits'")[0][0])
        return found

    monkeypatch.setattr(store, "meta_values", meta_then_split)
    reader.nearest("comet lunar", k=3)  # caught up on its snapshot: the split waits for the next read
    monkeypatch.setattr(store, "meta_values", real)
    assert fired
    probe = "comet lunar rocket 17"
    assert reader.nearest(probe, k=1)[0][0].id == writer.nearest(probe, k=1)[0][0].id


def test_a_memory_shared_into_a_world_by_a_contains_edge_is_found_inside_it(db: WorldDB) -> None:
    mine = db.write("the violin lesson is on thursday", scope="alice", extractor=None)  # the notes alone
    theirs = db.write("bring the violin to the lesson", scope="bob", extractor=None)
    alice = db.read(mine).parent
    assert alice is not None
    assert [n.id for n, _ in db.nearest("violin lesson", k=5, world=alice)] == [mine]
    db.link(alice, theirs, "contains")  # shared into alice's scope as well
    assert {n.id for n, _ in db.nearest("violin lesson", k=5, world=alice)} == {mine, theirs}
    assert {n.id for n in db.nodes(world=alice)} == {mine, theirs}  # the same containment as nodes()


def test_sqlite_vec_reads_the_vector_table_in_plain_sql(db: WorldDB) -> None:
    # the engineer's view: with sqlite-vec loaded, brute force in SQL agrees with the index
    for text in ("the cat sat on the mat", "quarterly revenue grew", "a kitten napped on a rug"):
        db.write(text, scope="s")
    query = FakeEmbedder().embed(["cat on a mat"])[0]
    rows = db.sql(  # as docs/storage.md shows it: int8 rows, the float32 query quantized in SQL
        "select n.id, 1 - vec_distance_cosine(vec_int8(v.embedding), vec_quantize_int8(vec_f32(?), 'unit')) as sim "
        "from node_vec as v join node as n on n.nid = v.nid where n.type = 'Memory' order by sim desc",
        (json.dumps(query.tolist()),),
    )
    hits = db.nearest(query, k=3, types=["Memory"])
    assert [bytes(r[0]).hex() for r in rows] == [n.id for n, _ in hits]
    assert np.allclose([r[1] for r in rows], [s for _, s in hits], atol=1e-2)  # the query's rounding too


def test_the_packed_cell_keys_and_the_row_wise_fallback_lay_out_the_same_cells() -> None:
    vectors = _clustered(400)
    centroids = spherical_kmeans(vectors, 6)
    parts = assign(vectors, centroids)
    types = [f"T{i % 3}" for i in range(400)]
    packed = IvfIndex(DIM, centroids)
    packed.load(np.arange(10, 410), parts, quantize(vectors), np.full(400, 5), types)
    wide = IvfIndex(DIM, centroids)
    for i in range(4096):  # type codes past the packed key's 12 bits take the row-wise path
        wide._code(f"pad{i}")
    wide.load(np.arange(10, 410), parts, quantize(vectors), np.full(400, 5), types)

    def layout(index: IvfIndex) -> list[tuple[int, str, int]]:
        names = {c: n for n, c in index.type_names.items()}
        return sorted((p, names[c], index.count[cell]) for (p, c, _), cell in index.cell_key.items())

    assert layout(packed) == layout(wide)
    for query in _clustered(5, seed=9):
        assert packed.search(query, 5) == wide.search(query, 5)
        assert packed.search(query, 5, types=["T1"]) == wide.search(query, 5, types=["T1"])


def test_the_write_that_trains_the_partitions_leaves_none_past_the_split_limit(tmp_path: Path) -> None:
    from worlddb_lite.index.vector_index import TRAIN_AT, split_limit

    with _store(tmp_path / "t.db") as db:
        db.write_many([{"text": f"note {i} on theme {i % 97} and {i % 89}", "scope": "s"} for i in range(TRAIN_AT)])
        sizes = [n for (n,) in db.sql("select count(*) from node_vec group by part")]
        top = db.sql("select max(nid) from node")[0][0]
        assert len(sizes) > 1 and max(sizes) <= split_limit(top)
        before = next(iter(db.sql("select value from meta where key = 'vec_splits'")), None)
        db.write("one more note on theme 3", scope="s")  # a single write finds no debt to pay
        assert next(iter(db.sql("select value from meta where key = 'vec_splits'")), None) == before


def test_the_index_holds_8_bit_codes_and_answers_with_the_stored_rows_exact_scores(tmp_path: Path) -> None:
    db = WorldDB(str(tmp_path / "codes.db"), embedder=FakeEmbedder(), clock=FakeClock())
    for i in range(60):
        db.write(f"note {i} about topic {i % 7}", scope="ana")
    lane = db._reconciler.lane
    index = lane.index()
    assert index.matrix.dtype == np.int8 and index.scales.dtype == np.float32
    rows = db.sql("select nid, embedding, scale from node_vec")
    stored = {nid: vector_codes.row(blob, scale) for nid, blob, scale in rows}
    query = next(iter(stored.values()))
    found = index.search(query, 10)
    held = [(nid, float(v @ query)) for nid, v in stored.items() if index.pos[nid] >= 0]
    expected = sorted(held, key=lambda x: -x[1])
    # the stored rows' exact scores (to the last bits of a BLAS product), not the codes' (off by up to ~0.01)
    assert [score for _, score in found] == pytest.approx([score for _, score in expected[:10]], abs=1e-6)
    assert all(abs(score - dict(expected)[nid]) <= 1e-6 for nid, score in found)
    some = [n for n, _ in expected[:5]]
    assert index.cosines([*some, some[0], 10**6], query) == pytest.approx(
        {n: dict(expected)[n] for n in some}, abs=1e-6
    )
    read = lane.table.exact_rows(np.array([some[1], 10**6, some[1]]), lane.dim)
    assert np.array_equal(read[0], stored[some[1]]) and np.isnan(read[1]).all() and np.array_equal(read[2], read[0])
    db.close()


def test_the_codes_error_bounds_every_score_and_the_spread_shrinks_it() -> None:
    rng = np.random.default_rng(3)
    vectors = _clustered(2000) * np.linspace(0.2, 3.0, DIM, dtype=np.float32)  # some dimensions far wider
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    spread = np.linspace(0.2, 3.0, DIM, dtype=np.float32) / 1.6  # each dimension's width over the middle one's
    plain, spread_codes = quantize(vectors), quantize(vectors, spread)
    assert np.median(spread_codes[1][:, 1]) < np.median(plain[1][:, 1])
    queries = rng.standard_normal((50, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    for (codes, scales), by in ((plain, np.ones(DIM, dtype=np.float32)), (spread_codes, spread)):
        coarse = (codes @ (queries * by).T) * scales[:, :1]
        assert np.all(np.abs(coarse - vectors @ queries.T) <= scales[:, 1:])


def test_the_index_holds_node_vecs_own_codes_and_never_reads_the_table_to_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = WorldDB(str(tmp_path / "own.db"), embedder=FakeEmbedder(), clock=FakeClock())
    for i in range(40):
        db.write(f"note {i} about topic {i % 5}", scope="ana")
    index = db._reconciler.lane.index()
    for nid, blob, scale in db.sql("select nid, embedding, scale from node_vec"):
        row = int(index.pos[nid])
        if row >= 0:
            assert index.matrix[row].tobytes() == blob  # the same codes: a decoded row codes back to them
            assert index.scales[row, 1] < 1e-4 and abs(float(index.scales[row, 0]) - scale) < 1e-6 * scale

    def refuse(*_: object) -> None:
        raise AssertionError("a hot row was read from node_vec to answer")

    monkeypatch.setattr(VectorTable, "exact_rows", refuse)
    assert db.recall("topic 3", scope="ana").hits and db.nearest("note 7 about topic 2", k=5)
    db.close()


def test_rows_caught_up_after_a_load_fit_without_a_second_copy_of_the_matrix() -> None:
    # at 1M memories the first rows caught up after opening grew the matrix 2x: two copies held at once
    vectors = _clustered(2000)
    centroids = spherical_kmeans(vectors, 8)
    index = IvfIndex(DIM, centroids)
    index.load(np.arange(10, 2010), assign(vectors, centroids), quantize(vectors), np.full(2000, 5), ["Turn"] * 2000)
    matrix, ids = index.matrix, index.pos
    more = _clustered(60, seed=4)
    full = index.room[index.cells_of[0][0]]
    for i, vector in enumerate(more):  # new nids past the loaded ones, one cell filled past its room: it moves
        index.upsert(2010 + i, 0, vector, 5, "Turn")
    assert index.room[index.cells_of[0][0]] > full  # the partition moved to the end, with more room
    assert index.matrix is matrix and index.pos is ids  # room was there: nothing was copied
    assert [n for n, _ in index.exact(np.arange(2010, 2070), more[7], 1, None)] == [2017]
