"""The scenario corpus: hand-written memory cases on top of LoCoMo conversations.

    python bench/scenario_cases.py [PATH] [--locomo LOCOMO_JSON]

``load(path=None)`` reads ``tests/fixtures/scenarios/cases.jsonl`` (one JSON object a line), checks every
rule the corpus promises (see ``tests/fixtures/scenarios/README.md``) and returns frozen ``Case`` records.
It needs only the standard library and never the LoCoMo file. ``check_against_locomo(cases, path)`` adds
the checks that do need it (speakers, dates after each conversation's last session). Run as a script, it
prints counts per kind and split, and runs the LoCoMo checks too when the data file is present.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATH = ROOT / "tests" / "fixtures" / "scenarios" / "cases.jsonl"
LOCOMO_PATH = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"  # shared/ beside the checkout

KINDS = (
    "note_among_conversation",
    "fact_in_live_turn",
    "update_by_note",
    "update_by_turn",
    "as_of",
    "retire",
    "amend_note",
    "amend_turn",
    "instruction",
    "preference",
    "relation",
    "look_alike",
    "lexical_gap",
    "never_said",
)
SPLITS = ("dev", "test")
FIELDS = (
    "id",
    "conversation",
    "person",
    "split",
    "kind",
    "memories",
    "steps",
    "question",
    "as_of",
    "expected",
    "notes",
)
ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
ID_RE = re.compile(r"^(conv-\d+)-(\d{3})$")
MAX_TURN_GAP = dt.timedelta(minutes=30)  # live turns of one session are minutes apart
MIN_OTHER_TURNS, MAX_OTHER_TURNS = 2, 6  # fact_in_live_turn: the fact among 2-6 other live turns


# Words that carry no content, for the lexical_gap rule (question and memory share no content word or stem).
STOPWORDS = frozenset(
    """a an the i me my mine we our ours us you your he him his she her hers they them their it its is are was were
    be been being am do does did doing have has had having what which who whom whose when where why how to of in on
    at for with by from up down out about into over after before than then so and or but not no if as this that these
    those there here can could would should will shall may might must just also very too any some all each every
    more most other again now still ever s t d ll m re ve don doesn didn can't won""".split()
)
WORD_RE = re.compile(r"[a-z0-9]+")


def stem(word: str) -> str:
    """A crude stem: one common suffix off, then the first five letters (play/played, runs/running)."""
    for suffix in ("ing", "ed", "es", "s", "er", "ly"):
        if len(word) > 4 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    return word[:5]


def content_stems(text: str) -> set[str]:
    """Stems of the content words of a text (apostrophes split words: "Gina's" gives "gina")."""
    return {stem(w) for w in WORD_RE.findall(text.lower().replace("\u2019", "'")) if w not in STOPWORDS}


class CorpusError(ValueError):
    """The corpus breaks one or more rules; ``problems`` lists each as 'line N (id): what'."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"{len(problems)} problem(s) in the scenario corpus:\n  " + "\n  ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Memory:
    """One memory added on top of the conversation: a note (``write``) or a live turn (``add_turn``)."""

    via: str
    text: str
    at: str
    speaker: str | None = None
    session: str | None = None


@dataclass(frozen=True)
class Step:
    """An operation applied after all memories: ``retire`` one, or ``amend`` one to a new ``text``."""

    op: str
    memory: int
    at: str
    text: str | None = None


@dataclass(frozen=True)
class Case:
    """One scenario: memories and steps to apply, a question, and the memory that answers it (or None)."""

    id: str
    conversation: str
    person: str
    split: str
    kind: str
    memories: tuple[Memory, ...]
    steps: tuple[Step, ...]
    question: str
    as_of: str | None
    expected: str | None
    notes: str

    def final_texts(self) -> tuple[str, ...]:
        """Each memory's text after the amends."""
        texts = [m.text for m in self.memories]
        for s in self.steps:
            if s.op == "amend" and s.text is not None:
                texts[s.memory] = s.text
        return tuple(texts)

    def retired(self) -> frozenset[int]:
        """Indexes of the memories retired by a step."""
        return frozenset(s.memory for s in self.steps if s.op == "retire")

    def expected_index(self) -> int | None:
        """Index of the one memory whose final text holds ``expected`` (None when nothing should answer)."""
        if self.expected is None:
            return None
        hits = [i for i, t in enumerate(self.final_texts()) if self.expected in t]
        return hits[0] if len(hits) == 1 else None


