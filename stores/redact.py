"""Store URIs with their secrets hidden: the one function every message that shows a URI uses.

A URI or a libpq conninfo may carry a password in three places: the user info
(``postgresql://app:SECRET@db/events``), a query parameter (``?password=SECRET``,
``?api_key=SECRET``) and a ``key=value`` conninfo (``host=db password=SECRET``). Log lines,
errors and ``repr`` of stores show :func:`redact_uri`'s result, never the URI as given.
"""

from __future__ import annotations

import re
import urllib.parse

MASK = "***"
"""What a hidden secret is replaced by."""

SECRET_WORDS = ("password", "passwd", "pwd", "secret", "token", "key", "auth", "credential")
"""A parameter whose name (lower case, without ``_`` and ``-``) contains one of these is a
secret: ``password``, ``sslpassword``, ``api_key``, ``access-token``, ``UserKeyFile``, ..."""

# key=value conninfo: a value is a single-quoted string (with \' and \\ escapes) or a word.
_CONNINFO_PAIR = re.compile(r"(?P<key>[A-Za-z_][\w-]*)\s*=\s*(?P<value>'(?:[^'\\]|\\.)*'|\S+)")


def is_secret_name(name: str) -> bool:
    """Whether a parameter called ``name`` holds a secret (see :data:`SECRET_WORDS`)."""
    folded = name.lower().replace("_", "").replace("-", "")
    return any(word in folded for word in SECRET_WORDS)


def redact_uri(uri: str) -> str:
    """``uri`` with every secret replaced by ``***``: the password of the user info, and the
    value of every parameter named like a secret (URI query or ``key=value`` conninfo).

    Everything else is kept as given, so the result still says which store is meant.

    >>> redact_uri("postgresql://app:s3cret@db:5432/events?sslmode=require&password=x")
    'postgresql://app:***@db:5432/events?sslmode=require&password=***'
    >>> redact_uri("host=db user=app password='a b' dbname=events")
    'host=db user=app password=*** dbname=events'
    >>> redact_uri("sqlite:///events.db")
    'sqlite:///events.db'
    """
    parts = _split(uri)
    if parts is None:
        return _redact_conninfo(uri)
    head, user_info, location, query, fragment = parts
    shown = head
    if user_info is not None:
        shown += (user_info.partition(":")[0] + ":" + MASK if ":" in user_info else user_info) + "@"
    shown += location
    if query is not None:
        shown += "?" + "&".join(_redact_pair(part) for part in query.split("&"))
    return shown + ("" if fragment is None else "#" + fragment)


def redact_text(text: str, uri: str) -> str:
    """``text`` (a driver's message about ``uri``) with every secret of ``uri`` replaced by
    ``***``, as given and as percent-decoded: drivers echo the parts they could not parse."""
    for secret in sorted(_secrets(uri), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def _redact_pair(part: str) -> str:
    key, equals, _ = part.partition("=")
    if equals and is_secret_name(urllib.parse.unquote(key)):
        return f"{key}={MASK}"
    return part


def _redact_conninfo(conninfo: str) -> str:
    def hide(match: re.Match[str]) -> str:
        if is_secret_name(match["key"]):
            return f"{match['key']}={MASK}"
        return match[0]

    return _CONNINFO_PAIR.sub(hide, conninfo)


def _split(uri: str) -> tuple[str, str | None, str, str | None, str | None] | None:
    """``scheme://``, user info, hosts and path, query, fragment (``None`` where absent);
    ``None`` for a conninfo.

    The user info ends at the last ``@`` before the query or fragment, so a password holding
    an unescaped ``/`` or ``@`` is hidden whole rather than cut at the first one. With no ``@``
    there, an ``@`` after the ``?`` or ``#`` with no ``=`` or ``&`` before it ends the user
    info: the password holds an unescaped ``?`` or ``#``.
    """
    scheme, separator, rest = uri.partition("://")
    if not separator:
        return None
    end = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    at = rest.rfind("@", 0, end)
    if at < 0:
        parameters = min((i for i in (rest.find("="), rest.find("&")) if i >= 0), default=len(rest))
        at = rest.rfind("@", 0, parameters)
    user_info = rest[:at] if at >= 0 else None
    rest = rest[at + 1 :]
    rest, hash_mark, fragment = rest.partition("#")
    location, question, query = rest.partition("?")
    return (
        scheme + separator,
        user_info,
        location,
        query if question else None,
        fragment if hash_mark else None,
    )


def _secrets(uri: str) -> set[str]:
    """The secret values in ``uri``, raw and percent-decoded (non-empty ones only)."""
    found: set[str] = set()
    parts = _split(uri)
    if parts is None:
        for match in _CONNINFO_PAIR.finditer(uri):
            if is_secret_name(match["key"]):
                found |= {match["value"], match["value"].strip("'")}
    else:
        _, user_info, _, query, _ = parts
        if user_info is not None and ":" in user_info:
            found.add(user_info.partition(":")[2])
        for part in (query or "").split("&"):
            key, equals, value = part.partition("=")
            if equals and is_secret_name(urllib.parse.unquote(key)):
                found.add(value)
    found |= {urllib.parse.unquote(value) for value in found}
    return {value for value in found if value}
