"""The default install is lean: the reranker's runtime (onnxruntime) is the ``rerank`` extra, the MCP server's
SDK the ``mcp`` extra, and model2vec (for hub names only: folders load natively) the ``hub`` extra.

Each check runs a fresh Python in which those packages are made unimportable (``sys.modules[name] = None``),
so it proves what a default install can do: import the package, open a store, write, recall, and get
an error that names the extra (``pip install 'worlddb_lite[rerank]'``, ``[mcp]``, ``[hub]``) when that
part is asked for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
EXTRA = "pip install 'worlddb_lite[rerank]'"
RUNTIME = ("onnxruntime", "tokenizers")
MCP_EXTRA = "pip install 'worlddb_lite[mcp]' (in a clone of the source: pip install '.[mcp]')"
HUB_EXTRA = "pip install 'worlddb_lite[hub]' (in a clone of the source: pip install '.[hub]')"


def run_python(code: str, cwd: Path, *, block: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter with the modules in ``block`` unimportable; the checkout's package first."""
    prelude = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in block)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_rerank_runtime_is_an_extra_not_a_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    default = " ".join(project["dependencies"])
    rerank = " ".join(project["optional-dependencies"]["rerank"])
    assert "onnxruntime" not in default, "onnxruntime is a default dependency; it belongs to the rerank extra"
    for name in RUNTIME:  # tokenizers is a default dependency too now: the bundled embedder's tokenizer
        assert name in rerank
    extras = project["optional-dependencies"]
    for name, extra in (("mcp", "mcp"), ("model2vec", "hub")):
        assert name not in default, f"{name} is a default dependency; it belongs to the {extra} extra"
        assert any(dep.startswith(name) for dep in extras[extra])
    assert "worlddb_lite[rerank,mcp,hub,browse]" in extras["test"]  # the rerank, MCP, parity and browse tests run
    assert any(dep.startswith("datasette") for dep in extras["browse"]) and "datasette" not in default


def test_importing_the_package_imports_no_rerank_runtime(tmp_path):
    done = run_python(
        """
        import worlddb_lite, worlddb_lite.cli, worlddb_lite.models.rerank
        optional = {"onnxruntime", "tokenizers", "onnx", "mcp", "pydantic", "model2vec", "huggingface_hub", "datasette"}
        loaded = sorted({m.split(".")[0] for m in sys.modules} & optional)
        assert not loaded, loaded
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr


def test_write_and_recall_without_the_rerank_extra(tmp_path):
    (tmp_path / "model").mkdir()  # a folder a user might name; the missing extra is reported first
    done = run_python(
        """
        import contextlib, io
        from worlddb_lite import MissingExtra, OnnxCrossEncoder, WorldDB, WorldDBError
        from worlddb_lite.cli import main

        with WorldDB("lean.db") as db:
            db.write("I moved to Porto in May", scope="me")
            hit = db.recall("where did I move?", scope="me", k=1).hits[0]
            assert "Porto" in hit.node.content, hit.node.content
        assert main(["write", "lean.db", "The spare key is under the blue flowerpot", "--scope", "me"]) == 0
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["recall", "lean.db", "where is the spare key?", "--scope", "me", "--k", "1"]) == 0
        assert "flowerpot" in out.getvalue(), out.getvalue()

        try:
            OnnxCrossEncoder("model")
        except MissingExtra as exc:
            assert isinstance(exc, WorldDBError) and isinstance(exc, ImportError)
            print("API:", exc)
        else:
            raise AssertionError("OnnxCrossEncoder was built without onnxruntime")
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["recall", "lean.db", "where is the spare key?", "--scope", "me", "--rerank", "model"])
        assert code == 2, code
        print("CLI:", err.getvalue())
        """,
        tmp_path,
        block=("onnxruntime", "onnx"),
    )
    assert done.returncode == 0, done.stderr
    api, cli = (line for line in done.stdout.splitlines() if line.startswith(("API:", "CLI:")))
    for said in (api, cli):
        assert EXTRA in said and "onnxruntime" in said
    assert cli.startswith("CLI: worlddb recall:")


def test_a_missing_tokenizers_is_named_too(tmp_path):
    done = run_python(
        """
        from worlddb_lite import MissingExtra
        from worlddb_lite.models.rerank import OnnxBiEncoderReranker
        try:
            OnnxBiEncoderReranker("nowhere")
        except MissingExtra as exc:
            print(exc)
        """,
        tmp_path,
        block=RUNTIME,
    )
    assert done.returncode == 0, done.stderr
    assert EXTRA in done.stdout and "onnxruntime and tokenizers are not installed" in done.stdout


def test_the_bench_scripts_helpers(monkeypatch):
    """bench/install_size.py and bench/aarch64_wheels.py need a venv and the index; their arithmetic runs here."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import aarch64_wheels
    import install_size

    name = "numpy-2.4.6-cp311-cp311-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl"
    assert aarch64_wheels.wheel_tag(name) == "cp311-cp311-manylinux_2_27_aarch64.manylinux_2_28_aarch64"
    assert aarch64_wheels.wheel_tag("mcp-2.3.0-py3-none-any.whl") == "py3-none-any"
    sizes = {"a": ["1", 1e6], "b": ["1", 2e6], "shared": ["1", 4e6]}
    rows = install_size.by_direct({"a": ["a", "shared"], "b": ["b", "shared"]}, sizes)
    assert rows[0] == {
        "name": "b",
        "with_its_dependencies_mb": 6.0,
        "only_through_it_mb": 2.0,
        "only_through_it": ["b"],
    }
    assert rows[1]["only_through_it_mb"] == 1.0


