"""Forged files (issue 35): a change set or an export altered field by field and sealed again is refused whole or
applied cleanly, never anything in between.

The honest files come from one scenario (tests/hostile_files.py): a sender and its replica that wrote apart
(notes, extracted facts, an amend, a retire, a retract, entities, aliases, same_as accepted, rejected and
pending, refers_to links, a purge, a deferred note). Its change sets (``changes`` since the replica's token, and
everything) go to the replica; its export is imported into the replica and into a store made apart. Each
mutation family alters them (times, numbers, wrong types, ids, forged edges and proposals, states that
contradict their bodies, deep nesting, megabyte strings, dropped fields, duplicated records, changed kinds,
another order, a lying header) and the change set's end line is written again with the right count and digest,
so the file is well formed and only the checks on what it says can refuse it. For every mutant, either:

* it is refused whole: a ``WorldDBError``, and the receiver's tables and roots are exactly as before; or
* it is applied: then a deep ``verify`` passes, an ordinary write, ``recall``, ``search`` and ``list_memories``
  still work, and a sync of both ways with the sender reports ``converged`` (not for the store made apart: an
  honest import does not converge with a store it is no replica of).

Any other exception (OverflowError, ValueError, RecursionError, KeyError, an apsw error...), a refusal that
changed the store, or a store left unverifiable, unwritable or unsyncable fails. Shrinking is off: a mutation is
one field and one value already, and its description names both (the failure message shows it).

The default run draws 40 mutants per family and kind of file (12 for the megabyte strings), about 1,150 in all:
30-50 s once everything passes, by the machine's load, and less while mutants fail (a property stops at its
first failure). ``-m slow`` draws 500 per family and kind of file (100 with megabyte strings: 10-15 minutes once
everything passes), and feeds one change set of four million tiny records to a receiver in a subprocess, which
must refuse it within 10 s and 100 MB. ``bench/fuzz_files.py`` runs the same harness without stopping at a
failure and counts the failure classes. The tally of this module's mutants is printed at its teardown
(hypothesis runs a failing example once more to report it: that one counts twice).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from . import hostile_files as harness

COMMON = {
    "deadline": None,
    "database": None,
    "suppress_health_check": list(HealthCheck),
    "phases": [Phase.explicit, Phase.generate],  # no shrinking: see the module docstring
}
FAST = settings(max_examples=40, derandomize=True, **COMMON)
FAST_SIZES = settings(max_examples=12, derandomize=True, **COMMON)  # each mutant writes 1-3 MB of text
SLOW = settings(max_examples=500, **COMMON)
SLOW_SIZES = settings(max_examples=100, **COMMON)

CHANGE_SETS = ["changes", "full"]
EXPORTS = ["export-replica", "export-fresh"]
FAMILIES = sorted(name for name in harness.FAMILIES if name != "size")


@pytest.fixture(scope="module", autouse=True)
def tally(request: pytest.FixtureRequest) -> Iterator[harness.Tally]:
    """Print how many mutants this module tried, and what became of them, once it is done."""
    counts = harness.TALLY

    def now() -> tuple[int, ...]:
        return counts.tried, counts.refused, counts.applied_ok, len(counts.diverged), len(counts.failures)

    before = now()
    yield counts
    tried, refused, applied, diverged, failed = (a - b for a, b in zip(now(), before, strict=True))
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(
            f"\ntest_hostile_files: {tried} mutants tried: {refused} refused, {applied} applied, {diverged} applied but"
            f" never converging (forgeries no check can see), {failed} failed"
        )


def _draw(data: st.DataObject) -> harness.Draw:
    return harness.Draw(
        lambda options, label: data.draw(st.sampled_from(options), label=label),
        lambda lo, hi, label: data.draw(st.integers(min_value=lo, max_value=hi), label=label),
    )


def _one(data: st.DataObject, family: str, targets: list[str]) -> None:
    draw = _draw(data)
    target = draw.pick(targets, "target")
    mutation = harness.draw_mutation(draw, family, target)
    verdict = harness.run_mutant(mutation)
    assert verdict.ok, verdict.describe()


# ---- change sets ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
@FAST
@given(data=st.data())
def test_a_forged_change_set_is_refused_whole_or_applied_cleanly(family: str, data: st.DataObject) -> None:
    _one(data, family, CHANGE_SETS)


@FAST_SIZES
@given(data=st.data())
def test_a_change_set_with_megabyte_strings_is_refused_whole_or_applied_cleanly(data: st.DataObject) -> None:
    _one(data, "size", CHANGE_SETS)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
@SLOW
@given(data=st.data())
def test_forged_change_sets_long(family: str, data: st.DataObject) -> None:
    _one(data, family, CHANGE_SETS)


@pytest.mark.slow
@SLOW_SIZES
@given(data=st.data())
def test_change_sets_with_megabyte_strings_long(data: st.DataObject) -> None:
    _one(data, "size", CHANGE_SETS)


# ---- exports -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
@FAST
@given(data=st.data())
def test_a_forged_export_is_refused_whole_or_imported_cleanly(family: str, data: st.DataObject) -> None:
    _one(data, family, EXPORTS)


@FAST_SIZES
@given(data=st.data())
def test_an_export_with_megabyte_strings_is_refused_whole_or_imported_cleanly(data: st.DataObject) -> None:
    _one(data, "size", EXPORTS)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
@SLOW
@given(data=st.data())
def test_forged_exports_long(family: str, data: st.DataObject) -> None:
    _one(data, family, EXPORTS)


@pytest.mark.slow
@SLOW_SIZES
@given(data=st.data())
def test_exports_with_megabyte_strings_long(data: st.DataObject) -> None:
    _one(data, "size", EXPORTS)


# ---- the harness itself ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", harness.TARGETS)
def test_the_honest_files_pass_every_check(target: str) -> None:
    # without this, a harness that broke every store would call each mutant's failure the engine's
    verdict = harness.run_mutant(harness.Mutation("none", target, "honest", lambda records: records))
    assert verdict.outcome == "applied", verdict.describe()


def test_a_forged_set_passes_the_integrity_check() -> None:
    # the seal is right: a reader that checks only the count and the digest reads the forged set
    records = harness.template().sets["changes"]
    forged = json.loads(json.dumps(records))
    forged[1]["salience"] = 10**400
    data = harness.seal(forged)
    assert harness.unseal(data) == forged
    assert harness.seal(records) != data


# ---- a bomb of tiny records --------------------------------------------------------------------------------------

BOMB = textwrap.dedent(
    """
    import json, os, resource, sys, tempfile, time, zlib
    from pathlib import Path
    from blake3 import blake3
    from tests import hostile_files as harness
    from worlddb_lite import WorldDBError

    template = harness.template()
    header = template.sets["changes"][0]  # a valid header, copied from a real set
    folder = Path(tempfile.mkdtemp())
    receiver = template.open("b", folder, harness.dt.timedelta(seconds=7))
    packer, digest, parts, count = zlib.compressobj(6), blake3(), [], 0
    rng = __import__("random").Random(35)

    def put(block):
        digest.update(block)
        parts.append(packer.compress(block))

    put(json.dumps(header, sort_keys=True, separators=(",", ":")).encode() + b"\\n")
    plain = b'{"kind":"node"}\\n' * 9_000
    for _ in range(400):  # 9,000 bare records and 1,000 that differ a little, so the set is not all repeats
        varied = b"".join(b'{"kind":"node","n":"%06x"}\\n' % rng.getrandbits(24) for _ in range(1_000))
        put(plain + varied)
        count += 10_000
    body_digest = digest.hexdigest()
    parts.append(packer.compress(b'{"digest":"%s","kind":"end","records":%d}\\n' % (body_digest.encode(), count)))
    parts.append(packer.flush())
    data = b"".join(parts)
    del parts, plain
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    try:
        receiver.apply_changes(data)
        outcome = "applied"
    except WorldDBError as exc:
        outcome = "refused: " + str(exc)[:200]
    except BaseException as exc:
        outcome = f"{type(exc).__name__}: {str(exc)[:200]}"
    seconds = time.monotonic() - started
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(json.dumps({"records": count, "bytes": len(data), "seconds": seconds, "grown_kb": grown, "outcome": outcome}))
    """
)


@pytest.mark.slow
def test_a_set_of_millions_of_tiny_records_is_refused_quickly_and_in_little_memory() -> None:
    # a valid header and end line around four million bare records, 2 MB compressed: reading them all into
    # dicts, or writing any of them, costs gigabytes; the set must be refused, fast and in bounded memory
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", BOMB], cwd=root, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["records"] >= 2_000_000 and result["bytes"] < 4 << 20, result
    assert result["outcome"].startswith("refused"), result
    assert result["seconds"] < 10, result
    assert result["grown_kb"] < 100 * 1024, result
