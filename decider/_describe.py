"""An exception as a one-line reason, whatever its contents: for decode errors, skip records
and logs. :mod:`decider.codec` re-exports :func:`describe`: import it from there."""

from __future__ import annotations

import traceback

TRACEBACK_LIMIT = 4000
"""The most characters of a traceback kept with a skip or park record."""


def describe(exc: BaseException, limit: int = 500) -> str:
    """A one-line reason for ``exc``, at most ``limit`` characters, whatever its contents.

    A ``repr`` that itself fails (a deeply nested value) does not hide the exception's type.

    >>> describe(ValueError("x" * 600), limit=20)
    "ValueError('xxxxxxx…"
    """
    try:
        text = _describe(exc) if isinstance(exc, Exception) else repr(exc)
    except Exception:  # a repr that recurses too deep, or raises
        text = f"{type(exc).__name__} (its description failed)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe(exc: Exception) -> str:
    """A one-line reason from a cattrs error, which may group several."""
    subs = getattr(exc, "exceptions", None)
    if subs:
        parts = []
        for sub in subs:
            notes = getattr(sub, "__notes__", [])
            parts.append(f"{'; '.join(notes)}: {sub!r}" if notes else repr(sub))
        return "; ".join(parts)
    return repr(exc)


def format_traceback(exc: BaseException, limit: int = TRACEBACK_LIMIT) -> str:
    """The traceback of ``exc`` (with its causes) as text, at most ``limit`` characters: where
    it is longer, its end is kept (the frame that raised, and the exception's line), after a
    ``…`` line. Never raises.

    >>> try:
    ...     {}["missing_key"]
    ... except KeyError as exc:
    ...     print(format_traceback(exc).splitlines()[-1])
    KeyError: 'missing_key'
    """
    try:
        text = "".join(traceback.format_exception(exc)).rstrip("\n")
    except Exception:  # a repr in a frame or in the exception that fails
        text = describe(exc)
    if len(text) <= limit:
        return text
    return "…\n" + text[len(text) - limit + 2 :]
