"""A state diagram drawn as SVG on the server: a small layered layout, no JavaScript.

Mermaid's renderer is JavaScript (about 3 MB minified) and could not be fetched from a CDN
here; drawing the few states of a workflow needs much less. States are placed in layers by the
longest path from the initial state (edges that close a cycle are set aside first), each
layer centred on one axis. A transition to the next layer is a straight arrow; one that skips
layers bends to the left, one that goes back up (or stays in its layer) bends to the right; a
transition to the same state is a loop. Transitions between the same two states share one
arrow whose label lists each of them. States carry their path class (``past``, ``current``,
``future``, ``error``) as a CSS class, styled by the console's stylesheet.

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
_NODE_H = 34
_LAYER_GAP = 96
_NODE_GAP = 48
_PAD = 24


@attrs.define
class _Node:
    name: str
    layer: int
    width: float
    x: float = 0.0  # centre
    y: float = 0.0  # top


def render(diagram: Diagram, classes: Mapping[str, str] | None = None, *, title: str = "") -> str:
    """The diagram as an ``<svg>`` element, states classed by ``classes`` (see module doc)."""
    classes = classes or {}
    nodes = _layout(diagram)
    labels = _labels(diagram)
    parts: list[str] = []
    bounds = _Bounds()
    for node in nodes.values():
        bounds.add(node.x - node.width / 2, node.y)
        bounds.add(node.x + node.width / 2, node.y + _NODE_H)
    start = nodes[diagram.initial]
    parts.append(_start(start, bounds))
    for (source, target), lines in labels.items():
        parts.append(_edge(nodes[source], nodes[target], lines, nodes, bounds))
    for name in diagram.states:
        node = nodes[name]
        parts.append(_node(node, classes.get(name), name in diagram.terminals))
        if name in diagram.terminals:
            parts.append(_end(node, diagram.terminals[name], bounds))
    x0, y0 = bounds.min_x - _PAD, bounds.min_y - _PAD
    width, height = bounds.max_x - x0 + _PAD, bounds.max_y - y0 + _PAD
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="diagram" role="img" '
        f'viewBox="{x0:.0f} {y0:.0f} {width:.0f} {height:.0f}" width="{width:.0f}" '
        f'height="{height:.0f}" aria-label="{_e(title or diagram.workflow)}">'
    )
    defs = (
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" '
        'markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#555"/></marker></defs>'
    )
    return (
        head + f"<title>{_e(title or diagram.workflow)}</title>" + defs + "".join(parts) + "</svg>"
    )


@attrs.define
class _Bounds:
    min_x: float = 0.0
    min_y: float = 0.0
    max_x: float = 0.0
    max_y: float = 0.0

    def add(self, x: float, y: float) -> None:
        self.min_x, self.max_x = min(self.min_x, x), max(self.max_x, x)
        self.min_y, self.max_y = min(self.min_y, y), max(self.max_y, y)


def _layout(diagram: Diagram) -> dict[str, _Node]:
    """Nodes placed by layer: the longest path from the initial state, cycles set aside."""
    following: dict[str, list[str]] = {}
    for t in diagram.transitions:
        following.setdefault(t.source, []).append(t.target)
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}  # 1: on the DFS stack, 2: done

    def visit(name: str) -> None:
        state[name] = 1
        for target in following.get(name, []):
            if state.get(target) == 1:
                back.add((name, target))
            elif target not in state:
                visit(target)
        state[name] = 2

    for name in (diagram.initial, *diagram.states):
        if name not in state:
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
    for depth in sorted(set(layer.values())):
        row = [n for n in nodes.values() if n.layer == depth]
        total = sum(n.width for n in row) + _NODE_GAP * (len(row) - 1)
        x = -total / 2
        for node in row:
            node.x, node.y = x + node.width / 2, depth * (_NODE_H + _LAYER_GAP)
            x += node.width + _NODE_GAP
    return nodes


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


def _edge(
    source: _Node,
    target: _Node,
    lines: list[str],
    nodes: Mapping[str, _Node],
    bounds: _Bounds,
) -> str:
    if source is target:
        x, y = source.x + source.width / 2, source.y + _NODE_H / 2
        d = (
            f"M{x:.1f},{y - 8:.1f} C{x + 46:.1f},{y - 30:.1f} "
            f"{x + 46:.1f},{y + 30:.1f} {x:.1f},{y + 8:.1f}"
        )
        return _path(d) + _text(x + 42, y - 4 * len(lines), lines, "start", bounds)
    span = target.layer - source.layer
    if span == 1:
        x1, y1 = source.x, source.y + _NODE_H
        x2, y2 = target.x, target.y
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        return _path(f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}") + _text(
            mx + 8, my - 6 * len(lines) + 8, lines, "start", bounds
        )
    if span > 1:  # around the layers between, on the left
        between = [n for n in nodes.values() if source.layer < n.layer < target.layer]
        side = min([n.x - n.width / 2 for n in between] + [source.x, target.x]) - 40
        x1, y1 = source.x - source.width / 4, source.y + _NODE_H
        x2, y2 = target.x - target.width / 4, target.y
        d = (
            f"M{x1:.1f},{y1:.1f} C{side:.1f},{y1 + 40:.1f} "
            f"{side:.1f},{y2 - 40:.1f} {x2:.1f},{y2:.1f}"
        )
        mid_y = (y1 + y2) / 2
        return _path(d) + _text(side * 0.75 + x1 * 0.25 - 6, mid_y, lines, "end", bounds)
    # Back up, or within one layer: around on the right.
    x1, y1 = source.x + source.width / 2, source.y + _NODE_H / 2
    x2, y2 = target.x + target.width / 2, target.y + _NODE_H / 2
    side = max(x1, x2) + 60
    d = f"M{x1:.1f},{y1:.1f} C{side:.1f},{y1:.1f} {side:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
    return _path(d) + _text(side - 10, (y1 + y2) / 2, lines, "start", bounds)


def _path(d: str) -> str:
    return f'<path class="edge" d="{d}" fill="none" stroke="#555" marker-end="url(#arrow)"/>'


def _text(x: float, y: float, lines: list[str], anchor: str, bounds: _Bounds) -> str:
    width = max(len(line) for line in lines) * _LABEL_CHAR
    left = x - width if anchor == "end" else x
    bounds.add(left, y - 12)
    bounds.add(left + width, y + 13 * len(lines))
    spans = "".join(
        f'<tspan x="{x:.1f}" dy="{0 if i == 0 else 13}">{_e(line)}</tspan>'
        for i, line in enumerate(lines)
    )
    return f'<text class="label" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{spans}</text>'


def _node(node: _Node, cls: str | None, terminal: bool) -> str:
    classes = " ".join(c for c in ("state", cls, "terminal" if terminal else None) if c)
    left = node.x - node.width / 2
    return (
        f'<g class="{_e(classes)}" data-state="{_e(node.name)}">'
        f'<rect x="{left:.1f}" y="{node.y:.1f}" width="{node.width:.1f}" height="{_NODE_H}" '
        f'rx="10" ry="10"/>'
        f'<text x="{node.x:.1f}" y="{node.y + _NODE_H / 2 + 4.5:.1f}" text-anchor="middle">'
        f"{_e(node.name)}</text></g>"
    )


def _start(node: _Node, bounds: _Bounds) -> str:
    x, y = node.x, node.y - 34
    bounds.add(x - 8, y - 8)
    return f'<circle class="start" cx="{x:.1f}" cy="{y:.1f}" r="7"/>' + _path(
        f"M{x:.1f},{y + 7:.1f} L{x:.1f},{node.y:.1f}"
    )


def _end(node: _Node, status: str, bounds: _Bounds) -> str:
    x, y = node.x + node.width / 2 + 34, node.y + _NODE_H / 2
    bounds.add(x + 10 + len(status) * _LABEL_CHAR, y + 10)
    return (
        _path(f"M{node.x + node.width / 2:.1f},{y:.1f} L{x - 9:.1f},{y:.1f}")
        + f'<circle class="end" cx="{x:.1f}" cy="{y:.1f}" r="8"/>'
        + f'<circle class="end-dot" cx="{x:.1f}" cy="{y:.1f}" r="4"/>'
        + f'<text class="label" x="{x + 12:.1f}" y="{y + 4:.1f}">{_e(status)}</text>'
    )


def _e(text: str) -> str:
    return html.escape(text, quote=True)
