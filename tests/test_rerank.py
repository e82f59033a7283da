"""The ONNX cross-encoder runner, on a tiny cross-encoder the tests build themselves.

The tiny model looks up an embedding per token, takes the masked mean of the query tokens
(token type 0) and of the passage tokens (type 1) and returns their dot product: a score that
depends on how query and passage interact, which a numpy re-computation can check exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers, processors  # noqa: E402

from worlddb_lite.errors import InvalidInput, RerankerError, WorldDBError  # noqa: E402
from worlddb_lite.models.rerank import OnnxCrossEncoder, Reranker  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
WORDS = "where does alice live she moved to porto last year bob likes coffee and tea the dog river".split()
VOCAB = {token: i for i, token in enumerate(SPECIALS + WORDS)}


def write_tokenizer(folder: Path) -> Tokenizer:
    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", VOCAB["[CLS]"]), ("[SEP]", VOCAB["[SEP]"])],
    )
    tok.enable_padding(pad_id=VOCAB["[PAD]"], pad_token="[PAD]", length=64)  # fixed length: the runner must undo it
    tok.save(str(folder / "tokenizer.json"))
    return tok


def build(folder: Path, emb: np.ndarray, *, output: str = "n1", inputs: tuple[str, ...] = ()) -> Path:
    """Write tokenizer.json and a model.onnx scoring dot(mean query emb, mean passage emb)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_tokenizer(folder)
    ids, mask, types = (
        helper.make_tensor_value_info(n, TensorProto.INT64, ["n", "s"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    )
    extra = [helper.make_tensor_value_info(n, TensorProto.INT64, ["n", "s"]) for n in inputs]
    init = [
        numpy_helper.from_array(np.asarray(value), name)
        for name, value in (
            ("emb", emb.astype(np.float32)),
            ("ax1", np.array([1], np.int64)),
            ("axl", np.array([-1], np.int64)),
            ("nan", np.float32(np.nan)),
        )
    ]
    node = helper.make_node
    nodes = [
        node("Gather", ["emb", "input_ids"], ["E"]),
        node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        node("Cast", ["token_type_ids"], ["t"], to=TensorProto.FLOAT),
        node("Mul", ["m", "t"], ["mp"]),
        node("Sub", ["m", "mp"], ["mq"]),
    ]
    for side in ("q", "p"):
        nodes += [
            node("Unsqueeze", [f"m{side}", "axl"], [f"m{side}3"]),
            node("Mul", ["E", f"m{side}3"], [f"E{side}"]),
            node("ReduceSum", [f"E{side}", "ax1"], [f"s{side}"], keepdims=0),
            node("ReduceSum", [f"m{side}", "ax1"], [f"c{side}"], keepdims=1),
            node("Div", [f"s{side}", f"c{side}"], [f"v{side}"]),
        ]
    nodes += [node("Mul", ["vq", "vp"], ["qp"]), node("ReduceSum", ["qp", "ax1"], ["logit"], keepdims=1)]
    out_shape: list[str | int] = ["n", 1]
    if output == "n2":  # two class logits [-s, s]: the runner must read 2s
        nodes += [node("Neg", ["logit"], ["neg"]), node("Concat", ["neg", "logit"], ["score"], axis=1)]
        out_shape = ["n", 2]
    elif output == "n":
        nodes.append(node("Squeeze", ["logit", "ax1"], ["score"]))
        out_shape = ["n"]
    elif output == "hidden":  # an embedding model's last_hidden_state: not a cross-encoder
        nodes.append(node("Identity", ["E"], ["score"]))
        out_shape = ["n", "s", emb.shape[1]]
    elif output == "nan":
        nodes.append(node("Mul", ["logit", "nan"], ["score"]))
    else:
        nodes.append(node("Identity", ["logit"], ["score"]))
    for name in inputs:  # consume the extra inputs so onnxruntime keeps them
        nodes += [node("Cast", [name], [f"{name}_f"], to=TensorProto.FLOAT)]
    outs = [helper.make_tensor_value_info("score", TensorProto.FLOAT, out_shape)]
    outs += [helper.make_tensor_value_info(f"{n}_f", TensorProto.FLOAT, ["n", "s"]) for n in inputs]
    graph = helper.make_graph(nodes, "tiny_cross_encoder", [ids, mask, types, *extra], outs, init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    return folder


def expected(folder: Path, emb: np.ndarray, query: str, passages: list[str], max_length: int = 512) -> np.ndarray:
    """The same function in numpy, on the tokenizer's own encoding of each pair alone."""
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length, strategy="only_second")
    out = []
    for passage in passages:
        enc = tok.encode(query, passage)
        ids, types = np.array(enc.ids), np.array(enc.type_ids)
        out.append(emb[ids[types == 0]].mean(0) @ emb[ids[types == 1]].mean(0))
    return np.array(out, dtype=np.float32)


@pytest.fixture
def emb() -> np.ndarray:
    return np.random.default_rng(7).standard_normal((len(VOCAB), 8)).astype(np.float32)


@pytest.fixture
def tiny(tmp_path, emb) -> Path:
    return build(tmp_path / "tiny-ce", emb)


QUERY = "where does alice live"
PASSAGES = [
    "she moved to porto last year",
    "bob likes coffee and tea",
    "alice",
    "the dog river river",
    "",
    "alice does live where the river",
    "zebra unknown words only",
]


def test_scores_match_a_numpy_recomputation(tiny, emb):
    ce = OnnxCrossEncoder(tiny)
    assert isinstance(ce, Reranker)
    scores = ce.score(QUERY, PASSAGES)
    assert scores.dtype == np.float32 and scores.shape == (len(PASSAGES),)
    np.testing.assert_allclose(scores, expected(tiny, emb, QUERY, PASSAGES), rtol=1e-5, atol=1e-6)
    assert len(set(np.round(scores, 4))) > 3  # the scores really vary with the passage


def test_a_passage_sharing_words_outranks_an_unrelated_one(tmp_path):
    one_hot = np.eye(len(VOCAB), dtype=np.float32)
    one_hot[: len(SPECIALS)] = 0  # specials carry no meaning: the score is word overlap
    ce = OnnxCrossEncoder(build(tmp_path / "overlap", one_hot))
    scores = ce.score(QUERY, ["bob likes coffee and tea", "alice does live in porto", "the dog"])
    assert int(np.argmax(scores)) == 1 and scores[1] > 0 and scores[0] == scores[2] == 0
    # the same passage against another query scores differently: query and passage interact
    assert ce.score("bob likes tea", ["bob likes coffee and tea"])[0] > ce.score(QUERY, ["bob likes coffee and tea"])[0]


def test_batch_size_and_threads_do_not_change_scores(tiny):
    base = OnnxCrossEncoder(tiny, batch_size=16).score(QUERY, PASSAGES)
    for batch_size in (1, 2, 3):
        np.testing.assert_allclose(
            OnnxCrossEncoder(tiny, batch_size=batch_size, threads=1).score(QUERY, PASSAGES), base, rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize(("output", "factor"), [("n", 1.0), ("n2", 2.0)])
def test_other_output_shapes(tmp_path, emb, output, factor):
    folder = build(tmp_path / output, emb, output=output)
    np.testing.assert_allclose(
        OnnxCrossEncoder(folder).score(QUERY, PASSAGES),
        factor * expected(folder, emb, QUERY, PASSAGES),
        rtol=1e-5,
        atol=1e-6,
    )


def test_long_passage_is_truncated_and_the_query_kept(tiny, emb):
    long_passage = " ".join(["bob likes coffee"] * 300 + ["alice"] * 300)  # 1,200 tokens
    ce = OnnxCrossEncoder(tiny, max_length=32)
    score = ce.score(QUERY, [long_passage, "alice"])
    # query (4 words) + [CLS] [SEP] [SEP] + the first 25 passage words: "alice" never makes it in
    cut = " ".join(long_passage.split()[:25])
    np.testing.assert_allclose(score, expected(tiny, emb, QUERY, [cut, "alice"]), rtol=1e-5, atol=1e-6)
    # an 18-word query keeps all its words: only the passage is cut (not both halves, as longest_first would)
    long_query = " ".join(WORDS)
    enc = ce._encode([(long_query, long_passage)])[0]
    assert len(enc.ids) == 32 and enc.type_ids.count(0) == 20 and enc.ids[1:19] == [VOCAB[w] for w in WORDS]
    # a query longer than max_length still scores (both sides are cut) rather than failing
    assert np.isfinite(ce.score(" ".join(["alice"] * 100), ["bob", "porto"])).all()


def test_empty_passage_list_and_id(tiny):
    ce = OnnxCrossEncoder(tiny)
    out = ce.score(QUERY, [])
    assert out.shape == (0,) and out.dtype == np.float32
    assert ce.id.startswith("onnx:tiny-ce@") and len(ce.id.split("@")[1]) == 12
    assert OnnxCrossEncoder(tiny).id == ce.id


def test_id_changes_with_the_weights(tmp_path, emb):
    a = OnnxCrossEncoder(build(tmp_path / "m", emb)).id
    assert OnnxCrossEncoder(build(tmp_path / "m", emb * 2)).id != a


def test_missing_folder_and_files(tmp_path, tiny):
    with pytest.raises(RerankerError, match="no cross-encoder folder.*model.onnx and tokenizer.json.*export"):
        OnnxCrossEncoder(tmp_path / "nowhere")
    (tiny / "tokenizer.json").unlink()
    with pytest.raises(RerankerError, match="has no tokenizer.json; .*ms-marco-MiniLM-L-6-v2"):
        OnnxCrossEncoder(tiny)
    (tiny / "model.onnx").unlink()
    with pytest.raises(RerankerError, match="has no model.onnx"):
        OnnxCrossEncoder(tiny)


def test_unloadable_files(tiny):
    (tiny / "model.onnx").write_bytes(b"not an onnx graph")
    with pytest.raises(RerankerError, match="onnxruntime cannot load .*model.onnx.*re-export"):
        OnnxCrossEncoder(tiny)
    (tiny / "tokenizer.json").write_text("{broken")
    with pytest.raises(RerankerError, match="tokenizer.json"):
        OnnxCrossEncoder(tiny)


def test_unrecognised_inputs(tmp_path, emb):
    with pytest.raises(RerankerError, match="pixel_values.*takes input_ids"):
        OnnxCrossEncoder(build(tmp_path / "x", emb, inputs=("pixel_values",)))


def test_output_that_is_not_a_score(tmp_path, emb):
    ce = OnnxCrossEncoder(build(tmp_path / "h", emb, output="hidden"))
    with pytest.raises(RerankerError, match=r"shape \(2, \d+, 8\) for 2 pairs.*not a cross-encoder"):
        ce.score(QUERY, ["alice", "bob"])


def test_nan_scores(tmp_path, emb):
    ce = OnnxCrossEncoder(build(tmp_path / "nan", emb, output="nan"))
    with pytest.raises(RerankerError, match="returned nan for passage 0.*damaged"):
        ce.score(QUERY, ["alice"])


def test_empty_query_and_bad_settings(tiny):
    ce = OnnxCrossEncoder(tiny)
    for query in ("", "   "):
        with pytest.raises(InvalidInput, match="query is empty"):
            ce.score(query, ["alice"])
    with pytest.raises(InvalidInput, match="batch_size"):
        OnnxCrossEncoder(tiny, batch_size=0)
    assert issubclass(RerankerError, WorldDBError)


def test_bench_smoke(tmp_path):
    """bench/rerank.py --smoke grafts its cross-encoder head on a stand-in encoder and times it."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    if not (root.parent / "shared" / "data" / "locomo" / "locomo10.json").is_file():
        pytest.skip("the bench reads its queries and passages from ../shared/data/locomo")
    out, bench = tmp_path / "rerank.json", root / "bench" / "rerank.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--smoke", "--queries", "3", "--ks", "2,5", "--threads", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["smoke"] and result["model"].startswith("onnx:tiny-cross-encoder@")
    assert result["results"]["float32"]["threads_1"]["k5"]["n"] == 3


# ---- the bi-encoder re-scorer and rank fusion ----------------------------------------


def bi_expected(folder: Path, emb: np.ndarray, query: str, passages: list[str], max_length: int = 256) -> np.ndarray:
    """Cosine of the masked mean token embeddings ([CLS] and [SEP] included), each text encoded alone."""
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length)

    def unit(text: str) -> np.ndarray:
        v = emb[np.array(tok.encode(text).ids)].mean(0)
        return v / np.linalg.norm(v)

    return np.array([unit(p) @ unit(query) for p in passages], dtype=np.float32)


@pytest.fixture
def bi(tmp_path, emb) -> Path:
    return build(tmp_path / "tiny-bi", emb, output="hidden")  # last_hidden_state: the token embeddings


BI_PASSAGES = [p for p in PASSAGES if p] + ["alice " * 40]


def test_bi_encoder_scores_match_a_numpy_recomputation(bi, emb):
    from worlddb_lite.models.rerank import OnnxBiEncoderReranker

    ranker = OnnxBiEncoderReranker(bi, cache=0)
    assert isinstance(ranker, Reranker) and ranker.id.startswith("onnx:tiny-bi@")
    scores = ranker.score(QUERY, BI_PASSAGES)
    assert scores.dtype == np.float32 and scores.shape == (len(BI_PASSAGES),)
    np.testing.assert_allclose(scores, bi_expected(bi, emb, QUERY, BI_PASSAGES), rtol=1e-5, atol=1e-6)
    for batch_size in (1, 2, 3):  # batches padded to their own longest text: padding never changes a score
        np.testing.assert_allclose(
            OnnxBiEncoderReranker(bi, batch_size=batch_size, cache=0).score(QUERY, BI_PASSAGES),
            scores,
            rtol=1e-5,
            atol=1e-6,
        )
    short = OnnxBiEncoderReranker(bi, max_length=8, cache=0).score(QUERY, BI_PASSAGES)
    np.testing.assert_allclose(short, bi_expected(bi, emb, QUERY, BI_PASSAGES, max_length=8), rtol=1e-5, atol=1e-6)
    assert ranker.score(QUERY, []).shape == (0,)


def test_bi_encoder_cache_reuses_passage_vectors(bi):
    from worlddb_lite.models.rerank import OnnxBiEncoderReranker

    ranker = OnnxBiEncoderReranker(bi, cache=3)
    first = ranker.score(QUERY, ["alice", "bob likes tea", "alice"])
    assert (ranker.hits, ranker.misses) == (1, 2)  # a repeat within one call is embedded once
    again = ranker.score("bob likes coffee", ["bob likes tea", "alice", "the dog"])
    assert (ranker.hits, ranker.misses) == (3, 3) and len(ranker._cache) == 3
    np.testing.assert_allclose(ranker.score(QUERY, ["alice", "bob likes tea", "alice"]), first, rtol=1e-6)
    fresh = OnnxBiEncoderReranker(bi, cache=0)
    np.testing.assert_allclose(
        fresh.score("bob likes coffee", ["bob likes tea", "alice", "the dog"]), again, rtol=1e-5, atol=1e-6
    )
    assert len(fresh._cache) == 0
    ranker.score(QUERY, ["porto", "river", "coffee", "tea"])
    assert len(ranker._cache) == 3  # bounded: the least recently used go first
    with pytest.raises(InvalidInput, match="cache"):
        OnnxBiEncoderReranker(bi, cache=-1)


def test_bi_encoder_refuses_a_model_that_gives_no_token_vectors(tiny):
    from worlddb_lite.models.rerank import OnnxBiEncoderReranker

    with pytest.raises(RerankerError, match=r"shape \(\d+, 1\) .*token vectors"):
        OnnxBiEncoderReranker(tiny).score(QUERY, ["alice"])  # a cross-encoder: one score per pair


def test_bi_encoder_missing_folder_and_empty_query(tmp_path, bi):
    from worlddb_lite.models.rerank import OnnxBiEncoderReranker

    with pytest.raises(RerankerError, match="no bi-encoder folder.*last_hidden_state"):
        OnnxBiEncoderReranker(tmp_path / "nowhere")
    with pytest.raises(InvalidInput, match="query is empty"):
        OnnxBiEncoderReranker(bi).score(" ", ["alice"])


class Fixed:
    def __init__(self, scores: list[float]) -> None:
        self.scores = np.array(scores, dtype=np.float32)

    def score(self, query, passages):
        return self.scores[: len(passages)]


def test_rank_fusion_mixes_the_given_order_with_the_rescorers():
    from worlddb_lite.models.rerank import RankFusion

    fused = RankFusion(Fixed([0.1, 0.9, 0.5, 0.3]), k=60).score("q", ["a", "b", "c", "d"])
    # given ranks 1..4, re-scorer ranks 4, 1, 2, 3
    want = [1 / 61 + 1 / 64, 1 / 62 + 1 / 61, 1 / 63 + 1 / 62, 1 / 64 + 1 / 63]
    np.testing.assert_allclose(fused, want, rtol=1e-6)
    assert fused.dtype == np.float32 and list(np.argsort(-fused, kind="stable")) == [1, 0, 2, 3]
    # the re-scorer alone would put d above a; fusion keeps a (first given) above d
    assert fused[0] > fused[3]
    # weight 0 keeps the given order; ties under the re-scorer keep it too
    assert list(np.argsort(-RankFusion(Fixed([0.1, 0.9, 0.5]), weight=0).score("q", "abc"), kind="stable")) == [0, 1, 2]
    assert list(np.argsort(-RankFusion(Fixed([0.5, 0.5, 0.5])).score("q", "abc"), kind="stable")) == [0, 1, 2]
    assert RankFusion(Fixed([])).score("q", []).shape == (0,)
    assert RankFusion(Fixed([1.0])).id.startswith("rrf(k=60,w=1):")
    with pytest.raises(InvalidInput):
        RankFusion(object())  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        RankFusion(Fixed([1.0]), k=-1)
