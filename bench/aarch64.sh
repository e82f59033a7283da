#!/usr/bin/env bash
# The tests and a small recall bench on aarch64 Linux, under emulation (qemu-user-static + an arm64 Debian root).
#
#   sudo bench/aarch64.sh [ROOT]        # ROOT, or $AARCH64_ROOT, default bench/out/aarch64/root; reused when present
#
# Needs root (debootstrap, chroot, binfmt_misc) and Debian's apt. Phases, each printed with its wall time:
# Debian's qemu-user-static and debootstrap when missing; the arm64 interpreter registered with binfmt_misc;
# an arm64 bookworm root (Python 3.11, as here) by debootstrap, kept for the next run; wheels fetched on the
# host (pip in the root cannot reach the package index): every dependency of '.[test]' as aarch64 wheels for
# the platforms bench/aarch64_wheels.py checks, plus a wheel of this checkout; the checkout without its
# package (so the tests import the installed wheel) and ../shared/data copied in (a few MB: a copy, not a bind,
# leaves nothing mounted behind a failed run); a venv in the root with '.[test]' installed from those wheels
# alone (as the README installs it); the default pytest selection (slow-marked tests excluded by pyproject);
# then bench/recall.py on the first $AARCH64_CONVERSATIONS LoCoMo conversations (0 skips it).
#
# Other settings: AARCH64_PYTEST_ARGS (extra pytest arguments, e.g. a subset of tests/), AARCH64_TIMEOUT
# (seconds per test, pytest-timeout, which is fetched for this run only: a hung emulated test fails alone),
# AARCH64_MIRROR (Debian mirror; default the host's apt source), AARCH64_REF (a commit to test, exported
# with git archive, instead of the working tree). Logs and JSON go to bench/out/aarch64/.
# Exits non-zero when a phase fails or any test fails. Not part of CI (.ci/run): the suite takes about an hour
# emulated on a 2-core machine (docs/benchmarks.md, "aarch64, under emulation").
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${AARCH64_OUT:-$REPO/bench/out/aarch64}
ROOT=$(realpath -m "${1:-${AARCH64_ROOT:-$OUT/root}}")
CONVERSATIONS=${AARCH64_CONVERSATIONS:-2}
TIMEOUT=${AARCH64_TIMEOUT:-1200}
PYTEST_ARGS=${AARCH64_PYTEST_ARGS:-}
PYTHON=${PYTHON:-python3}
REF=${AARCH64_REF:-}
DATA=$(realpath -m "$REPO/../shared/data")
SUITE=bookworm  # its python3 is 3.11, the version bench/aarch64_wheels.py asks wheels for
PROJECT=/work/main  # inside the root; the tests find ../shared/data beside it, as here
mkdir -p "$OUT"

if [ "$(id -u)" -ne 0 ]; then
  echo "bench/aarch64.sh needs root (debootstrap, chroot, binfmt_misc)" >&2
  exit 2
fi

# One run at a time per root: a second run's exit would unmount /proc and /dev under the first one's tests.
mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
if ! flock -n 9; then
  echo "another bench/aarch64.sh is using $ROOT" >&2
  exit 2
fi

started=$(date +%s)
phase() {  # phase NAME COMMAND...: run it, print its wall time; a failing phase ends the script
  local name=$1 t0 status
  shift
  t0=$(date +%s)
  echo "== $name"
  set +e
  (set -e; "$@")  # a subshell, so that errexit holds inside the phase's function
  status=$?
  set -e
  printf '== %s: %ss%s\n' "$name" "$(($(date +%s) - t0))" "$([ "$status" -eq 0 ] || echo " (exit $status)")"
  printf '%s\t%s\t%s\n' "$name" "$(($(date +%s) - t0))" "$status" >>"$OUT/phases.tsv"
  return "$status"
}
: >"$OUT/phases.tsv"

in_root() {  # run a command in the root with a clean environment
  chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/v/bin:/usr/local/bin:/usr/bin:/bin "$@"
}

install_tools() {
  local missing=()
  command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  echo "qemu: $(qemu-aarch64-static --version | head -1); debootstrap $(dpkg-query -W -f '${Version}' debootstrap)"
}

