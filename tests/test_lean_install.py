"""The default install is lean: the reranker's runtime (onnxruntime, tokenizers) is the ``rerank`` extra.

Each check runs a fresh Python in which those packages are made unimportable (``sys.modules[name] = None``),
so it proves what a default install can do: import the package, open a store, write, recall, and get
an error that names ``pip install 'worlddb_lite[rerank]'`` when a reranker is asked for.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRA = "pip install 'worlddb_lite[rerank]'"
RUNTIME = ("onnxruntime", "tokenizers")


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
    for name in RUNTIME:
        assert name not in default, f"{name} is a default dependency; it belongs to the rerank extra"
        assert name in rerank
    assert "worlddb_lite[rerank]" in project["optional-dependencies"]["test"]  # the rerank tests run with the tests


def test_importing_the_package_imports_no_rerank_runtime(tmp_path):
    done = run_python(
        """
        import worlddb_lite, worlddb_lite.cli, worlddb_lite.models.rerank
        loaded = sorted({m.split(".")[0] for m in sys.modules} & {"onnxruntime", "tokenizers", "onnx"})
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
