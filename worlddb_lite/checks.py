"""Argument checks shared by every layer: a bad value is an InvalidInput that says what to give instead."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, TypeVar

from .errors import Hint, InvalidInput
from .types import SCOPE_KINDS, ScopeRef


def names(value: object, field: str, example: str) -> Sequence[str] | None:
    """None, or a list (or tuple) of names; a lone string is not a list of names."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"{field} must be a list of names, e.g. {example}; got {value!r:.100}")
    return value


def file_name(value: object, what: str, fix: str) -> str:
    """A path SQLite can take as a file name (text, not blank, no NUL, UTF-8), or InvalidInput.

    ``what`` names the argument in the message, ``fix`` says what to give instead.
    """
    path = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(path, str):
        raise InvalidInput(f"{what} must be a file path, got {type(value).__name__}")
    if not path.strip() or "\x00" in path:
        raise InvalidInput(f"{what} {path!r} cannot name a file; {fix}")
    try:
        path.encode("utf-8")  # SQLite takes file names as UTF-8
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} {path!r} is not valid UTF-8; rename the file or its folder") from None
    return path


def whole(value: object, field: str, *, least: int = 0, most: int | None = None, unit: str = "") -> int:
    """A whole number from ``least`` (to ``most``), or InvalidInput; a bool is not a number here."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least or (most is not None and value > most):
        if most is not None:
            raise InvalidInput(f"{field} must be a whole number from {least} to {most}, got {value!r}")
        of = f" of {unit}" if unit else ""
        raise InvalidInput(f"{field} must be a whole number{of} >= {least}, not {value!r}")
    return value


def number(value: object, field: str) -> float:
    """A finite number, or InvalidInput."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{field} must be a number, got {type(value).__name__}")
    try:
        result = float(value)
    except OverflowError:  # an int too large for a float
        result = math.inf
    if not math.isfinite(result):
        raise InvalidInput(f"{field} must be a finite number")
    return result


def share(value: object, field: str) -> float:
    """A number from 0 to 1, or InvalidInput naming the range (a bool, a string or NaN is none)."""
    try:
        result = number(value, field)
    except InvalidInput:
        result = math.nan  # not a number, or past any float: said with the range below
    if not 0.0 <= result <= 1.0:
        raise InvalidInput(f"{field} must be a number from 0 to 1, got {value!r}")
    return result


MAX_TAGS = 16  # tags on one memory
TAG_CHARS = 40  # characters in one tag


def tag(value: object, field: str = "tag") -> str:
    """One tag: a short label (1 to 40 characters, no comma or control character), compared case-blind."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text such as 'work' or 'health', got {type(value).__name__}")
    label = " ".join(value.split()).casefold()
    if not label or len(label) > TAG_CHARS or "," in label or any(not c.isprintable() for c in label):
        raise InvalidInput(
            f"{field} {value!r:.60} is not a tag: give a short label of 1 to {TAG_CHARS} characters "
            "without commas or control characters, e.g. 'work'"
        )
    return label


def tags(value: object) -> list[str]:
    """Tags for a memory: a list of up to 16 tags (``tag``), kept sorted and once each; a lone string is one tag."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise InvalidInput(f"tags must be a list of short labels, e.g. ['work', 'travel']; got {type(value).__name__}")
    found = sorted({tag(v) for v in value})
    if len(found) > MAX_TAGS:
        raise InvalidInput(f"a memory takes at most {MAX_TAGS} tags, got {len(found)}; nothing was written")
    return found


def text(value: object, field: str, *, required: bool) -> str | None:
    """Caller text: UTF-8 without NUL (bytes are decoded), and not blank where ``required``."""
    if value is None:
        if required:
            raise InvalidInput(f"{field} is required")
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{field} is not valid UTF-8 ({exc.reason}); decode it first") from None
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{field} is not valid UTF-8 (it holds undecodable bytes)") from None
    if "\x00" in value:
        raise InvalidInput(f"{field} holds a NUL character; remove it")
    if required and not value.strip():
        raise InvalidInput(
            f"{field} is empty; " + ("there is nothing to remember" if field == "text" else "give some words")
        )
    return value


