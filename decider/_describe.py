"""An exception as a one-line reason, whatever its contents: for decode errors, skip records
and logs. :mod:`decider.codec` re-exports :func:`describe`: import it from there."""

from __future__ import annotations


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