def test_write_recall_and_the_mcp_error_without_mcp_and_model2vec(tmp_path):
    texts = ["I moved to Porto in May", "where did I move?", "", "🙂", "word " * 700]
    done = run_python(
        f"""
        import contextlib, io, json
        from worlddb_lite import MissingExtra, StaticEmbedder, WorldDB
        from worlddb_lite.cli import main

        with WorldDB("lean.db") as db:
            db.write("I moved to Porto in May", scope="me")
            hit = db.recall("where did I move?", scope="me", k=1).hits[0]
            assert "Porto" in hit.node.content, hit.node.content
        print("VECTORS:", json.dumps(StaticEmbedder().embed({texts!r}).tolist()))
        try:
            StaticEmbedder("minishlab/potion-base-8M")
        except MissingExtra as exc:
            print("HUB:", exc)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["mcp", "served.db"])
        assert code == 2, code
        print("MCP:", err.getvalue().strip())
        import os
        assert not os.path.exists("served.db")  # refused before the store was created
        present = {{m.split(".")[0] for m, module in sys.modules.items() if module is not None}}
        loaded = sorted(present & {{"mcp", "model2vec", "huggingface_hub"}})
        assert not loaded, loaded
        """,
        tmp_path,
        block=("mcp", "model2vec"),
    )
    assert done.returncode == 0, done.stderr
    said = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in done.stdout.splitlines() if ":" in line}
    assert HUB_EXTRA in said["HUB"]
    assert said["MCP"].startswith("worlddb mcp:") and MCP_EXTRA in said["MCP"] and "\n" not in said["MCP"]
    lean = np.asarray(json.loads(said["VECTORS"]), dtype=np.float32)
    try:  # the same vectors as model2vec's, where it is installed (the test extra brings it)
        from model2vec import StaticModel

        from worlddb_lite.models.embed import bundled_model_path

        reference = np.asarray(StaticModel.from_pretrained(str(bundled_model_path())).encode(texts), np.float32)
        norms = np.linalg.norm(reference, axis=1)
        assert norms[2] == 0 and norms[3] == 0  # no known token: the embedder's fallback fills these rows
        keep = [0, 1, 4]
        reference = reference[keep] / norms[keep, None]
        lean = lean[keep]
    except ImportError:
        from worlddb_lite import StaticEmbedder

        reference = StaticEmbedder().embed(texts)
    assert np.abs(lean - reference).max() <= 1e-6