def parse_at(value: str) -> dt.datetime:
    """An ISO-8601 UTC instant of the form 2023-11-01T09:00:00Z."""
    if not isinstance(value, str) or not ISO_UTC.match(value):
        raise ValueError(f"not an ISO-8601 UTC time like 2023-11-01T09:00:00Z: {value!r}")
    return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)


def _text(obj: dict, key: str, where: str, problems: list[str], optional: bool = False) -> str | None:
    value = obj.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: {key!r} must be a non-empty string, got {value!r}")
        return None
    return value


def _build(raw: dict, where: str, problems: list[str]) -> Case | None:
    """Case from one parsed line, or None (with problems noted) if its shape is wrong."""
    missing = [f for f in FIELDS if f not in raw]
    extra = [k for k in raw if k not in FIELDS]
    if missing or extra:
        problems.append(f"{where}: missing fields {missing}, unknown fields {extra}")
        return None
    n_before = len(problems)
    for key in ("id", "conversation", "person", "split", "kind", "question", "notes"):
        _text(raw, key, where, problems)
    for key in ("as_of", "expected"):
        _text(raw, key, where, problems, optional=True)
    if not isinstance(raw["memories"], list) or not isinstance(raw["steps"], list):
        problems.append(f"{where}: 'memories' and 'steps' must be lists")
        return None
    memories = []
    for i, m in enumerate(raw["memories"]):
        w = f"{where} memory {i}"
        if not isinstance(m, dict) or set(m) - {"via", "text", "at", "speaker", "session"}:
            problems.append(f"{w}: must be an object with via, text, at[, speaker, session]")
            continue
        via = m.get("via")
        if via not in ("write", "add_turn"):
            problems.append(f"{w}: 'via' must be 'write' or 'add_turn', got {via!r}")
        for key in ("text", "at"):
            _text(m, key, w, problems)
        if via == "add_turn":
            _text(m, "speaker", w, problems)
            _text(m, "session", w, problems)
        else:
            _text(m, "speaker", w, problems, optional=True)
            if m.get("session") is not None:
                problems.append(f"{w}: a note ('write') has no 'session'")
        memories.append(Memory(via, m.get("text"), m.get("at"), m.get("speaker"), m.get("session")))
    steps = []
    for j, s in enumerate(raw["steps"]):
        w = f"{where} step {j}"
        if not isinstance(s, dict) or set(s) - {"op", "memory", "at", "text"}:
            problems.append(f"{w}: must be an object with op, memory, at[, text]")
            continue
        op, idx = s.get("op"), s.get("memory")
        if op not in ("retire", "amend"):
            problems.append(f"{w}: 'op' must be 'retire' or 'amend', got {op!r}")
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < len(raw["memories"]):
            problems.append(f"{w}: 'memory' must index one of the case's {len(raw['memories'])} memories")
        _text(s, "at", w, problems)
        if op == "amend":
            _text(s, "text", w, problems)
        elif "text" in s:
            problems.append(f"{w}: a retire step has no 'text'")
        steps.append(Step(op, idx, s.get("at"), s.get("text")))
    if len(problems) > n_before:
        return None
    return Case(
        raw["id"],
        raw["conversation"],
        raw["person"],
        raw["split"],
        raw["kind"],
        tuple(memories),
        tuple(steps),
        raw["question"],
        raw["as_of"],
        raw["expected"],
        raw["notes"],
    )