# The longest memory text the engine takes, a note or a turn alike: a longer paste (a 1 MB log) is refused
# and is to be split (BEAM-100K's longest message is 349k characters; a 500k note writes in about 0.6 s)
MAX_TEXT_CHARS = 500_000


def memory_text(value: object, field: str) -> str:
    """``required_text`` of at most ``MAX_TEXT_CHARS`` characters: what a memory may say."""
    checked = required_text(value, field)
    if len(checked) > MAX_TEXT_CHARS:
        raise InvalidInput(
            f"{field} holds {len(checked):,} characters, more than {MAX_TEXT_CHARS:,}; split it into several memories"
        )
    return checked


def required_text(value: object, field: str) -> str:
    """``text`` that must be given and not blank."""
    checked = text(value, field, required=True)
    assert checked is not None
    return checked


def scope_ref(value: object, field: str = "scope") -> ScopeRef:
    """A scope's name, ``kind:name`` for an agent, app or run (``agent:planner``); a bare name is a user's.

    A user whose name starts with a kind and a colon is written ``user:run:1``.
    """
    named = required_text(value, field)
    kind, colon, rest = named.partition(":")
    if colon and kind in SCOPE_KINDS:
        if not rest.strip():
            raise InvalidInput(f"{field} {named!r} names a kind but no scope; write {kind}:NAME")
        return ScopeRef(kind, rest)
    return ScopeRef("user", named)


MAX_SCOPES = 100  # scopes one write names: their links land in the write's one transaction


def scope_refs(value: object, field: str = "scope") -> tuple[ScopeRef, ...]:
    """One scope name, or a list of 1 to ``MAX_SCOPES`` (repeats dropped, first kept first)."""
    if isinstance(value, (str, bytes)):
        return (scope_ref(value, field),)
    if not isinstance(value, Sequence):
        raise InvalidInput(f"{field} must be a scope's name or a list of names, got {type(value).__name__}")
    refs = tuple(dict.fromkeys(scope_ref(item, field) for item in value))
    if not 1 <= len(refs) <= MAX_SCOPES:
        raise InvalidInput(f"{field} must name 1 to {MAX_SCOPES} scopes, got {len(refs)}")
    return refs


def scope_kind(value: object) -> str | None:
    """A kind to filter scopes by (None: every kind)."""
    if value is None or value in SCOPE_KINDS:
        return value
    raise InvalidInput(f"kind must be one of {', '.join(SCOPE_KINDS)}, got {value!r}")


def props(value: object) -> Mapping[str, Any] | None:
    """Properties: None or a mapping (its values are checked when hashed)."""
    if value is not None and not isinstance(value, Mapping):
        raise InvalidInput(f"props must be a mapping of text keys to values, got {type(value).__name__}")
    return value


def aliases(value: object) -> list[str]:
    """A list of non-empty alias texts."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise InvalidInput("aliases must be a list of names")
    return [a for a in (required_text(x, "alias") for x in value) if a]


E = TypeVar("E", bound=Enum)


def choice(enum: type[E], value: object, field: str) -> E:
    """A member of a string enum, or InvalidInput naming the choices."""
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(str(m.value) for m in enum)
        raise InvalidInput(f"{field} must be one of {choices}; got {value!r}") from None


def proposal_number(value: object) -> int:
    """A merge proposal number, or InvalidInput."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidInput(f"a merge proposal number must be an integer, got {type(value).__name__}")
    try:
        found = int(value)
    except ValueError:
        raise InvalidInput(f"{value!r} is not a merge proposal number", hint=Hint("merge_proposals")) from None
    if not 1 <= found < 2**63:
        raise InvalidInput(f"{found} is not a merge proposal number; they start at 1")
    return found
