"""What one read sees: the store, the moment it reads at, and the worlds it is confined to."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import apsw
import numpy as np

from ..index.ivf import IvfIndex
from ..index.side_reader import SideReader, Unavailable
from ..models.embed import TokenVectors
from ..store import queries
from ..store.rows import Store
from ..types import Node

T = TypeVar("T")


@dataclass(frozen=True)
class ReadView:
    """A read's context: valid/belief time, whether closed versions count, and its worlds."""

    conn: apsw.Connection
    store: Store
    index: Callable[[], IvfIndex]  # the vector index, current with every commit
    embed: Callable[[str], np.ndarray] | None  # query text -> unit vector (None: a store without an embedder)
    valid: str
    belief: str
    include_superseded: bool
    memberships: tuple[str, ...]  # edge types that put a node inside a world besides its parent (contains, ...)
    annotate: frozenset[str]  # edge types shown on returned nodes (superseded_by, contradicted_by)
    worlds: tuple[int, ...]  # containment: only nodes inside one of these worlds; () for the whole store
    tokens: Callable[[], TokenVectors] | None = None  # the embedder's token table (None: it has none)
    side: SideReader | None = None  # a second connection for SQL run beside the read's other work (None: run here)
    include_cold: bool = False  # the vector lane also ranks cold-tier memories the other lanes found (retention)
    # node -> visible at this read's times, for the read's length: its lanes find many of the same
    # nodes (~1,000 checked a recall at 100k memories, ~600 of them distinct)
    seen: dict[int, bool] = field(default_factory=dict, init=False, compare=False, repr=False)
    keys: dict[int, tuple[str, int, bytes]] = field(default_factory=dict, init=False, compare=False, repr=False)
    membership: list[np.ndarray] = field(default_factory=list, init=False, compare=False, repr=False)  # links()
    stored: dict[int, Node] = field(default_factory=dict, init=False, compare=False, repr=False)  # bare_nodes()

    def visible(self, nids: Sequence[int]) -> set[int]:
        """Which of ``nids`` are visible at this read's times (each node asked of SQLite once a read)."""
        unknown = [nid for nid in dict.fromkeys(nids) if nid not in self.seen]
        if unknown:
            shown = queries.visible_among(
                self.conn, unknown, self.valid, self.belief, include_superseded=self.include_superseded
            )
            self.seen.update((nid, nid in shown) for nid in unknown)
        return {nid for nid in nids if self.seen[nid]}

    def tie_keys(self, nids: Sequence[int]) -> dict[int, tuple[str, int, bytes]]:
        """Member keys of ``nids`` (read once a read): the order of nodes it scored alike (``ties``)."""
        unknown = [nid for nid in nids if nid not in self.keys]
        if unknown:
            self.keys.update(queries.member_keys(self.conn, unknown))
        return self.keys

    def soon(self, task: Callable[[apsw.Connection], T]) -> Callable[[], T]:
        """``task(connection)`` started on the side reader while the caller goes on; call the result for its answer.

        Without a side reader, or when it cannot run the task (see ``side_reader``) or the task
        fails there, the task runs on this read's own connection: it answers, or fails as it would
        have without a side reader. A store still locked after the busy timeout is not waited for twice.
        """
        future = self.side.run(task) if self.side is not None else None
        if future is None:
            answer = task(self.conn)
            return lambda: answer

        def wait() -> T:
            try:
                return future.result()
            except apsw.BusyError:
                raise
            except (apsw.Error, Unavailable):
                return task(self.conn)

        return wait

    def inside(self, nids: Sequence[int]) -> list[int]:
        """``nids`` (in order) that this read may see: visible, and inside its world."""
        if not nids:
            return []
        shown = self.visible(nids)
        if self.worlds:
            candidates = [n for n in nids if n in shown]
            below = self.below(candidates)
            rest = [n for n in candidates if n not in below]
            if rest:  # not under the world by parents (or not in the vector index): membership edges decide
                below |= queries.inside(
                    self.conn,
                    rest,
                    self.worlds,
                    self.valid,
                    self.belief,
                    memberships=self.memberships,
                    include_superseded=self.include_superseded,
                )
            shown &= below
        return [n for n in nids if n in shown]

    def kinds(self, nids: Sequence[int]) -> list[tuple[str, int | None]]:
        """(type, parent) of each of ``nids``: read from the vector index's arrays where it holds the node.

        Types and parents never change, so the index's copy is exact; a node it does not hold
        (no vector) is read through the store's header cache.
        """
        if not nids:
            return []
        index = self.index()
        names = {code: name for name, code in index.type_names.items()}
        ids = np.asarray(nids, dtype=np.int64)
        held = (ids >= 0) & (ids < index.pos.shape[0])
        held[held] = index.pos[ids[held]] >= 0
        codes = np.full(ids.shape[0], -1, dtype=np.int64)
        parents = np.full(ids.shape[0], -1, dtype=np.int64)
        codes[held] = index.type_code[ids[held]]
        parents[held] = index.parent[ids[held]]
        out: list[tuple[str, int | None]] = []
        for nid, ok, code, parent in zip(nids, held.tolist(), codes.tolist(), parents.tolist(), strict=True):
            if ok and code in names:
                out.append((names[code], parent if parent >= 0 else self.store.header(nid).parent))
            else:
                header = self.store.header(nid)
                out.append((header.type, header.parent))
        return out

    def below(self, nids: Sequence[int]) -> set[int]:
        """Which of ``nids`` the vector index places under this read's world by their parents.

        Parents never change, and the index holds every embedded node's parent, so this climb in
        memory answers for nearly every node a lane finds; the rest (nodes without a vector, or
        inside only through a membership edge) go to ``queries.inside``, the SQL walk.
        """
        if not self.worlds or not nids:
            return set()
        index = self.index()
        parent = index.parent
        ids = np.asarray(nids, dtype=np.int64)
        known = (ids >= 0) & (ids < parent.shape[0])
        ids = ids[known]
        ids = ids[parent[ids] >= 0]
        under = np.zeros(ids.shape[0], dtype=bool)
        for world in self.worlds:
            under |= index.under(ids, world)
        return set(ids[under].tolist())

    def nodes(self, nids: Sequence[int]) -> list[Node]:
        return self.store.load_nodes(list(nids), self.annotate)

    def bare_nodes(self, nids: Sequence[int]) -> list[Node]:
        """``nids`` as stored, without what supersedes or contradicts them (each read once a read).

        For the read's own decisions (whose a note is, when it began), not for what it returns.
        """
        unknown = [nid for nid in dict.fromkeys(nids) if nid not in self.stored]
        if unknown:
            self.stored.update(zip(unknown, self.store.load_nodes(unknown), strict=True))
        return [self.stored[nid] for nid in nids]

    def links(self) -> np.ndarray | None:
        """(src, dst) membership edges for the vector index's world filter (None: no world), read once a read.

        A recall searches the index several times (the vector lane, the notes, the notes' neighbours);
        nothing is written while it runs (``recall.recall`` catches the index up once).
        """
        if not self.worlds:
            return None
        if not self.membership:
            found = queries.membership_links(
                self.conn, self.memberships, self.valid, self.belief, include_superseded=self.include_superseded
            )
            self.membership.append(np.array(found, dtype=np.int64).reshape(-1, 2))
        return self.membership[0]
