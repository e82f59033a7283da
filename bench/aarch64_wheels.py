"""Does every run-time dependency have a wheel for aarch64 Linux (a Raspberry Pi-class board)?

    python bench/aarch64_wheels.py                  # the default install
    python bench/aarch64_wheels.py --extras rerank  # with the reranker's runtime

The versions are the ones pip would install here today (``pip install --dry-run --report`` of a copy
of this checkout, every package as if nothing were installed). Each is then fetched, alone, as a
wheel for CPython 3.11 on aarch64 Linux: ``pip download --only-binary=:all: --no-deps --platform
manylinux2014_aarch64`` first (it also accepts manylinux_2_17 and older), ``manylinux_2_28_aarch64``
when that fails. A pure-Python wheel (``py3-none-any``) counts. Prints a table on stderr and one JSON
document on stdout; exits 1 when any package has no wheel.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")
PYTHON_VERSION = "3.11"
SKIP = shutil.ignore_patterns(
    ".git", ".venv", ".ci-venv*", "venv", "build", "dist", "*.egg-info", "__pycache__", "*.db", "*.db-*", ".*_cache"
)


def copy_checkout(dest: Path) -> None:
    """The checkout as pip needs it, without ``SKIP`` and without ``bench/out``: benches' stores, and an
    arm64 root ``bench/aarch64.sh`` may leave there, whose device files a copy would read forever."""

    def skip(folder: str, names: list[str]) -> set[str]:
        ignored = set(SKIP(folder, names))
        return ignored | {"out"} if Path(folder) == ROOT / "bench" else ignored

    shutil.copytree(ROOT, dest, ignore=skip)


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args], capture_output=True, text=True
    )


def resolved(extras: str, work: Path) -> list[tuple[str, str]]:
    """(name, version) of every package a fresh install of this checkout would bring, the project itself aside."""
    source = work / "src"
    copy_checkout(source)
    spec = f"{source}[{extras}]" if extras else str(source)
    report = work / "report.json"
    done = pip("install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report), spec)
    if done.returncode != 0:
        raise SystemExit(f"pip could not resolve {spec}:\n{done.stderr}")
    found = []
    for item in json.loads(report.read_text("utf-8"))["install"]:
        meta = item["metadata"]
        if meta["name"].lower().replace("-", "_") != "worlddb_lite":
            found.append((meta["name"], meta["version"]))
    return sorted(found, key=lambda nv: nv[0].lower())


def wheel_tag(filename: str) -> str:
    """The python-abi-platform part of a wheel's file name."""
    return "-".join(filename.removesuffix(".whl").split("-")[-3:])


def fetch(name: str, version: str, work: Path) -> dict[str, object]:
    """Try each platform in turn; say which wheel was found, or the last error pip gave."""
    error = ""
    for platform in PLATFORMS:
        target = Path(tempfile.mkdtemp(dir=work))
        done = pip(
            "download", "--quiet", "--no-deps", "--only-binary=:all:", "--platform", platform,
            "--python-version", PYTHON_VERSION, "--implementation", "cp", "-d", str(target), f"{name}=={version}",
        )  # fmt: skip
        wheels = sorted(p.name for p in target.glob("*.whl"))
        if done.returncode == 0 and wheels:
            return {"name": name, "version": version, "wheel": True, "asked": platform, "tag": wheel_tag(wheels[0])}
        error = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
    return {"name": name, "version": version, "wheel": False, "asked": None, "tag": None, "error": error}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extras", default="", help="comma-separated extras to check too, e.g. rerank")
    parser.add_argument("--json", help="also write the JSON document to this file")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="worlddb-aarch64-"))
    try:
        packages = resolved(args.extras, work)
        with ThreadPoolExecutor(max_workers=4) as pool:
            rows = list(pool.map(lambda nv: fetch(*nv, work), packages))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    width = max(len(r["name"]) for r in rows) if rows else 8
    print(f"{'package':<{width}}  {'version':<12}  wheel", file=sys.stderr)
    for r in rows:
        said = r["tag"] if r["wheel"] else f"NONE ({r['error']})"
        print(f"{r['name']:<{width}}  {r['version']:<12}  {said}", file=sys.stderr)
    missing = [r["name"] for r in rows if not r["wheel"]]
    result = {
        "extras": args.extras or None,
        "python": PYTHON_VERSION,
        "platforms": list(PLATFORMS),
        "packages": len(rows),
        "missing": missing,
        "rows": rows,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text + "\n", "utf-8")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
