"""Logging set-up for a service process: text or JSON lines, a level, or a config file.

Every logger of the package is named after its module under ``decider.`` (``decider``,
``decider.processors.commands.processor``, ...), so one level on ``decider`` governs them all
and a config file can tune one module. Context travels in ``extra`` fields (``processor``,
``stream``, ``position``, ``command_id``, ...): the JSON format writes each as a key, the text
format appends them as ``key=value``.

A standard-library :class:`logging.Formatter` rather than python-json-logger: one small class
does it, and the service keeps its short list of dependencies.
"""

from __future__ import annotations

import json
import logging
import logging.config
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT_LOGGER = "decider"
"""The logger every logger of the package descends from."""

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The text format's fields (the ``extra`` context follows as ``key=value``)."""

FORMATS = ("text", "json")
"""The values of ``--log-format``."""

_HANDLER = "decider.stderr"
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


def context_of(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra`` fields a log call added to ``record``."""
    return {
        key: value
        for key, value in record.__dict__.items()
        if key not in _STANDARD and not key.startswith("_")
    }


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``,
    every ``extra`` field, and ``exception`` (the traceback) where there is one."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON (a value JSON cannot hold is written as its str)."""
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        doc.update(context_of(record))
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return json.dumps(doc, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """:data:`TEXT_FORMAT`, then the ``extra`` fields as ``key=value``."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        """The line, with the record's context appended."""
        line = super().formatMessage(record)
        context = context_of(record)
        if context:
            line += " " + " ".join(f"{k}={v}" for k, v in context.items())
        return line


class ContextAdapter(logging.LoggerAdapter[logging.Logger]):
    """A logger that adds fixed ``extra`` fields (``processor=...``) to every record it writes;
    a call's own ``extra`` fields are added too (they win over the fixed ones)."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        """The message as is, with the fixed and the call's ``extra`` fields merged."""
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


def with_context(logger: logging.Logger, **fields: Any) -> ContextAdapter:
    """``logger``, every record of which carries ``fields`` as ``extra`` fields.

    >>> with_context(logging.getLogger("decider.x"), processor="fines.commands").extra
    {'processor': 'fines.commands'}
    """
    return ContextAdapter(logger, fields)


def parse_level(name: str) -> int:
    """The level ``name`` (``DEBUG``, ``info``, ``30``...); :class:`ValueError` if unknown."""
    if name.isdigit():
        return int(name)
    level = logging.getLevelName(name.upper())
    if not isinstance(level, int):
        raise ValueError(f"unknown log level {name!r}; use DEBUG, INFO, WARNING, ERROR")
    return level


def load_config(path: Path) -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` document from a ``.json`` or ``.toml`` file.

    Raises :class:`ValueError` naming the file for one that cannot be read or parsed.
    """
    try:
        text = path.read_text()
        if path.suffix.lower() == ".toml":
            doc: Any = tomllib.loads(text)
        elif path.suffix.lower() == ".json":
            doc = json.loads(text)
        else:
            raise ValueError("the file must end in .json or .toml")
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the log config {str(path)!r}: {exc}") from exc
    if not isinstance(doc, dict):
        raise ValueError(f"the log config {str(path)!r} is not a mapping")
    doc.setdefault("version", 1)
    doc.setdefault("disable_existing_loggers", False)
    return doc


def configure(level: int, format: str = "text", config: Path | None = None) -> None:
    """Set up logging for a service process, on stderr.

    With ``config``, the file's :func:`logging.config.dictConfig` document decides everything
    (formatters may name ``decider.processors.engine.logs.JsonFormatter`` as their ``()``). Else one
    handler on the root logger writes ``format`` (``text`` or ``json``), and ``level`` applies
    to the ``decider`` loggers. Raises :class:`ValueError` for a bad format or config file.
    """
    if config is not None:
        try:
            logging.config.dictConfig(load_config(config))
        except (ValueError, TypeError, AttributeError, ImportError) as exc:
            raise ValueError(f"the log config {str(config)!r} is not valid: {exc}") from exc
        return
    if format not in FORMATS:
        raise ValueError(f"unknown log format {format!r}; use text or json")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else TextFormatter())
    handler.set_name(_HANDLER)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER]:
        root.removeHandler(old)  # configured twice in one process: replaced, not doubled
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger(ROOT_LOGGER).setLevel(level)
