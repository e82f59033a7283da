"""The README's examples run: every bash and python block after the two set-up commands.

Benchmark commands are skipped (they take minutes); the set-up commands are what CI runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```(bash|python)\n(.*?)```", re.S)


def blocks() -> list[tuple[str, str]]:
    found = BLOCK.findall(README.read_text("utf-8"))
    return [(lang, code) for lang, code in found[2:] if "bench/" not in code]


def test_readme_starts_with_install_and_test_commands():
    first, second = BLOCK.findall(README.read_text("utf-8"))[:2]
    assert "pip install ." in first[1] and "worlddb" in first[1]
    assert "pip install '.[test]'" in second[1] and "pytest" in second[1]


def test_readme_examples_run(tmp_path):
    if shutil.which("sqlite3") is None:
        pytest.skip("the README tour uses the sqlite3 shell; install Debian's sqlite3 package")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for lang, code in blocks():
        if lang == "bash":
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", code],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
        else:
            done = subprocess.run(
                [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
            )
        assert done.returncode == 0, f"README {lang} block failed:\n{code}\n--- stderr:\n{done.stderr}"
