-- worlddb_lite schema (version 13; migrations.py lifts older files): the single source of truth for the store's layout.
--
-- One SQLite file holds an assistant's whole memory. Read it in the sqlite3 shell (`worlddb shell DB`):
--   select * from memory;              every note, turn, fact and summary: scope, speaker, text, current or stale
--   select * from fact;                what was learned: subject, slot, value, since, until, and from what
--   select * from current_node;        what is true now
--   select * from node_history;        every version with its validity interval
--   select * from open_contradiction;  conflicts the store keeps on purpose
--   select * from pending_merge;       identity merges waiting for a decision
--   select * from world_tree;          worlds, their parents and Merkle roots
--   select * from cold_memory;         memories out of the in-memory vector index, and why
--   select * from node_text where nid in (select rowid from node_fts where node_fts match 'tea');
--                                      what full-text search finds, as it was indexed
-- Ids are blake3-256 hashes; the views print them as hex. Times are UTC ISO-8601 text
-- (2024-05-01T09:30:00.000000Z) so plain text comparison orders them.
-- Everything works in a stock sqlite3 shell; sqlite-vec, which `worlddb shell` loads, adds functions over node_vec.

create table meta (
  key text primary key,  -- schema_version, embedder_id, embedder_dim, created_at, store_id (sync/replicas.py)
  value text not null
) strict, without rowid;