register_binfmt() {
  # No service registers it here (no systemd-binfmt); the F flag in Debian's entry keeps the interpreter
  # open, so it works inside the chroot without a copy of qemu there.
  [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    cat /usr/lib/binfmt.d/qemu-aarch64.conf >/proc/sys/fs/binfmt_misc/register
  fi
  head -1 /proc/sys/fs/binfmt_misc/qemu-aarch64
}

mirror() {  # the host's Debian mirror (deb822 or one-line sources), unless AARCH64_MIRROR names one
  if [ -n "${AARCH64_MIRROR:-}" ]; then
    echo "$AARCH64_MIRROR"
    return
  fi
  local found
  found=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
    grep -oE 'https?://[^ ]+/debian/?( |$)' | head -1 | tr -d ' ')
  echo "${found:-http://deb.debian.org/debian}"
}

# sqlite3: the tests drive the sqlite3 shell (invariant 4), as .ci/run installs it; git: bench/footprint.py,
# which a smoke test runs, records the commit it measured (and fails without a git binary)
PACKAGES=(python3 python3-venv sqlite3 git)
bootstrap() {
  if [ -e "$ROOT/.bootstrapped" ]; then
    echo "reusing $ROOT"
    local missing=() p
    for p in "${PACKAGES[@]}"; do
      in_root dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then  # a root made before the list grew
      in_root apt-get update -qq
      in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
  else
    unmount_root  # never delete through a /dev left bound by a killed run
    rm -rf "$ROOT"
    mkdir -p "$ROOT"
    debootstrap --arch=arm64 --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" "$SUITE" "$ROOT" "$(mirror)"
    touch "$ROOT/.bootstrapped"
  fi
  in_root uname -m
  in_root python3 --version
}

mount_root() {  # /proc and /dev for the tests (subprocesses, /dev/shm); undone on exit
  mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
  if ! mountpoint -q "$ROOT/dev"; then
    mount --rbind /dev "$ROOT/dev"
    mount --make-rslave "$ROOT/dev"
  fi
}
unmount_root() {
  if mountpoint -q "$ROOT/dev"; then umount -R "$ROOT/dev" || umount -lR "$ROOT/dev"; fi
  if mountpoint -q "$ROOT/proc"; then umount "$ROOT/proc" || umount -l "$ROOT/proc"; fi
}
trap unmount_root EXIT

fetch_wheels() {
  # The platforms and Python version bench/aarch64_wheels.py checks, read from it rather than repeated here.
  local settings platforms=() version rest p
  settings=$(cd "$SRC/bench" && "$PYTHON" -c 'import aarch64_wheels as w; print(w.PYTHON_VERSION, *w.PLATFORMS)')
  read -r version rest <<<"$settings"
  for p in $rest; do platforms+=(--platform "$p"); done
  mkdir -p "$ROOT/wheels"
  "$PYTHON" -m pip --disable-pip-version-check download --quiet --only-binary=:all: "${platforms[@]}" \
    --python-version "$version" --implementation cp -d "$ROOT/wheels" "$SRC[test]" pytest-timeout
  rm -f "$ROOT"/wheels/worlddb_lite-*  # pip download keeps the project as it saw it; build its wheel instead
  "$PYTHON" -m pip --disable-pip-version-check wheel --quiet --no-deps "$SRC" -w "$ROOT/wheels"
  ls "$ROOT/wheels" | grep -v 'none-any' | sed 's/^/  compiled: /'
  echo "$(ls "$ROOT/wheels" | wc -l) wheels, $(du -sh "$ROOT/wheels" | cut -f1)"
}

