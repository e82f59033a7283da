"""How much disk a fresh install takes: a new venv, ``pip install`` of this checkout, site-packages measured.

    python bench/install_size.py                  # the default install (no extras)
    python bench/install_size.py --extras rerank  # with the reranker's runtime (onnxruntime, tokenizers)

The working tree (without .git, venvs and build output) is copied to a temporary folder and installed
from there, so the checkout gets no build/ or egg-info of its own. pip may use its wheel cache; anything
missing comes from the package index. Prints one JSON object: the size of site-packages in MB (all of it,
and without pip/setuptools/wheel, which every venv brings), and the ten largest distributions, each
measured by the files its RECORD lists.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aarch64_wheels import copy_checkout  # noqa: E402

TARGET_MB = 150.0
BOOTSTRAP = {"pip", "setuptools", "wheel"}  # what the venv itself brings, not the project

# Run by the new venv's python: bytes per distribution (the files its RECORD lists) and, for each direct
# dependency of worlddb_lite, the distributions it pulls in (markers evaluated, extras followed).
MEASURE = """
import json, sys, importlib.metadata as md, sysconfig
from pathlib import Path
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name as canon
sizes, reqs = {}, {}
for dist in md.distributions():
    name = canon(dist.metadata["Name"])
    files = [Path(dist.locate_file(f)) for f in dist.files or []]
    sizes[name] = [dist.version, sum(p.stat().st_size for p in files if p.is_file())]
    reqs[name] = [Requirement(line) for line in dist.requires or []]

def deps(name, extras):
    return [(canon(r.name), tuple(r.extras)) for r in reqs.get(name, [])
            if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in ("", *extras))]

def closure(name, extras):
    seen, todo = set(), [(name, tuple(extras))]
    while todo:
        at, ex = todo.pop()
        if at in sizes and (at, ex) not in seen:
            seen.add((at, ex))
            todo.extend(deps(at, ex))
    return {at for at, _ in seen}

direct = {d: closure(d, ex) for d, ex in deps("worlddb-lite", json.loads(sys.argv[1]))}
site = Path(sysconfig.get_paths()["purelib"])
everything = sum(p.stat().st_size for p in site.rglob("*") if p.is_file() and not p.is_symlink())
print(json.dumps({"bytes": everything, "dists": sizes, "direct": {d: sorted(c) for d, c in direct.items()}}))
"""


def mb(n: float) -> float:
    return round(n / 1e6, 1)


def by_direct(direct: dict[str, list[str]], dists: dict[str, list]) -> list[dict[str, object]]:
    """Each direct dependency: MB of all it pulls in, and of what nothing else pulls in (dropping it saves that)."""
    rows = []
    for name, pulled in direct.items():
        others = set().union(*(set(c) for d, c in direct.items() if d != name))
        alone = [d for d in pulled if d not in others and d != "worlddb-lite"]
        rows.append(
            {
                "name": name,
                "with_its_dependencies_mb": mb(sum(dists[d][1] for d in pulled)),
                "only_through_it_mb": mb(sum(dists[d][1] for d in alone)),
                "only_through_it": sorted(alone),
            }
        )
    return sorted(rows, key=lambda r: -r["with_its_dependencies_mb"])


def measure(extras: str, keep: bool = False) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="worlddb-size-"))
    try:
        source = work / "src"
        copy_checkout(source)
        subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
        python = str(work / "venv" / "bin" / "python")
        spec = f"{source}[{extras}]" if extras else str(source)
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", spec], check=True, cwd=work
        )
        wanted = [e for e in extras.split(",") if e]
        done = subprocess.run([python, "-c", MEASURE, json.dumps(wanted)], check=True, capture_output=True, text=True)
        found = json.loads(done.stdout)
        dists = found["dists"]
        bootstrap = sum(size for name, (_, size) in dists.items() if name.lower() in BOOTSTRAP)
        project = found["bytes"] - bootstrap
        top = sorted(dists.items(), key=lambda kv: -kv[1][1])[:10]
        return {
            "extras": extras or None,
            "site_packages_mb": mb(found["bytes"]),
            "installed_mb": mb(project),  # without pip/setuptools/wheel
            "target_mb": TARGET_MB,
            "within_target": mb(project) <= TARGET_MB,
            "distributions": len(dists) - sum(1 for name in dists if name.lower() in BOOTSTRAP),
            "top10": [{"name": name, "version": v, "mb": mb(size)} for name, (v, size) in top],
            "by_direct_dependency": by_direct(found["direct"], dists),
        }
    finally:
        if keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extras", default="", help="comma-separated extras to install too, e.g. rerank")
    parser.add_argument("--keep", action="store_true", help="keep the temporary venv and print where it is")
    args = parser.parse_args()
    print(json.dumps(measure(args.extras, keep=args.keep), indent=2))


if __name__ == "__main__":
    main()