create table reconciler_session (
  -- The reconciler holds one row here only inside its own write transaction, so the
  -- guard triggers below let its writes through and stop every other writer (the sqlite3
  -- shell included). A row visible at rest was forged: `worlddb verify` reports it.
  -- 'merge' (sync/replicas.py applying another replica's rows) may also move created_at, valid_at and
  -- expired_at earlier: replicas agree on the earliest time any of them knew a thing.
  holder text not null check (holder in ('reconciler', 'purge', 'merge')),
  origin integer  -- sync_peer.peer whose rows this transaction adopts (change_log.origin), null: written here
) strict;

create table node (
  -- Immutable, content-addressed nodes. Every node is a world that may contain others.
  nid integer primary key,  -- local row number; node_fts and node_vec rows use it
  id blob not null unique check (length(id) = 32),  -- blake3('worlddb/node/v1' || LF || body)
  type text not null check (length(type) between 1 and 64),  -- Root, Scope, Session, Turn, Memory, Fact, Entity, ...
  parent integer references node (nid),  -- the single parent world; null only for the store root
  slot integer check (slot >= 0),  -- this node's leaf slot in its parent's Merkle tree (see member order below)
  depth integer not null check (depth >= 0),  -- 0 for the store root
  body text,  -- canonical JSON of what the node says; null only after an audited purge
  -- Version 10: this node's place among the rows the commit that wrote it wrote (in every world). A world
  -- orders its members by (created_at, ord, id): the order they were written in, the same on every replica.
  ord integer not null default 0 check (ord >= 0)
) strict;

create index node_parent on node (parent, slot);  -- a world's members in slot order (version 10: with the slot)

create table node_state (
  -- The mutable projection of a node: everything that may change lives here, not in the blob.
  nid integer primary key references node (nid),
  valid_at text not null,  -- world time: true from
  invalid_at text,  -- world time: true until (null = still true); only ever tightens
  closed_at text,  -- belief time at which invalid_at was set (for as-of reads on the belief axis)
  created_at text not null,  -- belief time: when the store learned it
  expired_at text,  -- belief time: when the store stopped believing it (null = still believed)
  retired integer not null default 0 check (retired in (0, 1)),
  salience real not null default 0.0,
  size integer not null default 0 check (size >= 0),  -- member slots used in this world's Merkle tree
  root blob not null check (length(root) = 32),  -- Merkle root over id, projection and members
  check (invalid_at is null or invalid_at >= valid_at),
  check (expired_at is null or expired_at >= created_at)
) strict;

create index node_state_valid on node_state (valid_at);  -- what was true or said around a date (recall's time lane)

create table edge (
  -- Typed, content-addressed edges with the same bitemporal columns as nodes.
  -- Only the reconciler writes here, running the edge type's handler in the same transaction.
  eid integer primary key,
  id blob not null unique check (length(id) = 32),  -- blake3('worlddb/edge/v1' || LF || canonical body)
  type text not null check (length(type) between 1 and 64),
  src integer not null references node (nid),
  dst integer not null references node (nid),
  world integer not null references node (nid),  -- lowest world holding both ends; its Merkle tree covers this edge
  slot integer not null check (slot >= 0),  -- leaf slot in that world's Merkle tree
  props text not null default '{}',  -- canonical JSON of the edge's properties
  -- The id hashes the canonical JSON {"dst": hex, "props": ..., "src": hex, "type": ..., "v": 1,
  -- "valid_at": ...}, rebuilt from these columns (hashing.edge_body), so it is not stored twice.
  valid_at text not null,
  invalid_at text,
  closed_at text,
  created_at text not null,
  expired_at text,
  ord integer not null default 0 check (ord >= 0),  -- as node.ord (version 10)
  check (invalid_at is null or invalid_at >= valid_at),
  check (expired_at is null or expired_at >= created_at)
) strict;

create index edge_src on edge (src, type, dst);
create index edge_dst on edge (dst, type);
create index edge_type on edge (type, src);  -- membership edges (contains) of a whole store, for world filters
create index edge_world on edge (world, slot);  -- a world's interior edges in slot order (version 10: sync's re-slot)

create table merkle (
  -- Incremental Merkle tree per world over its member slots (child nodes and interior edges).
  -- Level 0 holds leaf hashes; node (level, idx) hashes its two children, or promotes a lone left one.
  -- A write rewrites one path: O(log fanout) rows per ancestor, never the whole member list.
  world integer not null references node (nid),
  level integer not null check (level >= 0),
  idx integer not null check (idx >= 0),
  hash blob not null check (length(hash) = 32),
  primary key (world, level, idx)
) strict, without rowid;

create table root_log (
  -- The history of every world root, one row per world per committed transaction that changed it,
  -- so a world's state at any past moment can be named (and its members re-derived and verified).
  lid integer primary key,
  world integer not null references node (nid),
  root blob not null check (length(root) = 32),
  size integer not null check (size >= 0),
  at text not null  -- belief time of the commit
) strict;

create index root_log_world on root_log (world, lid);

create table state_log (
  -- Every change of a projection after its row was written (closing, retiring, retracting),
  -- with the commit time, so any logged root can be recomputed from the state at that moment.
  lid integer primary key,
  kind text not null check (kind in ('node', 'edge')),
  ref integer not null,  -- node.nid or edge.eid
  at text not null,  -- belief time of the change (the commit's time)
  invalid_at text,
  closed_at text,
  expired_at text,
  retired integer not null default 0 check (retired in (0, 1)),
  -- Version 10 (sync): 1 when the row entered this store's trees at this time, adopted from another
  -- replica into a world this store already held; created_was, valid_was and ord_was hold the values a
  -- merge replaced at this time (null: unchanged), so the replay knows them before it.
  entered integer not null default 0 check (entered in (0, 1)),
  created_was text,
  valid_was text,
  ord_was integer
) strict;

create index state_log_ref on state_log (kind, ref, lid);

create table merge_proposal (
  -- same_as never merges silently: it stages a proposal here until accepted or rejected.
  pid integer primary key,
  a integer not null references node (nid),  -- the smaller nid of the pair
  b integer not null references node (nid),
  status text not null default 'pending' check (status in ('pending', 'accepted', 'rejected')),
  score real,  -- the resolver's confidence, if it proposed the pair
  tier text,  -- which resolver tier (or 'manual') proposed it
  reason text,
  proposed_at text not null,
  decided_at text,
  -- Version 10: the other decision a replica made of the same pair (sync/replicas.py): accepted here and
  -- rejected there, or the reverse. Each keeps its own; the same_as edges of the acceptance travel, so
  -- every replica holds them, and select * from merge_conflict lists the pairs someone must settle.
  conflict text check (conflict in ('accepted', 'rejected') and conflict <> status),
  check (a < b),
  unique (a, b)
) strict;

create table alias (
  -- Names a node is also known by ("my manager" for Sarah); tier 1 of the resolver reads them.
  nid integer not null references node (nid),
  alias text not null,  -- as written
  norm text not null,  -- casefolded and whitespace-collapsed, for exact lookup
  source text,  -- where the alias came from (extraction, user, import)
  created_at text not null,
  primary key (norm, nid)
) strict, without rowid;

create table tombstone (
  -- An audited purge erased a node's content; only its hash and the time remain.
  id blob primary key check (length(id) = 32),
  purged_at text not null
) strict, without rowid;

-- Member order (version 10): a world's members take their slots in the order (created_at, ord, id), so
-- replicas holding the same members build the same Merkle tree whatever order they learned them in
-- (Transaction._order_members). A file written before version 10 keeps the order it gave its members then:
-- the slots below `size` here, one row per world that had members when the file was lifted.
create table legacy_order (
  world integer primary key references node (nid),
  size integer not null check (size > 0)  -- slots 0 to size - 1 keep the order the file gave them
) strict;

-- Sync (sync/replicas.py): this file's outbox, one row per thing it wrote or adopted, in commit order. A
-- replica that has seen this store up to seq N is sent the rows changed after N, in their current state.
create table change_log (
  seq integer primary key,  -- the change number a token names
  kind text not null check (kind in ('node', 'edge', 'alias', 'proposal', 'tombstone')),
  ref integer not null,  -- node.nid (node, alias, tombstone), edge.eid or merge_proposal.pid
  origin integer references sync_peer (peer),  -- the replica it came from, null: written here
  -- a random number drawn for this change: a file restored from an older copy hands its seq out again,
  -- to another change with another stamp (sync/replicas.py: a token names the change it saw by both)
  stamp integer not null default (random())
) strict;

-- The replicas this store has exchanged changes with: how far it has seen each one's change_log.
create table sync_peer (
  peer integer primary key,
  store_id text not null unique check (length(store_id) = 32),  -- the other file's meta store_id
  -- its change_log seq this store has applied up to (0: all it held before its log began, as a replica
  -- made from it holds), null: nothing yet, or only some scopes
  seen integer check (seen >= 0),
  -- a digest of that change as the peer sent it: a file restored from an older copy numbers new changes
  -- again from where the copy stopped, and the digest no longer matches (it is then sent everything)
  tip text,
  synced_at text  -- belief time of the last exchange
) strict;

-- Guards: the invariants of docs/design.md enforced for every connection, the sqlite3 shell included.

create trigger node_insert_guard before insert on node
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: nodes are written only by the worlddb reconciler (WorldDB.write, `worlddb write`), which hashes, indexes and witnesses them in one transaction');
end;

create trigger node_blob_immutable before update on node
when not (
  new.id = old.id and new.type = old.type and new.parent is old.parent and new.depth = old.depth
  and (new.ord = old.ord or exists (select 1 from reconciler_session where holder = 'merge')) and (
    (old.body is not null and new.body is null and new.slot is old.slot
      and exists (select 1 from reconciler_session where holder = 'purge'))
    -- the reconciler moves a member to keep its world's member order (see legacy_order)
    or (new.body is old.body and exists (select 1 from reconciler_session))
  )
)
begin
  select raise(abort, 'worlddb: node blobs are immutable (their id is the hash of their bytes); amend writes a new version, purge erases content');
end;

create trigger node_delete_guard before delete on node
begin
  select raise(abort, 'worlddb: nodes are never deleted; retire closes validity and purge erases content, keeping the hash');
end;

create trigger node_state_insert_guard before insert on node_state
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: node state is written only by the worlddb reconciler');
end;

create trigger node_state_update_guard before update on node_state
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: node state is changed only by the worlddb reconciler (retire, amend, link); its Merkle root covers it');
end;

create trigger node_state_delete_guard before delete on node_state
begin
  select raise(abort, 'worlddb: node state is never deleted; validity closes instead');
end;

create trigger node_state_validity_tightens before update of valid_at, invalid_at on node_state
when (new.valid_at is not old.valid_at
    and not (new.valid_at < old.valid_at and exists (select 1 from reconciler_session where holder = 'merge')))
  or (old.invalid_at is not null and (new.invalid_at is null or new.invalid_at > old.invalid_at))
begin
  select raise(abort, 'worlddb: validity only tightens: valid_at never moves and a closed invalid_at never re-opens or moves later; write a new version instead');
end;

create trigger node_state_belief_final before update of created_at, expired_at, retired on node_state
when (new.created_at is not old.created_at
    and not (new.created_at < old.created_at and exists (select 1 from reconciler_session where holder = 'merge')))
  or (old.expired_at is not null and new.expired_at is not old.expired_at
    and not (new.expired_at is not null and new.expired_at < old.expired_at
      and exists (select 1 from reconciler_session where holder = 'merge')))
  or (old.retired = 1 and new.retired = 0)
begin
  select raise(abort, 'worlddb: belief time is append-only: created_at never changes, and expired_at and retired are final once set');
end;

create trigger edge_insert_guard before insert on edge
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: edges are written only by the worlddb reconciler, which runs the edge type''s handler in the same transaction; use WorldDB.link() or `worlddb link`');
end;

create trigger edge_update_guard before update on edge
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: edges are changed only by the worlddb reconciler (closing validity through a handler); use WorldDB.unlink()');
end;

create trigger edge_delete_guard before delete on edge
begin
  select raise(abort, 'worlddb: edges are never deleted; WorldDB.unlink() closes their validity and keeps the history');
end;

create trigger edge_identity_immutable before update of id, type, src, dst, world, props, valid_at on edge
begin
  select raise(abort, 'worlddb: an edge''s identity (id, type, ends, props, valid_at) is immutable');
end;

create trigger edge_belief_final before update of created_at, ord on edge
when (new.created_at is not old.created_at or new.ord is not old.ord)
  and not (new.created_at <= old.created_at and exists (select 1 from reconciler_session where holder = 'merge'))
begin
  select raise(abort, 'worlddb: an edge''s created_at never changes');
end;

create trigger edge_validity_tightens before update of valid_at, invalid_at on edge
when new.valid_at is not old.valid_at
  or (old.invalid_at is not null and (new.invalid_at is null or new.invalid_at > old.invalid_at))
begin
  select raise(abort, 'worlddb: edge validity only tightens: a closed invalid_at never re-opens or moves later');
end;

create trigger merge_decision_final before update of status on merge_proposal
when old.status <> 'pending'
begin
  select raise(abort, 'worlddb: a merge proposal that was accepted or rejected is final');
end;

-- The history tables are append-only: the deep verify replays them, and a rewritten past would
-- only be found there. (Rows are appended by the reconciler; a forged row fails that replay.)
create trigger root_log_append_only before update on root_log
begin
  select raise(abort, 'worlddb: the root history is append-only; every committed root stays as it was logged');
end;

create trigger root_log_no_delete before delete on root_log
begin
  select raise(abort, 'worlddb: the root history is append-only; every committed root stays as it was logged');
end;

create trigger state_log_append_only before update on state_log
begin
  select raise(abort, 'worlddb: the state log is append-only; a projection changes by a new entry');
end;

create trigger state_log_no_delete before delete on state_log
begin
  select raise(abort, 'worlddb: the state log is append-only; a projection changes by a new entry');
end;

create trigger tombstone_final before update on tombstone
begin
  select raise(abort, 'worlddb: a purge tombstone is final');
end;

create trigger tombstone_no_delete before delete on tombstone
begin
  select raise(abort, 'worlddb: a purge tombstone is final');
end;

-- The change log records every write of the reconciler (its guards above let nothing else write these
-- tables), with the replica it came from when a sync adopts it. Merkle bookkeeping (root, size, slot) is
-- not a change another replica needs; a merge that moves a node's ord moves its created_at too.
create trigger change_node after insert on node
begin
  insert into change_log (kind, ref, origin) values ('node', new.nid, (select max(origin) from reconciler_session));
end;

create trigger change_node_state after update of valid_at, invalid_at, closed_at, created_at, expired_at, retired,
salience on node_state
when new.valid_at is not old.valid_at or new.invalid_at is not old.invalid_at or new.closed_at is not old.closed_at
  or new.created_at is not old.created_at or new.expired_at is not old.expired_at or new.retired is not old.retired
  or new.salience is not old.salience
begin
  insert into change_log (kind, ref, origin) values ('node', new.nid, (select max(origin) from reconciler_session));
end;

create trigger change_edge after insert on edge
begin
  insert into change_log (kind, ref, origin) values ('edge', new.eid, (select max(origin) from reconciler_session));
end;

create trigger change_edge_state after update of invalid_at, closed_at, created_at, expired_at on edge
begin
  insert into change_log (kind, ref, origin) values ('edge', new.eid, (select max(origin) from reconciler_session));
end;

create trigger change_alias after insert on alias
begin
  insert into change_log (kind, ref, origin) values ('alias', new.nid, (select max(origin) from reconciler_session));
end;

create trigger change_alias_time after update of created_at on alias
when new.created_at is not old.created_at
begin
  insert into change_log (kind, ref, origin) values ('alias', new.nid, (select max(origin) from reconciler_session));
end;

create trigger change_proposal after insert on merge_proposal
begin
  insert into change_log (kind, ref, origin) values ('proposal', new.pid, (select max(origin) from reconciler_session));
end;

create trigger change_proposal_decided after update of status, conflict on merge_proposal
when old.status is not new.status or old.conflict is not new.conflict
begin
  insert into change_log (kind, ref, origin) values ('proposal', new.pid, (select max(origin) from reconciler_session));
end;

create trigger change_tombstone after insert on tombstone
begin
  insert into change_log (kind, ref, origin)
  select 'tombstone', nid, (select max(origin) from reconciler_session) from node where id = new.id;
end;

-- Views: the human interface.

create view current_node as
select
  -- Nodes true now and still believed (what a default query sees).
  lower(hex(n.id)) as id,
  n.type as type,
  json_extract(n.body, '$.name') as name,
  json_extract(n.body, '$.content') as content,
  lower(hex(p.id)) as world,
  s.valid_at as valid_at,
  s.created_at as created_at
from node as n
join node_state as s on s.nid = n.nid
left join node as p on p.nid = n.parent
where s.expired_at is null and n.body is not null
  and s.valid_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
  and (s.invalid_at is null or s.invalid_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

create view node_history as
select
  -- Every node with its validity and belief intervals and its supersedes links.
  lower(hex(n.id)) as id,
  n.type as type,
  json_extract(n.body, '$.name') as name,
  json_extract(n.body, '$.content') as content,
  s.valid_at as valid_at,
  s.invalid_at as invalid_at,
  s.created_at as created_at,
  s.expired_at as expired_at,
  s.retired as retired,
  (select lower(hex(x.id)) from edge as e join node as x on x.nid = e.src
    where e.dst = n.nid and e.type = 'supersedes' limit 1) as superseded_by,
  (select lower(hex(x.id)) from edge as e join node as x on x.nid = e.dst
    where e.src = n.nid and e.type = 'supersedes' limit 1) as supersedes
from node as n
join node_state as s on s.nid = n.nid;

create view open_contradiction as
select
  -- Conflicts kept on purpose: both sides still valid and believed.
  lower(hex(a.id)) as a_id,
  json_extract(a.body, '$.content') as a_content,
  lower(hex(b.id)) as b_id,
  json_extract(b.body, '$.content') as b_content,
  e.created_at as flagged_at
from edge as e
join node as a on a.nid = e.src
join node as b on b.nid = e.dst
join node_state as sa on sa.nid = a.nid
join node_state as sb on sb.nid = b.nid
where e.type = 'contradicts' and e.expired_at is null
  and (e.invalid_at is null or e.invalid_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
  and sa.expired_at is null and (sa.invalid_at is null or sa.invalid_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
  and sb.expired_at is null and (sb.invalid_at is null or sb.invalid_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

create view pending_merge as
select
  -- same_as proposals waiting for accept_merge / reject_merge.
  m.pid as pid,
  lower(hex(a.id)) as a_id,
  json_extract(a.body, '$.name') as a_name,
  lower(hex(b.id)) as b_id,
  json_extract(b.body, '$.name') as b_name,
  m.score as score,
  m.tier as tier,
  m.reason as reason,
  m.proposed_at as proposed_at
from merge_proposal as m
join node as a on a.nid = m.a
join node as b on b.nid = m.b
where m.status = 'pending';

create view merge_conflict as
select
  -- Identity merges two replicas decided differently (accepted on one, rejected on the other).
  m.pid as pid,
  lower(hex(a.id)) as a_id,
  json_extract(a.body, '$.name') as a_name,
  lower(hex(b.id)) as b_id,
  json_extract(b.body, '$.name') as b_name,
  m.status as decided_here,
  m.conflict as decided_elsewhere,
  m.decided_at as decided_at
from merge_proposal as m
join node as a on a.nid = m.a
join node as b on b.nid = m.b
where m.conflict is not null;

create view world_tree as
select
  -- Every world (a node with members): its parent, depth, member count and current Merkle root.
  lower(hex(n.id)) as id,
  n.type as type,
  json_extract(n.body, '$.name') as name,
  lower(hex(p.id)) as parent,
  n.depth as depth,
  s.size as members,
  lower(hex(s.root)) as root
from node as n
join node_state as s on s.nid = n.nid
left join node as p on p.nid = n.parent
where s.size > 0 or n.parent is null;

create view current_edge as
select
  -- Edges valid now, with readable ends.
  lower(hex(e.id)) as id,
  e.type as type,
  lower(hex(a.id)) as src,
  lower(hex(b.id)) as dst,
  e.valid_at as valid_at,
  e.created_at as created_at
from edge as e
join node as a on a.nid = e.src
join node as b on b.nid = e.dst
where e.expired_at is null
  and (e.invalid_at is null or e.invalid_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

-- Version 13: the two views a person reads first (`sqlite3 -box store.db 'select * from memory'`).
create view memory as
select
  -- One row per memory that says something: notes (Memory), turns, facts and summaries, every version,
  -- purged ones left out (entities and sessions are in node_history). The scope is the Scope world the node
  -- lies under (scopes hang under the root, so it is at most three worlds up: a turn's session's parent).
  -- state: current (what current_node shows), future (true from a later time), stale (retired, superseded,
  -- closed or no longer believed). speaker: a turn's name, a note's props.speaker, a fact's that of the
  -- turn or note it was learned from (see fact).
  lower(hex(n.id)) as id,
  json_extract(case when p1.type = 'Scope' then p1.body when p2.type = 'Scope' then p2.body
    when p3.type = 'Scope' then p3.body end, '$.name') as scope,
  n.type as kind,
  coalesce(json_extract(n.body, '$.props.speaker'), case when n.type = 'Turn' then json_extract(n.body, '$.name') end,
    (select coalesce(json_extract(x.body, '$.props.speaker'), case when x.type = 'Turn' then json_extract(x.body, '$.name') end)
      from edge as e join node as x on x.nid = e.dst
      where n.type = 'Fact' and e.src = n.nid and e.type = 'refers_to' and x.type in ('Turn', 'Memory')
      order by e.eid limit 1)) as speaker,
  json_extract(n.body, '$.content') as text,
  s.valid_at as valid_at,
  s.invalid_at as invalid_at,
  case
    when s.retired = 1 or s.expired_at is not null
      or (s.invalid_at is not null and s.invalid_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) then 'stale'
    when s.valid_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now') then 'future'
    else 'current'
  end as state,
  json_extract(n.body, '$.props.tags') as tags,  -- a JSON list of short strings, where the note has tags
  n.nid as nid  -- the row number node_fts, node_text and node_vec use: ... where nid in (select rowid from node_fts ...)
from node as n
join node_state as s on s.nid = n.nid
left join node as p1 on p1.nid = n.parent
left join node as p2 on p2.nid = p1.parent
left join node as p3 on p3.nid = p2.parent
where n.type in ('Memory', 'Turn', 'Fact', 'Summary') and n.body is not null;

create view fact as
select
  -- What the store learned, one row per Fact version: subject, slot and value, true since / until (world
  -- time: an update closes the old value's until at the new one's since), and the turn or note it was
  -- learned from (its first refers_to edge to one, in the order written: later ones said it again).
  lower(hex(n.id)) as id,
  json_extract(p.body, '$.name') as scope,
  json_extract(n.body, '$.props.subject') as subject,
  json_extract(n.body, '$.props.slot') as slot,
  json_extract(n.body, '$.props.value') as value,
  s.valid_at as since,
  s.invalid_at as until,
  case
    when s.retired = 1 or s.expired_at is not null
      or (s.invalid_at is not null and s.invalid_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) then 'stale'
    when s.valid_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now') then 'future'
    else 'current'
  end as state,
  lower(hex(src.id)) as learned_from,
  json_extract(src.body, '$.content') as learned_from_text
from node as n
join node_state as s on s.nid = n.nid
left join node as p on p.nid = n.parent and p.type = 'Scope'
left join node as src on src.nid = (
  select e.dst from edge as e join node as x on x.nid = e.dst
  where e.src = n.nid and e.type = 'refers_to' and x.type in ('Turn', 'Memory') order by e.eid limit 1)
where n.type = 'Fact' and n.body is not null;

-- Composed world embeddings (derived, rebuilt by `worlddb reembed`). A world's effective
-- embedding, the one node_vec holds, pools its children's effective embeddings around its own
-- content embedding, the stable anchor kept here. `acc` is the running weighted sum (float64)
-- so a change below a world updates it in O(1) instead of re-reading every child.
create table world_vec (
  nid integer primary key references node (nid),
  anchor blob,  -- float32: the content embedding of the world's own text as node_vec keeps it (int8-rounded); null for a world without text
  acc blob not null,  -- float64 sum of weight * vector over the anchor and the children
  members integer not null check (members >= 0)  -- children pooled
) strict;

-- Deferred extraction (System 2): one row per turn waiting for the extractor. The row is
-- written in the turn's transaction and marked done in the transaction that writes what was
-- extracted, so a crash loses nothing and nothing is processed twice.
create table work_queue (
  qid integer primary key,
  turn integer not null references node (nid),  -- the Turn node to read
  scope integer not null references node (nid),  -- the Scope world its facts go to
  said_at text not null,  -- the turn's time, against which relative dates resolve
  said_in text,  -- its conversation (orders facts said at one time)
  speaker text,
  enqueued_at text not null,
  done_at text  -- null while pending
) strict;
create index work_queue_pending on work_queue (qid) where done_at is null;
create unique index work_queue_turn on work_queue (turn);

-- Retention (consolidate/retention.py): which memories keep a place in the in-memory vector index. Operational
-- like node_vec: outside the Merkle roots, written in batches by recall and by the consolidator.
-- A memory's recent recalls: each time a recall returned it (recorded in batches, not by each read).
create table node_access (
  nid integer primary key references node (nid),
  hits integer not null check (hits >= 1),  -- how many recalls returned it
  recent text not null check (json_valid(recent))  -- JSON array of its last access times (UTC ISO-8601), oldest first
) strict;

-- The cold tier: memories left out of the in-memory vector index. They stay in the file, in full-text
-- search, in verify and in exports; `recall(include_cold=True)` ranks them by their vectors too.
create table cold_node (
  nid integer primary key references node (nid),
  moved_at text not null,  -- belief time the consolidator moved it
  score real not null,  -- its retention score then
  reason text not null  -- why: below the threshold, or beyond max_hot_vectors
) strict;

-- The cold memories and why they are cold: select * from cold_memory;
create view cold_memory as
select lower(hex(n.id)) as id, n.type, n.body ->> '$.content' as content, c.moved_at, c.score, c.reason
from cold_node as c join node as n on n.nid = c.nid;

-- Full-text index over each node's name and content (rowid = node.nid). The content column holds
-- the node's text and any text indexed with it (a turn's previous turn): the vector and the token
-- index read the same text. The context column holds words indexed for BM25 alone (a turn's other
-- neighbours: conversation.ingest), weighed lower (store/queries.py, fts_ranked); null for most nodes.
-- Contentless (content = ''): the index keeps no copy of the text, which the node's blob and
-- index_text hold; read a row back through the view node_text. A row is removed by FTS5's 'delete'
-- command with the values node_text gives (store/rows.py, unindex_texts), before its blob is erased.
create virtual table node_fts using fts5(name, content, context, content = '',
  tokenize = 'porter unicode61 remove_diacritics 2');

create table index_text (
  -- What a full-text row holds beyond its node's blob, for the nodes indexed with more than their own text.
  -- A text that is other turns of the same world, each "speaker: text" clipped to 1,000 characters and one
  -- a line (a conversation's windows), is kept as the list of those turns, not their text again.
  nid integer primary key references node (nid),
  added text,  -- indexed after the node's content (full text, vector, tokens): a turn's previous turn, bridged names
  context text,  -- node_fts.context: words for BM25 alone (a turn's other neighbours)
  added_from text,  -- instead of added: a JSON list of the nids of the turns it quotes, in order
  context_from text  -- instead of context: the same for the context
) strict;

create view node_text as
select
  -- Each full-text row as it was indexed: the blob's name and content, then what index_text adds
  -- (its turns' "speaker: text", clipped, one a line, where it lists them).
  t.nid as nid,
  t.name as name,
  case when t.added is null then t.own else t.own || char(10) || t.added end as content,
  t.context as context
from (
  select
    d.id as nid,
    coalesce(json_extract(n.body, '$.name'), '') as name,
    coalesce(json_extract(n.body, '$.content'), '') as own,
    coalesce(x.added, (select group_concat(case when coalesce(json_extract(q.body, '$.name'), '') = '' then ''
      else json_extract(q.body, '$.name') || ': ' end || substr(coalesce(json_extract(q.body, '$.content'), ''), 1, 1000),
      char(10)) from json_each(x.added_from) as j join node as q on q.nid = j.value)) as added,
    coalesce(x.context, (select group_concat(case when coalesce(json_extract(q.body, '$.name'), '') = '' then ''
      else json_extract(q.body, '$.name') || ': ' end || substr(coalesce(json_extract(q.body, '$.content'), ''), 1, 1000),
      char(10)) from json_each(x.context_from) as j join node as q on q.nid = j.value)) as context
  from node_fts_docsize as d
  join node as n on n.nid = d.id
  left join index_text as x on x.nid = d.id
) as t;

-- The first content tokens of each full-text row under the store's static model (index/token_index.py),
-- for the late-interaction stage of recall. Derived like node_fts: rewritten on re-embedding, and
-- whole when meta token_format names the code's format; empty for a store of another embedder.
create table node_tokens (
  nid integer primary key references node (nid),
  ids blob not null  -- token ids, little-endian: uint16 for a vocabulary of up to 65,536 tokens, else int32
) strict;

-- Each node's effective embedding (see world_vec), searched through an in-memory IVF index
-- (index/vector_index.py). A plain table, so any sqlite3 shell reads it; with sqlite-vec loaded,
-- vec_distance_cosine(vec_int8(embedding), vec_quantize_int8(vec_f32('[...]'), 'unit')) scores it directly.
-- Version 15: int8 codes, a quarter of float32's bytes; the vector is embedding * scale, of unit length,
-- and the in-memory index holds these very codes, so its scores are that vector's (index/vector_index.py).
create table node_vec (
  nid integer primary key references node (nid),
  part integer not null default 0,  -- IVF partition: the nearest vec_centroid row when written (0 before training)
  seq integer not null,  -- change number: open stores refresh their index from rows with a newer seq
  embedding blob not null,  -- int8, one byte a dimension: the vector's direction
  scale real not null check (scale > 0)  -- 1 / the codes' length: embedding * scale is a unit vector
) strict;
create index node_vec_seq on node_vec (seq);
create index node_vec_part on node_vec (part);  -- partition sizes, for splitting the ones that swell

-- Version 14: the in-memory vector index kept in the file, so opening a store reads it instead of coding
-- every node_vec row again (index/segments.py). Derived like node_vec: each segment holds the rows of
-- node_vec whose seq lies in (first_seq, last_seq], coded as the index holds them, for the epoch
-- (meta vec_epoch) they were coded in; a segment of another epoch is dead. Rows are int8 codes times a
-- per-row scale times the epoch's per-dimension spread; a later segment's row stands over an earlier's.
create table vec_segment (
  seg integer primary key,  -- appended in order
  epoch text not null,  -- meta vec_epoch when coded
  first_seq integer not null,  -- the node_vec rows with first_seq < seq <= last_seq that are not cold
  last_seq integer not null,
  piece integer not null,  -- its place among the segments written together for one span (0 first) ...
  pieces integer not null,  -- ... and how many there are: a span is whole only with every piece
  dim integer not null,
  rows integer not null,
  -- the small columns first: a read of them stops before the codes' overflow pages
  spread blob not null,  -- float32, dim: the divisor of each dimension before coding
  digest blob not null,  -- blake3 of the other fields: a damaged segment is rebuilt from node_vec
  types text not null,  -- JSON array of the node type names type_codes number
  nids blob not null,  -- int64 little-endian
  parts blob not null,  -- int32: each row's IVF partition
  parents blob not null,  -- int64: each node's parent (-1: none)
  type_codes blob not null,  -- uint16: each row's index into types
  codes blob not null,  -- int8, rows x dim
  scales blob not null  -- float32, rows x 2: (scale, error bound)
) strict;
create index vec_segment_epoch on vec_segment (epoch, seg);

-- IVF centroids (unit float32), trained by k-means over the vectors (index/vector_index.py).
create table vec_centroid (
  part integer primary key,  -- the partition number node_vec.part refers to
  centroid blob not null  -- float32 little-endian, unit length
) strict;

-- Version 12: every other table whose rows matter is written only inside an engine transaction (a
-- reconciler_session row: the reconciler, a purge, a merge, or the engine's own upkeep: store/rows.py
-- maintenance), so a raw write from the sqlite3 shell is refused as it is for node and edge.
create trigger meta_insert_guard before insert on meta
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the store metadata (embedder, store id, settings) is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger meta_update_guard before update on meta
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the store metadata (embedder, store id, settings) is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger meta_delete_guard before delete on meta
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the store metadata (embedder, store id, settings) is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger alias_insert_guard before insert on alias
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: aliases are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger alias_update_guard before update on alias
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: aliases are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger alias_delete_guard before delete on alias
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: aliases are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger node_vec_insert_guard before insert on node_vec
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: vectors are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger node_vec_update_guard before update on node_vec
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: vectors are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger node_vec_delete_guard before delete on node_vec
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: vectors are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger vec_segment_insert_guard before insert on vec_segment
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the vector index is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger vec_segment_update_guard before update on vec_segment
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the vector index is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger vec_segment_delete_guard before delete on vec_segment
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the vector index is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger node_tokens_insert_guard before insert on node_tokens
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the token index is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger node_tokens_update_guard before update on node_tokens
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the token index is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger node_tokens_delete_guard before delete on node_tokens
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the token index is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger tombstone_insert_guard before insert on tombstone
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: purge tombstones are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger change_log_insert_guard before insert on change_log
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the change log is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger change_log_update_guard before update on change_log
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the change log is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger change_log_delete_guard before delete on change_log
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the change log is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger sync_peer_insert_guard before insert on sync_peer
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: sync peers are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger sync_peer_update_guard before update on sync_peer
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: sync peers are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger sync_peer_delete_guard before delete on sync_peer
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: sync peers are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger cold_node_insert_guard before insert on cold_node
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the cold tier is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger cold_node_update_guard before update on cold_node
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the cold tier is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger cold_node_delete_guard before delete on cold_node
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the cold tier is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger work_queue_insert_guard before insert on work_queue
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the extraction queue is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger work_queue_update_guard before update on work_queue
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the extraction queue is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger work_queue_delete_guard before delete on work_queue
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the extraction queue is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger legacy_order_insert_guard before insert on legacy_order
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the legacy member order is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger legacy_order_update_guard before update on legacy_order
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the legacy member order is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger legacy_order_delete_guard before delete on legacy_order
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the legacy member order is written only by the worlddb engine; a raw write around it is refused');
end;

create trigger merge_proposal_insert_guard before insert on merge_proposal
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: merge proposals are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger merge_proposal_update_guard before update on merge_proposal
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: merge proposals are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger merge_proposal_delete_guard before delete on merge_proposal
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: merge proposals are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger vec_centroid_insert_guard before insert on vec_centroid
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the IVF centroids are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger vec_centroid_update_guard before update on vec_centroid
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the IVF centroids are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger vec_centroid_delete_guard before delete on vec_centroid
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the IVF centroids are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger world_vec_insert_guard before insert on world_vec
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: world compositions are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger world_vec_update_guard before update on world_vec
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: world compositions are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger world_vec_delete_guard before delete on world_vec
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: world compositions are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger index_text_insert_guard before insert on index_text
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the texts of the full-text index are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger index_text_update_guard before update on index_text
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the texts of the full-text index are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger index_text_delete_guard before delete on index_text
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the texts of the full-text index are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger merkle_insert_guard before insert on merkle
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the Merkle trees are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger merkle_update_guard before update on merkle
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the Merkle trees are written only by the worlddb engine; a raw write around it is refused');
end;

create trigger merkle_delete_guard before delete on merkle
when not exists (select 1 from reconciler_session)
begin
  select raise(abort, 'worlddb: the Merkle trees are written only by the worlddb engine; a raw write around it is refused');
end;
