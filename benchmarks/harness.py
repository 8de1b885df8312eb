"""What every benchmark shares: the figure it reports, its target, and how to time things.

A figure is one measured rate next to the rate of a baseline measured in the same process and
the same run, with the ratio between them and the target that ratio should meet. Absolute
rates depend on the machine; ratios against a same-run baseline mostly do not, which is why
each target is a ratio.
"""

from __future__ import annotations

import gc
import operator
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import attrs

_COMPARE: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, ">=": operator.ge}


@attrs.frozen
class Target:
    """A bound the figure's ratio should respect: ``ratio <op> value``."""

    op: str = attrs.field(validator=attrs.validators.in_(tuple(_COMPARE)))
    value: float

    def met_by(self, ratio: float) -> bool:
        """Whether ``ratio`` respects the bound."""
        return _COMPARE[self.op](ratio, self.value)

    def __str__(self) -> str:
        return f"{self.op} {self.value:g}x"


@attrs.frozen
class Figure:
    """One reported figure: a subject's rate, a baseline's rate, their ratio and its target.

    ``ratio`` is defined per figure and explained by ``ratio_is`` (for example "framework time
    / hand-written time"); ``met`` is ``None`` when the figure has no target. ``note`` is a
    one-line detail for the reader (latencies, peak memory), ``extra`` the raw numbers.
    """

    key: str
    title: str
    unit: str
    rate: float
    baseline: str
    baseline_rate: float | None
    ratio: float | None
    ratio_is: str
    target: Target | None = None
    note: str = ""
    extra: dict[str, Any] = attrs.field(factory=dict)

    @property
    def met(self) -> bool | None:
        """Whether the target is met; ``None`` without a target or a ratio."""
        if self.target is None or self.ratio is None:
            return None
        return self.target.met_by(self.ratio)

    def to_json(self) -> dict[str, Any]:
        """The figure as a JSON-ready dict (every field, plus ``met``)."""
        return {
            "key": self.key,
            "title": self.title,
            "unit": self.unit,
            "rate": self.rate,
            "baseline": self.baseline,
            "baseline_rate": self.baseline_rate,
            "ratio": self.ratio,
            "ratio_is": self.ratio_is,
            "target": None
            if self.target is None
            else {"op": self.target.op, "value": self.target.value},
            "met": self.met,
            "note": self.note,
            "extra": self.extra,
        }


@attrs.frozen
class Pending:
    """A figure that could not be measured in this run, and why."""

    key: str
    title: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The pending figure as a JSON-ready dict."""
        return {"key": self.key, "title": self.title, "pending": self.reason}


Result = Figure | Pending


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes, with the garbage collector held off during the call.

    Both sides of every comparison are timed this way, so a collection triggered by one side's
    garbage does not land in the other side's time.
    """
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def compare_best(
    subject: Callable[[], object], baseline: Callable[[], object], rounds: int
) -> tuple[float, float]:
    """The best (smallest) time of ``subject`` and of ``baseline`` over interleaved rounds.

    Interleaving means a slow spell of the machine hits both sides alike; best-of is the usual
    estimator for CPU-bound code, whose noise only ever adds time.
    """
    subject_times: list[float] = []
    baseline_times: list[float] = []
    for _ in range(rounds):
        baseline_times.append(timed(baseline))
        subject_times.append(timed(subject))
    return min(subject_times), min(baseline_times)


def compare_median(
    subject: Callable[[], object], baseline: Callable[[], object], rounds: int
) -> tuple[float, float]:
    """The median time of ``subject`` and of ``baseline`` over interleaved rounds.

    For I/O-bound work (fsync), whose times spread both ways, the median is steadier than the
    best round.
    """
    subject_times: list[float] = []
    baseline_times: list[float] = []
    for _ in range(rounds):
        baseline_times.append(timed(baseline))
        subject_times.append(timed(subject))
    return statistics.median(subject_times), statistics.median(baseline_times)


Prepared = Callable[[], AbstractContextManager[Callable[[], object]]]
"""One side of a comparison whose set-up is not timed: entering it prepares the work (a fresh
database schema, a connection) and gives the callable to time; leaving it cleans up."""


def compare_median_prepared(
    subject: Prepared, baseline: Prepared, rounds: int
) -> tuple[float, float]:
    """:func:`compare_median` for work that needs a fresh set-up each round, which is not timed.

    Each round prepares the baseline, times it, cleans up, then does the same for the subject.
    """
    subject_times: list[float] = []
    baseline_times: list[float] = []
    for _ in range(rounds):
        with baseline() as work:
            baseline_times.append(timed(work))
        with subject() as work:
            subject_times.append(timed(work))
    return statistics.median(subject_times), statistics.median(baseline_times)


def format_rate(rate: float | None) -> str:
    """A rate for the table: thousands separators, three significant figures below 100."""
    if rate is None:
        return "-"
    if rate >= 100:
        return f"{rate:,.0f}"
    return f"{rate:.3g}"


def format_table(results: list[Result]) -> str:
    """The results as a plain-text table, one figure a line, pending figures last."""
    header = ("figure", "rate", "baseline rate", "unit", "ratio", "target", "met")
    rows: list[tuple[str, ...]] = [header]
    pending: list[Pending] = []
    for result in results:
        if isinstance(result, Pending):
            pending.append(result)
            continue
        met = {True: "yes", False: "NO", None: "-"}[result.met]
        rows.append(
            (
                result.title,
                format_rate(result.rate),
                format_rate(result.baseline_rate),
                result.unit,
                "-" if result.ratio is None else f"{result.ratio:.2f}x",
                "-" if result.target is None else str(result.target),
                met,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for index, row in enumerate(rows):
        cells = [
            cell.ljust(width) if column in (0, 3) else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    lines.extend(f"{item.title}: PENDING ({item.reason})" for item in pending)
    return "\n".join(lines)


def format_legend(results: list[Result]) -> str:
    """What each ratio and baseline means (once per distinct pair), then each figure's note."""
    lines = []
    seen: dict[tuple[str, str], list[str]] = {}
    for result in results:
        if isinstance(result, Figure):
            seen.setdefault((result.ratio_is, result.baseline), []).append(
                result.title.split(" ", 1)[0]
            )
    for (ratio_is, baseline), numbers in seen.items():
        lines.append(
            f"{'/'.join(dict.fromkeys(numbers))} ratio = {ratio_is}; baseline = {baseline}"
        )
    lines.extend(
        f"{result.title}: {result.note}"
        for result in results
        if isinstance(result, Figure) and result.note
    )
    return "\n".join(lines)


def format_markdown(results: list[Result]) -> str:
    """The results as a Markdown table (for docs/benchmarks.md), pending figures as rows too."""
    lines = [
        "| figure | rate | baseline rate | unit | ratio | target | met |",
        "|---|---:|---:|---|---:|---:|---|",
    ]
    for result in results:
        if isinstance(result, Pending):
            lines.append(f"| {result.title} | pending: {result.reason} | | | | | |")
            continue
        met = {True: "yes", False: "**no**", None: "-"}[result.met]
        ratio = "-" if result.ratio is None else f"{result.ratio:.2f}x"
        target = "-" if result.target is None else str(result.target).replace(" ", "")
        lines.append(
            f"| {result.title} | {format_rate(result.rate)} | {format_rate(result.baseline_rate)}"
            f" | {result.unit} | {ratio} | {target} | {met} |"
        )
    notes = [f"- {r.title}: {r.note}" for r in results if isinstance(r, Figure) and r.note]
    return "\n".join(lines + (["", *notes] if notes else []))
