"""Argument checks shared by the facade, the query planner and maintenance: a bad value is an InvalidInput."""

from __future__ import annotations

import os
from collections.abc import Sequence

from .errors import InvalidInput


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
