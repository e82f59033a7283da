"""The hand-written scenario corpus (tests/fixtures/scenarios/cases.jsonl) keeps its rules."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
CASES = ROOT / "tests" / "fixtures" / "scenarios" / "cases.jsonl"


@pytest.fixture(scope="module")
def sc():
    sys.path.insert(0, str(BENCH))
    try:
        import scenario_cases
    finally:
        sys.path.remove(str(BENCH))
    return scenario_cases


@pytest.fixture(scope="module")
def cases(sc):
    return sc.load(CASES)


def test_default_path_is_the_fixture(sc):
    assert sc.DEFAULT_PATH == CASES
    assert len(sc.load()) == len(sc.load(CASES))


def test_counts_per_kind_and_total(sc, cases):
    counts = Counter(c.kind for c in cases)
    assert set(counts) == set(sc.KINDS)
    assert all(counts[k] >= 18 for k in sc.KINDS), counts
    assert len(cases) >= 260


def test_conversations_and_split(cases):
    convs = {c.conversation for c in cases}
    assert len(convs) >= 5
    dev = {c.conversation for c in cases if c.split == "dev"}
    test = {c.conversation for c in cases if c.split == "test"}
    assert dev and test and not dev & test
    assert dev | test == convs
    # about two thirds of the conversations are dev
    assert 0.5 <= len(dev) / len(convs) <= 0.8
    for conv in convs:
        assert len({c.person for c in cases if c.conversation == conv}) == 1


def test_expected_is_a_substring_of_exactly_one_final_memory(cases):
    for c in cases:
        texts = c.final_texts()
        if c.expected is None:
            assert c.kind in ("never_said", "retire"), c.id
            continue
        assert sum(c.expected in t for t in texts) == 1, c.id
        assert c.expected_index() not in c.retired(), c.id


def test_times_are_ordered_and_as_of_sits_between(sc, cases):
    for c in cases:
        times = [sc.parse_at(m.at) for m in c.memories] + [sc.parse_at(s.at) for s in c.steps]
        assert times == sorted(times) and len(set(times)) == len(times), c.id
        if c.kind == "as_of":
            at = sc.parse_at(c.as_of)
            assert sc.parse_at(c.memories[c.expected_index()].at) < at < max(times), c.id
        else:
            assert c.as_of is None, c.id


def test_amends_expect_the_new_text_only(cases):
    for c in cases:
        if c.kind in ("amend_note", "amend_turn"):
            i = c.expected_index()
            assert any(s.op == "amend" and s.memory == i for s in c.steps), c.id
            assert c.expected not in c.memories[i].text, c.id


def test_lexical_gap_shares_no_content_stem(sc, cases):
    for c in cases:
        if c.kind == "lexical_gap":
            memory = c.final_texts()[c.expected_index()]
            assert not sc.content_stems(c.question) & sc.content_stems(memory), c.id
    assert sc.content_stems("I played tennis") & sc.content_stems("do I play tennis?")


def test_cases_are_frozen(sc, cases):
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        cases[0].question = "x"
    assert isinstance(cases[0].memories, tuple) and isinstance(cases[0].steps, tuple)


def _line(**over):
    base = {
        "id": "conv-26-001",
        "conversation": "conv-26",
        "person": "Caroline",
        "split": "dev",
        "kind": "note_among_conversation",
        "memories": [{"via": "write", "text": "Caroline's dentist is Dr. Sato.", "at": "2023-11-01T09:00:00Z"}],
        "steps": [],
        "question": "Who is Caroline's dentist?",
        "as_of": None,
        "expected": "Dr. Sato",
        "notes": "n",
    }
    base.update(over)
    return json.dumps(base)


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"expected": "Dr. Who"}, "exactly one memory"),
        ({"kind": "bogus"}, "is not one of"),
        ({"split": "train"}, "split"),
        ({"as_of": "2023-11-02T00:00:00Z"}, "as_of must be set"),
        ({"memories": [{"via": "write", "text": "t", "at": "2023-11-01 09:00"}]}, "ISO-8601"),
        ({"kind": "never_said"}, "never_said: expected must be null"),
        ({"kind": "lexical_gap"}, "share content stems"),
        ({"steps": [{"op": "retire", "memory": 3, "at": "2023-11-02T09:00:00Z"}]}, "must index"),
        ({"steps": [{"op": "retire", "memory": 0, "at": "2023-10-01T09:00:00Z"}]}, "increasing time order"),
        ({"id": "conv-30-001"}, "id must be"),
    ],
)
def test_loader_reports_broken_rules(sc, tmp_path, over, message):
    path = tmp_path / "cases.jsonl"
    path.write_text(_line(**over) + "\n")
    with pytest.raises(sc.CorpusError) as info:
        sc.load(path)
    assert message in str(info.value)


def test_loader_reports_split_clash_and_duplicate_ids(sc, tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text(_line() + "\n" + _line(split="test") + "\n")
    with pytest.raises(sc.CorpusError) as info:
        sc.load(path)
    assert "appears 2 times" in str(info.value) and "more than one split" in str(info.value)


def test_a_good_line_loads(sc, tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text(_line() + "\n")
    (case,) = sc.load(path)
    assert case.expected_index() == 0 and case.memories[0].via == "write"


def test_dates_and_speakers_against_locomo(sc, cases):
    if not sc.LOCOMO_PATH.exists():
        pytest.skip(f"LoCoMo data absent ({sc.LOCOMO_PATH}); the date and speaker checks need it")
    assert sc.check_against_locomo(cases) == []


def test_script_prints_counts(sc, capsys):
    assert sc.main([str(CASES), "--locomo", str(sc.LOCOMO_PATH)]) == 0
    out = capsys.readouterr().out
    assert "total" in out and "never_said" in out
