"""edges/: each handler is a pure decision over an EdgeDraft and a read-only EdgeContext (table-driven)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from worlddb_lite.edges import (
    DEFAULT_EDGE_TYPES,
    BaseEdgeType,
    CloseValidity,
    EdgeDraft,
    EdgeRegistry,
    EdgeType,
    EndView,
    QueryRules,
    SkipEdgeRow,
    StageMerge,
)
from worlddb_lite.errors import (
    CycleError,
    EdgeRefused,
    InvalidInput,
    NotCurrent,
    UnknownEdgeType,
    WorldDBError,
)
from worlddb_lite.types import MergeStatus

T1, T2, T3 = "2024-01-01T00:00:00.000000Z", "2024-02-01T00:00:00.000000Z", "2024-03-01T00:00:00.000000Z"
BY_NAME = {t.name: t for t in DEFAULT_EDGE_TYPES}


@dataclass
class FakeCtx:
    """An EdgeContext over plain sets: ancestors[node] = set of its ancestors (itself included implicitly)."""

    ancestors: dict[int, set[int]] = field(default_factory=dict)
    statuses: dict[tuple[int, int], MergeStatus] = field(default_factory=dict)
    paths: set[tuple[str, int, int]] = field(default_factory=set)
    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)

    def is_ancestor(self, ancestor: int, node: int) -> bool:
        self.calls.append(("is_ancestor", (ancestor, node)))
        return ancestor == node or ancestor in self.ancestors.get(node, set())

    def merge_status(self, a: int, b: int) -> MergeStatus | None:
        self.calls.append(("merge_status", (a, b)))
        return self.statuses.get((min(a, b), max(a, b)))

    def reaches(self, edge_type: str, src: int, dst: int) -> bool:
        self.calls.append(("reaches", (edge_type, src, dst)))
        return src == dst or (edge_type, src, dst) in self.paths


def end(
    nid: int,
    *,
    valid: str = T1,
    invalid: str | None = None,
    expired: str | None = None,
    retired: bool = False,
    type_: str = "Memory",
) -> EndView:
    return EndView(
        nid=nid,
        id=f"{nid:064x}",
        type=type_,
        valid_at=valid,
        invalid_at=invalid,
        expired_at=expired,
        retired=retired,
    )


def draft(type_: str, src: EndView, dst: EndView, *, accepting: bool = False, **props: Any) -> EdgeDraft:
    return EdgeDraft(type_, src, dst, props, src.valid_at, accepting)


# (case id, edge type, src, dst, context, expected decisions or exception type)
CASES: list[tuple[str, str, EndView, EndView, FakeCtx, Sequence[object] | type[Exception]]] = [
    # every default type refuses a self-loop
    *[(f"{name}-self-loop", name, end(1), end(1), FakeCtx(), EdgeRefused) for name in BY_NAME],
    # contains: a world may not contain itself or an ancestor
    ("contains-ok", "contains", end(1), end(2), FakeCtx(), []),
    ("contains-parent", "contains", end(2), end(1), FakeCtx(ancestors={2: {1}}), CycleError),
    ("contains-grandparent", "contains", end(3), end(1), FakeCtx(ancestors={3: {2, 1}}), CycleError),
    ("contains-descendant-ok", "contains", end(1), end(3), FakeCtx(ancestors={3: {2, 1}}), []),
    # supersedes: closes the old version at the new one's valid time, only ever tightening
    (
        "supersedes-closes",
        "supersedes",
        end(2, valid=T2),
        end(1, valid=T1),
        FakeCtx(),
        [CloseValidity(1, T2)],
    ),
    (
        "supersedes-same-time",
        "supersedes",
        end(2, valid=T1),
        end(1, valid=T1),
        FakeCtx(),
        [CloseValidity(1, T1)],
    ),
    ("supersedes-earlier-new", "supersedes", end(2, valid=T1), end(1, valid=T2), FakeCtx(), EdgeRefused),
    (
        "supersedes-retracted-old",
        "supersedes",
        end(2, valid=T2),
        end(1, valid=T1, expired=T2),
        FakeCtx(),
        NotCurrent,
    ),
    (
        "supersedes-already-closed-earlier",
        "supersedes",
        end(2, valid=T3),
        end(1, valid=T1, invalid=T2),
        FakeCtx(),
        [],
    ),
    (
        "supersedes-already-closed-same",
        "supersedes",
        end(2, valid=T2),
        end(1, valid=T1, invalid=T2),
        FakeCtx(),
        [],
    ),
    (
        "supersedes-tightens-later-close",
        "supersedes",
        end(2, valid=T2),
        end(1, valid=T1, invalid=T3),
        FakeCtx(),
        [CloseValidity(1, T2)],
    ),
    # same_as: stages a proposal and writes no row until accepted; rejection is final
    (
        "same_as-new",
        "same_as",
        end(5),
        end(3),
        FakeCtx(),
        [StageMerge(3, 5, "same_as requested"), SkipEdgeRow("pending")],
    ),
    (
        "same_as-pending",
        "same_as",
        end(3),
        end(5),
        FakeCtx(statuses={(3, 5): MergeStatus.PENDING}),
        [SkipEdgeRow("same_as already pending")],
    ),
    (
        "same_as-accepted-not-accepting",
        "same_as",
        end(3),
        end(5),
        FakeCtx(statuses={(3, 5): MergeStatus.ACCEPTED}),
        [SkipEdgeRow("same_as already accepted")],
    ),
    (
        "same_as-rejected",
        "same_as",
        end(3),
        end(5),
        FakeCtx(statuses={(3, 5): MergeStatus.REJECTED}),
        EdgeRefused,
    ),
    # order relations refuse cycles
    ("subtype_of-ok", "subtype_of", end(1), end(2), FakeCtx(), []),
    ("subtype_of-cycle", "subtype_of", end(1), end(2), FakeCtx(paths={("subtype_of", 2, 1)}), CycleError),
    ("precedes-ok", "precedes", end(1), end(2), FakeCtx(paths={("precedes", 1, 2)}), []),
    ("precedes-cycle", "precedes", end(1), end(2), FakeCtx(paths={("precedes", 2, 1)}), CycleError),
    ("precedes-other-type-path", "precedes", end(1), end(2), FakeCtx(paths={("subtype_of", 2, 1)}), []),
    # plain types: no side effects
    *[
        (f"{name}-ok", name, end(1), end(2), FakeCtx(), [])
        for name in ("refers_to", "contradicts", "implies", "derived_from", "instance_of", "causes")
    ],
    ("contradicts-closed-side-ok", "contradicts", end(1, invalid=T2), end(2), FakeCtx(), []),
    # duplicates: a restatement of a memory of the same type
    ("duplicates-ok", "duplicates", end(1), end(2), FakeCtx(), []),
    ("duplicates-self-loop", "duplicates", end(1), end(1), FakeCtx(), EdgeRefused),
    ("duplicates-other-type", "duplicates", end(1, type_="Fact"), end(2), FakeCtx(), EdgeRefused),
]


@pytest.mark.parametrize(("type_", "src", "dst", "ctx", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_on_insert(
    type_: str, src: EndView, dst: EndView, ctx: FakeCtx, expected: Sequence[object] | type[Exception]
) -> None:
    handler = BY_NAME[type_]
    edge = draft(type_, src, dst)
    if isinstance(expected, type):
        with pytest.raises(expected) as info:
            handler.on_insert(edge, ctx)
        assert isinstance(info.value, WorldDBError)
        assert str(info.value)  # says why
    else:
        assert list(handler.on_insert(edge, ctx)) == list(expected)


def test_same_as_accepting_an_accepted_pair_writes_the_row() -> None:
    ctx = FakeCtx(statuses={(3, 5): MergeStatus.ACCEPTED})
    assert list(BY_NAME["same_as"].on_insert(draft("same_as", end(5), end(3), accepting=True), ctx)) == []


def test_same_as_accepting_a_rejected_pair_is_refused() -> None:
    ctx = FakeCtx(statuses={(3, 5): MergeStatus.REJECTED})
    with pytest.raises(EdgeRefused):
        BY_NAME["same_as"].on_insert(draft("same_as", end(5), end(3), accepting=True), ctx)


def test_same_as_reason_comes_from_props() -> None:
    decisions = BY_NAME["same_as"].on_insert(draft("same_as", end(1), end(2), reason="same email"), FakeCtx())
    assert StageMerge(1, 2, "same email") in decisions


@pytest.mark.parametrize(
    ("type_", "refuses"),
    [
        ("supersedes", True),
        ("same_as", True),
        ("contains", False),
        ("refers_to", False),
        ("contradicts", False),
        ("implies", False),
        ("derived_from", False),
        ("instance_of", False),
        ("subtype_of", False),
        ("causes", False),
        ("precedes", False),
        ("duplicates", False),
    ],
)
def test_on_delete(type_: str, refuses: bool) -> None:
    edge = draft(type_, end(2, valid=T2), end(1))
    if refuses:
        with pytest.raises(EdgeRefused):
            BY_NAME[type_].on_delete(edge, FakeCtx())
    else:
        assert list(BY_NAME[type_].on_delete(edge, FakeCtx())) == []


def test_handlers_only_read_through_the_context() -> None:
    ctx = FakeCtx()
    for name, handler in BY_NAME.items():
        handler.on_insert(draft(name, end(1), end(2)), ctx)
    kinds = {kind for kind, _ in ctx.calls}
    assert kinds <= {"is_ancestor", "merge_status", "reaches"}


def test_query_rules_folded_from_every_type() -> None:
    rules = EdgeRegistry().rules()
    assert rules == QueryRules(
        include_superseded=False,
        membership=frozenset({"contains"}),
        pierce=frozenset({"refers_to"}),
        annotate=frozenset({"supersedes", "contradicts"}),
    )
    assert EdgeRegistry().rules(include_superseded=True).include_superseded is True


def test_registry_knows_the_thirteen_defaults() -> None:
    assert EdgeRegistry().names() == tuple(
        sorted(
            [
                "contains",
                "refers_to",
                "supersedes",
                "same_as",
                "contradicts",
                "implies",
                "derived_from",
                "instance_of",
                "subtype_of",
                "causes",
                "precedes",
                "duplicates",
                "may_update",
            ]
        )
    )
    for edge_type in DEFAULT_EDGE_TYPES:
        assert isinstance(edge_type, EdgeType)


@pytest.mark.parametrize("name", ["nope", "", "Contains", None, 3])
def test_unknown_edge_type(name: object) -> None:
    with pytest.raises(UnknownEdgeType) as info:
        EdgeRegistry().get(name)  # type: ignore[arg-type]
    assert isinstance(info.value, KeyError)
    message = str(info.value)
    assert "known types" in message and not message.startswith(("'", '"'))  # not KeyError's repr


class Mentors(BaseEdgeType):
    name = "mentors"


class Loops(BaseEdgeType):
    name = "loops"
    allow_self_loop = True


def test_register_custom_type_and_refuse_shadowing() -> None:
    registry = EdgeRegistry()
    registry.register(Mentors())
    assert "mentors" in registry.names()
    with pytest.raises(InvalidInput, match="already exists"):
        registry.register(Mentors())
    with pytest.raises(InvalidInput, match="already exists"):
        registry.register(type("Shadow", (BaseEdgeType,), {"name": "contains"})())
    replacement = Mentors()
    registry.register(replacement, replace=True)
    assert registry.get("mentors") is replacement


@pytest.mark.parametrize("bad_name", ["", "Mentors", "has space", "1st", "x" * 65, "dash-ed"])
def test_register_refuses_bad_names(bad_name: str) -> None:
    with pytest.raises(InvalidInput):
        EdgeRegistry().register(type("Bad", (BaseEdgeType,), {"name": bad_name})())


def test_register_refuses_non_edge_types() -> None:
    with pytest.raises(InvalidInput):
        EdgeRegistry().register(object())  # type: ignore[arg-type]


def test_base_edge_type_self_loop_policy() -> None:
    with pytest.raises(EdgeRefused):
        Mentors().on_insert(draft("mentors", end(1), end(1)), FakeCtx())
    assert list(Loops().on_insert(draft("loops", end(1), end(1)), FakeCtx())) == []
    assert Mentors().on_query_rewrite(QueryRules()) == QueryRules()


def test_end_view_current() -> None:
    assert end(1).current
    assert not end(1, invalid=T2).current
    assert not end(1, expired=T2).current
    assert not end(1, retired=True).current