copy_project() {
  # The checkout as bench/aarch64_wheels.py copies it, without its package (the tests import the installed
  # wheel: run from the checkout, its own copy would come first on sys.path) and without bench/out.
  rm -rf "$ROOT$PROJECT" "$ROOT/work/shared"
  (cd "$SRC/bench" && "$PYTHON" - "$SRC" "$ROOT$PROJECT" <<'EOF'
import shutil, sys
from pathlib import Path
import aarch64_wheels as w

repo, dest = Path(sys.argv[1]), Path(sys.argv[2])
def skip(folder, names):
    ignored = set(w.SKIP(folder, names))
    if Path(folder) == repo / "tests" / "fixtures":
        ignored = {n for n in ignored if not n.endswith(".db")}  # the old-layout stores test_migrations opens
    if Path(folder) == repo:
        ignored |= {"worlddb_lite", ".ci-venv", ".ci-venv-newest"}
    if Path(folder) == repo / "bench":
        ignored.add("out")
    return ignored
shutil.copytree(repo, dest, ignore=skip)
EOF
  )
  if [ -d "$DATA" ]; then
    mkdir -p "$ROOT/work/shared"
    cp -r "$DATA" "$ROOT/work/shared/data"
    echo "copied $DATA ($(du -sh "$DATA" | cut -f1)) to $PROJECT/../shared/data"
  else
    echo "no $DATA: the tests that need it skip, and there is no recall bench"
  fi
}

install_project() {
  [ -x "$ROOT/v/bin/python" ] || in_root python3 -m venv /v
  in_root pip install --quiet --disable-pip-version-check --no-index --find-links /wheels 'worlddb_lite[test]' pytest-timeout
  # the same version number each run: reinstall the checkout's wheel just built
  local wheel
  wheel=$(cd "$ROOT/wheels" && ls worlddb_lite-*.whl)
  in_root pip install --quiet --disable-pip-version-check --no-index --no-deps --force-reinstall "/wheels/$wheel"
  in_root python -c 'import platform, numpy, apsw, worlddb_lite; print(platform.machine(), "numpy", numpy.__version__, "SQLite", apsw.sqlite_lib_version(), worlddb_lite.__file__)'
  in_root worlddb write /tmp/aarch64-smoke.db "I moved to Porto in May" --scope me >/dev/null
  in_root worlddb recall /tmp/aarch64-smoke.db "where did I move?" --scope me | sed -n 1,3p  # sed reads it all: no SIGPIPE
  rm -f "$ROOT"/tmp/aarch64-smoke.db*
}

run_tests() {
  local status=0
  in_root bash -c "cd $PROJECT && python -m pytest -q -p no:cacheprovider --timeout=$TIMEOUT $PYTEST_ARGS" \
    >"$OUT/pytest.log" 2>&1 || status=$?
  echo "$status" >"$OUT/pytest.status"
  tail -n 40 "$OUT/pytest.log"
  return 0  # pytest's status ends the script after the bench
}

run_bench() {
  if [ "$CONVERSATIONS" -eq 0 ] || [ ! -f "$ROOT/work/shared/data/locomo/locomo10.json" ]; then
    echo "skipped (AARCH64_CONVERSATIONS=0 or no LoCoMo data)"
    return 0
  fi
  in_root bash -c "cd $PROJECT && python bench/recall.py --dataset locomo /work/shared/data/locomo/locomo10.json \
    --systems worlddb --limit-conversations $CONVERSATIONS --json /tmp/aarch64-locomo.json" >"$OUT/recall.log" 2>&1
  cp "$ROOT/tmp/aarch64-locomo.json" "$OUT/locomo.json"
  tail -n 20 "$OUT/recall.log"
}

export_source() {  # AARCH64_REF: test that commit (git archive), not the working tree with its uncommitted edits
  rm -rf "$OUT/src"
  mkdir -p "$OUT/src"
  git -C "$REPO" archive "$REF" | tar -x -C "$OUT/src"
  echo "$(git -C "$REPO" rev-parse --short "$REF"): $(git -C "$REPO" log -1 --format=%s "$REF" | cut -c1-100)"
}
SRC=$REPO
if [ -n "$REF" ]; then
  phase "export $REF" export_source
  SRC=$OUT/src
fi

phase "tools" install_tools
phase "binfmt" register_binfmt
phase "debootstrap" bootstrap
phase "mount" mount_root
phase "wheels" fetch_wheels
phase "copy" copy_project
phase "install" install_project
phase "pytest" run_tests
phase "recall bench" run_bench
tests_status=$(cat "$OUT/pytest.status")
echo "== total: $(($(date +%s) - started))s; pytest exit $tests_status (log $OUT/pytest.log)"
exit "$tests_status"
