"""The README's and the docs' examples run, and their links lead somewhere.

README.md: every bash and python block after the two set-up commands (those are what CI runs).
docs/*.md: every bash and python block of each page, in order, in one fresh directory per page
(a page may build on its own earlier blocks, never on another page's). Benchmark commands (a block
that mentions bench/) are skipped: they take minutes. docs/design.md and docs/decisions.md hold no
runnable examples.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
NOT_RUN = {"design.md", "decisions.md"}  # prose only
BLOCK = re.compile(r"```(bash|python)\n(.*?)```", re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def runnable(found: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(lang, code) for lang, code in found if "bench/" not in code]


def blocks() -> list[tuple[str, str]]:
    return runnable(BLOCK.findall(README.read_text("utf-8"))[2:])


def pages() -> list[Path]:
    return sorted(page for page in DOCS.glob("*.md") if page.name not in NOT_RUN)


def run_blocks(where: str, found: list[tuple[str, str]], cwd: Path) -> None:
    if shutil.which("sqlite3") is None and any(lang == "bash" and "sqlite3 " in code for lang, code in found):
        pytest.skip(f"{where} uses the sqlite3 shell; install Debian's sqlite3 package")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for lang, code in found:
        command = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{where} {lang} block failed:\n{code}\n--- stderr:\n{done.stderr}"


def test_readme_starts_with_install_and_test_commands():
    first, second = BLOCK.findall(README.read_text("utf-8"))[:2]
    assert "pip install ." in first[1] and "worlddb" in first[1]
    assert "pip install '.[test]'" in second[1] and "pytest" in second[1]


def test_readme_examples_run(tmp_path):
    run_blocks("README", blocks(), tmp_path)
    run_blocks("README, again", blocks(), tmp_path)  # an example runs twice: a reader tries it again


def test_docs_pages_are_found():
    names = {page.name for page in pages()}
    assert {"api.md", "cli.md", "recall.md", "storage.md", "benchmarks.md", "mcp.md"} <= names


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.name)
def test_docs_examples_run(page, tmp_path):
    run_blocks(f"docs/{page.name}", runnable(BLOCK.findall(page.read_text("utf-8"))), tmp_path)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text("utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", [README, *pages()], ids=lambda page: page.name)
def test_links_lead_somewhere(page):
    broken = []
    for target in LINK.findall(page.read_text("utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert not broken, f"{page.name} links to what does not exist: {broken}"
