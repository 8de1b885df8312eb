"""Readable differences between what a test expected and what a workflow did.

Sequences are compared index by index, so a failure shows where they part ways rather than
two long lists to compare by eye; message values (attrs, dataclass, pydantic) that differ name
the fields that differ.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from decider.models import field_values

_MISSING = "(nothing)"


def sequence_diff(what: str, expected: Sequence[object], actual: Sequence[object]) -> str | None:
    """``None`` if the sequences are equal, else a diff index by index.

    Each line holds one index: ``=`` marks an equal element, ``!`` one that differs, with
    the expected and the actual value below it and, for two attrs values of one class, the
    fields that differ. The header names the first difference.

    >>> print(sequence_diff("commands", ["a", "b"], ["a", "c", "d"]))
    commands differ: expected 2, got 3; first difference at #1
      = #0 'a'
      ! #1 expected: 'b'
             actual: 'c'
      ! #2 expected: (nothing)
             actual: 'd'
    >>> sequence_diff("commands", ["a"], ["a"]) is None
    True
    """
    expected, actual = list(expected), list(actual)
    if expected == actual:
        return None
    size = max(len(expected), len(actual))
    first = next(
        i for i in range(size) if i >= len(expected) or i >= len(actual) or expected[i] != actual[i]
    )
    lines = [
        f"{what} differ: expected {len(expected)}, got {len(actual)}; first difference at #{first}"
    ]
    for i in range(size):
        left = repr(expected[i]) if i < len(expected) else _MISSING
        right = repr(actual[i]) if i < len(actual) else _MISSING
        if i < len(expected) and i < len(actual) and expected[i] == actual[i]:
            lines.append(f"  = #{i} {left}")
            continue
        pad = " " * len(str(i))
        lines.append(f"  ! #{i} expected: {left}")
        lines.append(f"      {pad}  actual: {right}")
        if i < len(expected) and i < len(actual):
            lines.extend(
                f"      {pad}  field {line}" for line in field_diff(expected[i], actual[i])
            )
    return "\n".join(lines)


def value_diff(what: str, expected: object, actual: object) -> str | None:
    """``None`` if the values are equal, else both values and the attrs fields that differ.

    >>> import attrs
    >>> @attrs.frozen
    ... class Point:
    ...     x: int
    ...     y: int
    >>> print(value_diff("state", Point(1, 2), Point(1, 3)))
    state differs:
      expected: Point(x=1, y=2)
        actual: Point(x=1, y=3)
      field y: expected 2, actual 3
    """
    if expected == actual:
        return None
    lines = [f"{what} differs:", f"  expected: {expected!r}", f"    actual: {actual!r}"]
    lines.extend(f"  field {line}" for line in field_diff(expected, actual))
    return "\n".join(lines)


def field_diff(expected: object, actual: object, path: str = "") -> Iterator[str]:
    """The differing fields of two values of one message class (attrs, dataclass, pydantic),
    descending into nested ones.

    Yields nothing for values that are not both instances of the same message class: their
    reprs already say it all.

    >>> import attrs
    >>> @attrs.frozen
    ... class Box:
    ...     item: object
    >>> list(field_diff(Box(Box(1)), Box(Box(2))))
    ['item.item: expected 1, actual 2']
    """
    if type(actual) is not type(expected):
        return
    lefts, rights = field_values(expected), field_values(actual)
    if lefts is None or rights is None:
        return
    for field, left in lefts.items():
        right = rights[field]
        if left == right:
            continue
        name = f"{path}{field}"
        if type(left) is type(right) and field_values(left) is not None:
            yield from field_diff(left, right, f"{name}.")
        else:
            yield f"{name}: expected {left!r}, actual {right!r}"


def describe(history: Sequence[object]) -> str:
    """A numbered list, one item a line, for failure messages.

    >>> print(describe(["a", "b"]))
      #0 'a'
      #1 'b'
    """
    return "\n".join(f"  #{i} {item!r}" for i, item in enumerate(history)) or "  (empty)"