def check_case(case: Case) -> list[str]:
    """The rules one case must keep on its own (no LoCoMo data needed)."""
    out = []
    m = ID_RE.match(case.id)
    if not m or m.group(1) != case.conversation:
        out.append(f"id must be '<conversation>-NNN' (conversation {case.conversation!r})")
    if case.kind not in KINDS:
        out.append(f"kind {case.kind!r} is not one of {', '.join(KINDS)}")
    if case.split not in SPLITS:
        out.append(f"split {case.split!r} must be 'dev' or 'test'")
    try:
        times = [parse_at(x.at) for x in case.memories]
        step_times = [parse_at(s.at) for s in case.steps]
        as_of = parse_at(case.as_of) if case.as_of is not None else None
    except ValueError as exc:
        return [*out, str(exc)]
    everything = times + step_times
    for a, b in zip(everything, everything[1:], strict=False):
        if b <= a:
            out.append("memories then steps must be in strictly increasing time order")
            break
    last_in_session: dict[str, dt.datetime] = {}
    for x, t in zip(case.memories, times, strict=True):
        if x.via != "add_turn":
            continue
        prev = last_in_session.get(x.session)
        if prev is not None and t - prev > MAX_TURN_GAP:
            out.append(f"live turns of session {x.session!r} must be minutes apart, not {t - prev}")
        last_in_session[x.session] = t
    retired = case.retired()
    for s in case.steps:
        if s.op == "amend" and s.memory in retired:
            out.append(f"memory {s.memory} is amended and also retired")
    texts = case.final_texts()
    if case.expected is not None:
        hits = [i for i, t in enumerate(texts) if case.expected in t]
        if len(hits) != 1:
            out.append(f"expected {case.expected!r} must be in exactly one memory's final text, found in {hits}")
    idx = case.expected_index()
    target = case.memories[idx] if idx is not None else None
    if idx is not None and idx in retired:
        out.append(f"expected is in memory {idx}, which is retired")
    # kind-specific rules
    kind = case.kind
    if kind == "never_said":
        if case.expected is not None:
            out.append("never_said: expected must be null")
        if len(case.memories) > 3:
            out.append("never_said: at most 3 unrelated memories")
    elif kind == "retire":
        if not retired:
            out.append("retire: needs a retire step")
    elif case.expected is None:
        out.append(f"{kind}: expected must not be null")
    if (kind == "as_of") != (as_of is not None):
        out.append("as_of must be set for kind as_of, and only for it")
    if kind == "as_of" and idx is not None and as_of is not None:
        if not times[idx] < as_of:
            out.append("as_of: the expected (older) memory must predate as_of")
        if not any(t > as_of for t in times):
            out.append("as_of: a newer memory must come after as_of")
        if any(times[idx] < t <= as_of for t in times):
            out.append("as_of: the expected memory must be the newest one at as_of")
    if target is None:
        return out
    if kind == "note_among_conversation" and target.via != "write":
        out.append("note_among_conversation: expected must be in a note ('write')")
    if kind == "fact_in_live_turn":
        if target.via != "add_turn":
            out.append("fact_in_live_turn: expected must be in a live turn")
        else:
            others = sum(1 for x in case.memories if x.via == "add_turn" and x.session == target.session) - 1
            if not MIN_OTHER_TURNS <= others <= MAX_OTHER_TURNS:
                out.append(f"fact_in_live_turn: the fact must sit among 2-6 other live turns, not {others}")
    if kind in ("update_by_note", "update_by_turn"):
        want = "write" if kind == "update_by_note" else "add_turn"
        if target.via != want:
            out.append(f"{kind}: the newer value must come via {want!r}")
        if not any(t < times[idx] for t in times):
            out.append(f"{kind}: the newer value must come after an older one")
        if kind == "update_by_note":
            if any(x.via != "write" for x in case.memories):
                out.append("update_by_note: both values are notes")
            elif times[idx] != max(times):
                out.append("update_by_note: expected must be the newest note")
    if kind in ("amend_note", "amend_turn"):
        want = "write" if kind == "amend_note" else "add_turn"
        amended = [s for s in case.steps if s.op == "amend" and s.memory == idx]
        if not amended:
            out.append(f"{kind}: expected must be in an amended memory")
        elif case.expected in target.text:
            out.append(f"{kind}: expected must come from the new text only, not the original")
        if target.via != want:
            out.append(f"{kind}: the amended memory must come via {want!r}")
    if kind == "lexical_gap":
        shared = content_stems(case.question) & content_stems(texts[idx])
        if shared:
            out.append(f"lexical_gap: question and expected memory share content stems {sorted(shared)}")
    if kind == "look_alike" and len(case.memories) < 2:
        out.append("look_alike: both memories must be in the case")
    return out


