"""A state diagram drawn as SVG on the server: a small layered layout, no JavaScript.

Mermaid's renderer is JavaScript (about 3 MB minified) and could not be fetched from a CDN
here; drawing the few states of a workflow needs much less. States are placed in layers by the
longest path from the initial state (edges that close a cycle are set aside first), each
layer centred on one axis. A transition to the next layer is a straight arrow labelled on its
outer side; one that skips layers goes around everything on the left, one that goes back up
(or stays in its layer) around everything on the right; a transition to the same state is a
loop. Transitions between the same two states share one arrow whose label lists each of them.
States carry their path class (``past``, ``current``, ``future``, ``error``) as a CSS class,
styled by the console's stylesheet.

Every text is escaped: state names and labels come from code, but counts and classes are
drawn from stored data.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

import attrs

from decider.diagram import Diagram

_CHAR = 7.4  # px per character of the 13 px state names (a sans-serif average)
_LABEL_CHAR = 6.3  # px per character of the 11 px labels
_LINE = 13  # px per label line
_NODE_H = 34
_LAYER_GAP = 96
_NODE_GAP = 48
_LOOP = 46
_PAD = 24


@attrs.define
class _Node:
    name: str
    layer: int
    width: float
    loop: float = 0.0  # room its self-loop and label take on its right
    x: float = 0.0  # centre
    y: float = 0.0  # top

    @property
    def left(self) -> float:
        return self.x - self.width / 2

    @property
    def right(self) -> float:
        return self.x + self.width / 2


@attrs.define
class _Canvas:
    """What is drawn so far, and how far it reaches: arrows that go around must clear it."""

    parts: list[str] = attrs.Factory(list)
    min_x: float = 0.0
    min_y: float = 0.0
    max_x: float = 0.0
    max_y: float = 0.0

    def cover(self, x: float, y: float) -> None:
        self.min_x, self.max_x = min(self.min_x, x), max(self.max_x, x)
        self.min_y, self.max_y = min(self.min_y, y), max(self.max_y, y)


def render(diagram: Diagram, classes: Mapping[str, str] | None = None, *, title: str = "") -> str:
    """The diagram as an ``<svg>`` element, states classed by ``classes`` (see module doc)."""
    classes = classes or {}
    labels = _labels(diagram)
    nodes = _layout(diagram, labels)
    canvas = _Canvas()
    for node in nodes.values():
        canvas.cover(node.left, node.y)
        canvas.cover(node.right + node.loop, node.y + _NODE_H)
    _start(canvas, nodes[diagram.initial])
    around, straight = [], []
    for (source, target), lines in labels.items():
        a, b = nodes[source], nodes[target]
        if a is b:
            _loop(canvas, a, lines)
        elif b.layer == a.layer + 1:
            straight.append((a, b, lines))
        else:
            around.append((a, b, lines))
    # Between two layers, the left half of the arrows is labelled on the left, the rest on the
    # right, so that labels of arrows that meet or part do not cover each other.
    for depth in {a.layer for a, _, _ in straight}:
        row = sorted((e for e in straight if e[0].layer == depth), key=lambda e: e[0].x + e[1].x)
        for index, (a, b, lines) in enumerate(row):
            _straight(canvas, a, b, lines, left=len(row) > 1 and index < len(row) / 2)
    for name, kinds in diagram.terminals.items():
        if name in nodes:
            _end(canvas, nodes[name], " / ".join(kinds))
    # Around everything drawn so far, each one further out than the last.
    for a, b, lines in around:
        if b.layer > a.layer:
            _around_left(canvas, a, b, lines)
        else:
            _around_right(canvas, a, b, lines)
    for name in diagram.states:
        _node(canvas, nodes[name], classes.get(name), name in diagram.terminals)
    x0, y0 = canvas.min_x - _PAD, canvas.min_y - _PAD
    width, height = canvas.max_x - x0 + _PAD, canvas.max_y - y0 + _PAD
    name = _e(title or diagram.workflow)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="diagram" role="img" '
        f'viewBox="{x0:.0f} {y0:.0f} {width:.0f} {height:.0f}" width="{width:.0f}" '
        f'height="{height:.0f}" aria-label="{name}"><title>{name}</title>'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" '
        'markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        f'fill="#555"/></marker></defs>{"".join(canvas.parts)}</svg>'
    )


def _labels(diagram: Diagram) -> dict[tuple[str, str], list[str]]:
    """The label lines of each arrow: every transition between the two states, in order."""
    merged: dict[tuple[str, str], list[str]] = {}
    for t in diagram.transitions:
        count = diagram.counts.get(t)
        text = t.label + (f"  \u00d7{count}" if count is not None else "")
        trigger, slash, effect = text.partition(" / ")
        lines = merged.setdefault((t.source, t.target), [])
        lines += [f"{trigger} /", effect] if slash else [text]
    return merged


def _width(lines: list[str]) -> float:
    return max(len(line) for line in lines) * _LABEL_CHAR


def _layout(diagram: Diagram, labels: Mapping[tuple[str, str], list[str]]) -> dict[str, _Node]:
    """Nodes placed by layer: the longest path from the initial state, cycles set aside."""
    following: dict[str, list[str]] = {}
    for t in diagram.transitions:
        following.setdefault(t.source, []).append(t.target)
    back: set[tuple[str, str]] = set()
    marks: dict[str, int] = {}  # 1: on the DFS stack, 2: done

    def visit(name: str) -> None:
        marks[name] = 1
        for target in following.get(name, []):
            if marks.get(target) == 1:
                back.add((name, target))
            elif target not in marks:
                visit(target)
        marks[name] = 2

    for name in (diagram.initial, *diagram.states):
        if name not in marks:
            visit(name)
    layer = dict.fromkeys(diagram.states, 0)
    for _ in diagram.states:  # longest path: relax as often as there are states
        changed = False
        for t in diagram.transitions:
            forward = t.source != t.target and (t.source, t.target) not in back
            if forward and layer[t.target] < layer[t.source] + 1:
                layer[t.target] = layer[t.source] + 1
                changed = True
        if not changed:
            break
    nodes = {
        name: _Node(name, layer[name], max(96.0, len(name) * _CHAR + 28)) for name in diagram.states
    }
    gaps: dict[int, float] = {}
    for (source, target), lines in labels.items():
        if source == target:
            nodes[source].loop = _LOOP + 4 + _width(lines)
        elif layer[target] == layer[source] + 1:
            need = _LINE * len(lines) + 40
            gaps[layer[source]] = max(gaps.get(layer[source], _LAYER_GAP), need)
    y = 0.0
    for depth in range(max(layer.values(), default=0) + 1):
        row = [n for n in nodes.values() if n.layer == depth]
        total = sum(n.width + n.loop for n in row) + _NODE_GAP * (len(row) - 1)
        x = -total / 2
        for node in row:
            node.x, node.y = x + node.width / 2, y
            x += node.width + node.loop + _NODE_GAP
        y += _NODE_H + gaps.get(depth, _LAYER_GAP)
    return nodes


def _straight(
    canvas: _Canvas, source: _Node, target: _Node, lines: list[str], *, left: bool
) -> None:
    """An arrow to the next layer, labelled on its ``left`` or right."""
    x1, y1, x2, y2 = source.x, source.y + _NODE_H, target.x, target.y
    _path(canvas, f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}")
    mid_x, mid_y = (x1 + x2) / 2, (y1 + y2) / 2 - _LINE * len(lines) / 2 + 9
    if left:
        _text(canvas, mid_x - 8, mid_y, lines, "end")
    else:
        _text(canvas, mid_x + 8, mid_y, lines, "start")


def _loop(canvas: _Canvas, node: _Node, lines: list[str]) -> None:
    x, y = node.right, node.y + _NODE_H / 2
    _path(
        canvas,
        f"M{x:.1f},{y - 8:.1f} C{x + _LOOP:.1f},{y - 30:.1f} "
        f"{x + _LOOP:.1f},{y + 30:.1f} {x:.1f},{y + 8:.1f}",
    )
    _text(canvas, x + _LOOP - 4, y - _LINE * len(lines) / 2 + 9, lines, "start")


def _around_left(canvas: _Canvas, source: _Node, target: _Node, lines: list[str]) -> None:
    """Down past layers between, left of everything drawn so far, label on its left."""
    side = canvas.min_x - 20
    x1, y1 = source.x - source.width / 4, source.y + _NODE_H
    x2, y2 = target.x - target.width / 4, target.y
    _path(
        canvas,
        f"M{x1:.1f},{y1:.1f} Q{side:.1f},{y1:.1f} {side:.1f},{y1 + 30:.1f} "
        f"L{side:.1f},{y2 - 30:.1f} Q{side:.1f},{y2:.1f} {x2:.1f},{y2:.1f}",
    )
    canvas.cover(side, y1)
    _text(canvas, side - 6, (y1 + y2) / 2 - _LINE * len(lines) / 2 + 9, lines, "end")


def _around_right(canvas: _Canvas, source: _Node, target: _Node, lines: list[str]) -> None:
    """Back up (or across a layer), right of everything drawn so far, label on its right."""
    side = canvas.max_x + 20
    x1, y1 = source.right, source.y + _NODE_H / 2
    x2, y2 = target.right, target.y + _NODE_H / 2
    turn = 14 if y2 > y1 else -14
    _path(
        canvas,
        f"M{x1:.1f},{y1:.1f} L{side - 14:.1f},{y1:.1f} Q{side:.1f},{y1:.1f} {side:.1f},"
        f"{y1 + turn:.1f} L{side:.1f},{y2 - turn:.1f} Q{side:.1f},{y2:.1f} {side - 14:.1f},"
        f"{y2:.1f} L{x2:.1f},{y2:.1f}",
    )
    canvas.cover(side, y1)
    _text(canvas, side + 6, (y1 + y2) / 2 - _LINE * len(lines) / 2 + 9, lines, "start")


def _path(canvas: _Canvas, d: str) -> None:
    canvas.parts.append(
        f'<path class="edge" d="{d}" fill="none" stroke="#555" marker-end="url(#arrow)"/>'
    )


def _text(canvas: _Canvas, x: float, y: float, lines: list[str], anchor: str) -> None:
    width = _width(lines)
    left = x - width if anchor == "end" else x
    canvas.cover(left, y - 12)
    canvas.cover(left + width, y + _LINE * len(lines))
    spans = "".join(
        f'<tspan x="{x:.1f}" dy="{0 if i == 0 else _LINE}">{_e(line)}</tspan>'
        for i, line in enumerate(lines)
    )
    canvas.parts.append(
        f'<text class="label" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{spans}</text>'
    )


def _node(canvas: _Canvas, node: _Node, cls: str | None, terminal: bool) -> None:
    classes = " ".join(c for c in ("state", cls, "terminal" if terminal else None) if c)
    canvas.parts.append(
        f'<g class="{_e(classes)}" data-state="{_e(node.name)}">'
        f'<rect x="{node.left:.1f}" y="{node.y:.1f}" width="{node.width:.1f}" '
        f'height="{_NODE_H}" rx="10" ry="10"/>'
        f'<text x="{node.x:.1f}" y="{node.y + _NODE_H / 2 + 4.5:.1f}" text-anchor="middle">'
        f"{_e(node.name)}</text></g>"
    )


def _start(canvas: _Canvas, node: _Node) -> None:
    x, y = node.x, node.y - 34
    canvas.cover(x - 8, y - 8)
    canvas.parts.append(f'<circle class="start" cx="{x:.1f}" cy="{y:.1f}" r="7"/>')
    _path(canvas, f"M{x:.1f},{y + 7:.1f} L{x:.1f},{node.y:.1f}")


def _end(canvas: _Canvas, node: _Node, status: str) -> None:
    """The end marker beside a terminal state (below it when a loop is on its right),
    labelled with every way instances end there (``completed / failed``)."""
    if node.loop:
        x, y = node.x + node.width / 4, node.y + _NODE_H + 30
        _path(canvas, f"M{x:.1f},{node.y + _NODE_H:.1f} L{x:.1f},{y - 9:.1f}")
    else:
        x, y = node.right + 34, node.y + _NODE_H / 2
        _path(canvas, f"M{node.right:.1f},{y:.1f} L{x - 9:.1f},{y:.1f}")
    canvas.cover(x + 12 + len(status) * _LABEL_CHAR, y + 10)
    canvas.parts.append(
        f'<circle class="end" cx="{x:.1f}" cy="{y:.1f}" r="8"/>'
        f'<circle class="end-dot" cx="{x:.1f}" cy="{y:.1f}" r="4"/>'
        f'<text class="label" x="{x + 12:.1f}" y="{y + 4:.1f}">{_e(status)}</text>'
    )


def _e(text: str) -> str:
    return html.escape(text, quote=True)