def load(path: str | Path | None = None) -> list[Case]:
    """Every case in the corpus, after checking every rule; raises CorpusError listing all problems."""
    path = Path(path) if path is not None else DEFAULT_PATH
    problems: list[str] = []
    cases: list[Case] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"line {n}: not JSON ({exc})")
            continue
        if not isinstance(raw, dict):
            problems.append(f"line {n}: not a JSON object")
            continue
        where = f"line {n} ({raw.get('id', '?')})"
        case = _build(raw, where, problems)
        if case is None:
            continue
        problems.extend(f"{where}: {p}" for p in check_case(case))
        cases.append(case)
    problems.extend(check_corpus(cases))
    if problems:
        raise CorpusError(problems)
    return cases


def check_corpus(cases: list[Case]) -> list[str]:
    """Rules across cases: unique ids, one split per conversation, one person per conversation."""
    out = []
    for case_id, n in Counter(c.id for c in cases).items():
        if n > 1:
            out.append(f"id {case_id} appears {n} times")
    for attr in ("split", "person"):
        seen: dict[str, set[str]] = {}
        for c in cases:
            seen.setdefault(c.conversation, set()).add(getattr(c, attr))
        for conv, values in sorted(seen.items()):
            if len(values) > 1:
                out.append(f"conversation {conv} has more than one {attr}: {sorted(values)}")
    return out


def _locomo_date(value: str) -> dt.datetime:
    """'1:56 pm on 8 May, 2023' as a UTC datetime (LoCoMo gives no zone; taken as UTC)."""
    return dt.datetime.strptime(value.replace(",", ""), "%I:%M %p on %d %B %Y").replace(tzinfo=dt.UTC)


def check_against_locomo(cases: list[Case], path: str | Path | None = None) -> list[str]:
    """Rules that need the LoCoMo file: known conversation, person and speakers, times after the last session."""
    data = json.loads(Path(path or LOCOMO_PATH).read_text(encoding="utf-8"))
    convs = {s["sample_id"]: s["conversation"] for s in data}
    out = []
    for c in cases:
        conv = convs.get(c.conversation)
        if conv is None:
            out.append(f"{c.id}: conversation {c.conversation} is not in LoCoMo")
            continue
        speakers = {conv["speaker_a"], conv["speaker_b"]}
        last = max(
            _locomo_date(v) for k, v in conv.items() if k.endswith("_date_time") and k[: -len("_date_time")] in conv
        )
        if c.person not in speakers:
            out.append(f"{c.id}: person {c.person!r} is not one of the speakers {sorted(speakers)}")
        for i, m in enumerate(c.memories):
            if m.speaker is not None and m.speaker not in speakers:
                out.append(f"{c.id} memory {i}: speaker {m.speaker!r} is not one of {sorted(speakers)}")
        stamps = [m.at for m in c.memories] + [s.at for s in c.steps] + ([c.as_of] if c.as_of else [])
        for stamp in stamps:
            if parse_at(stamp) <= last:
                out.append(f"{c.id}: {stamp} is not after the conversation's last session ({last:%Y-%m-%d %H:%M})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=None)
    parser.add_argument("--locomo", default=None, help=f"LoCoMo file (default {LOCOMO_PATH})")
    args = parser.parse_args(argv)
    try:
        cases = load(args.path)
    except CorpusError as exc:
        print(exc, file=sys.stderr)
        return 1
    counts = Counter((c.kind, c.split) for c in cases)
    width = max(len(k) for k in KINDS)
    print(f"{'kind':<{width}}  {'dev':>4}  {'test':>4}  {'all':>4}")
    for kind in KINDS:
        dev, test = counts[(kind, "dev")], counts[(kind, "test")]
        print(f"{kind:<{width}}  {dev:>4}  {test:>4}  {dev + test:>4}")
    dev = sum(1 for c in cases if c.split == "dev")
    print(f"{'total':<{width}}  {dev:>4}  {len(cases) - dev:>4}  {len(cases):>4}")
    for split in SPLITS:
        convs = sorted({(c.conversation, c.person) for c in cases if c.split == split})
        print(f"{split}: " + ", ".join(f"{conv} ({person})" for conv, person in convs))
    locomo = Path(args.locomo) if args.locomo else LOCOMO_PATH
    if locomo.exists():
        problems = check_against_locomo(cases, locomo)
        for p in problems:
            print(p, file=sys.stderr)
        print(f"LoCoMo checks ({locomo}): {'ok' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0
    print(f"LoCoMo checks skipped: {locomo} is absent")
    return 0


if __name__ == "__main__":
    sys.exit(main())
