"""The console's HTML pages, rendered on the server from the store's data.

Every value that comes from the store (payloads, metadata, stream names, reasons) goes through
:func:`esc` before it reaches the page, so a payload holding ``<script>`` shows as text. The
pages hold no script and no inline style: the Content-Security-Policy forbids both.
"""

from __future__ import annotations

import html
import json
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

import attrs

from decider import Lifecycle
from decider.diagram import Diagram, to_mermaid
from decider.processors.app.definition import App
from decider.processors.console import svg
from decider.processors.console.data import (
    LAG_CAP,
    InstanceDiagram,
    InstancePage,
    ProcessorRow,
    SkippedInput,
)
from decider.processors.operate.queries import InstanceView, ParkedCommand

NAV = (
    ("/instances", "Instances"),
    ("/workflows", "Workflows"),
    ("/parked", "Parked commands"),
    ("/skipped", "Skipped inputs"),
    ("/processors", "Processors"),
)


def esc(value: object) -> str:
    """``value`` as HTML text: ``<``, ``>``, ``&`` and quotes escaped."""
    return html.escape(str(value), quote=True)


def href(path: str, **query: object) -> str:
    """A link to ``path`` with ``query`` (``None`` values left out), escaped for an attribute."""
    params = {k: str(v) for k, v in query.items() if v is not None and v != ""}
    return esc(path + ("?" + urllib.parse.urlencode(params) if params else ""))


@attrs.frozen
class Chrome:
    """What every page shows around its content: the app and whether actions are allowed."""

    app: App
    actions: bool


def layout(chrome: Chrome, title: str, body: str, active: str = "") -> str:
    """A whole page: head, navigation, ``body``."""
    links = "".join(
        f'<a href="{path}"{_ACTIVE if path == active else ""}>{esc(text)}</a>' for path, text in NAV
    )
    mode = (
        '<span class="mode actions">actions allowed</span>'
        if chrome.actions
        else '<span class="mode">read-only</span>'
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · decider console</title>"
        '<link rel="stylesheet" href="/static/console.css"></head><body>'
        f'<header><a class="brand" href="/">decider console</a>'
        f'<span class="app">app <b>{esc(chrome.app.name)}</b></span>'
        f"<nav>{links}</nav>{mode}</header>"
        f"<main><h1>{esc(title)}</h1>{body}</main></body></html>"
    )


def message_page(chrome: Chrome, title: str, text: str, back: str, css: str = "notice") -> str:
    """A page that says one thing (an error, an action's outcome) with a way back."""
    body = f'<p class="{css}">{esc(text)}</p><p><a href="{esc(back)}">Back</a></p>'
    return layout(chrome, title, body)


# -- instances ---------------------------------------------------------------------------


def instances_page(
    chrome: Chrome,
    page: InstancePage,
    workflow: str | None,
    status_value: str | None,
    stuck: bool,
) -> str:
    """The instance list with its filters and paging."""
    workflows = _options(sorted(chrome.app.workflows), workflow, "all workflows")
    statuses = _options([s.value for s in Lifecycle], status_value, "any status")
    form = (
        '<form class="filters" method="get" action="/instances">'
        f'<label>Workflow <select name="workflow">{workflows}</select></label>'
        f'<label>Status <select name="status">{statuses}</select></label>'
        f'<label><input type="checkbox" name="stuck" value="1"{" checked" if stuck else ""}>'
        " stuck only</label>"
        '<button type="submit">Filter</button></form>'
    )
    if not page.rows:
        return form + '<p class="empty">No instance matches.</p>'
    rows = "".join(
        "<tr>"
        f'<td><a href="{href("/instance", stream=row.stream)}">{esc(row.stream)}</a></td>'
        f"<td>{esc(row.workflow)}</td><td>{_status(row.status.value)}"
        f"{_STUCK if row.stuck else ''}</td>"
        f'<td class="num">{row.events}</td><td class="num">{row.parked or ""}</td>'
        f"<td>{_time(row.started_at)}</td><td>{_time(row.last_at)}</td></tr>"
        for row in page.rows
    )
    table = (
        '<table class="instances"><thead><tr><th>Instance stream</th><th>Workflow</th>'
        "<th>Status</th><th>Events</th><th>Parked</th><th>Started</th><th>Last event</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>"
    )
    query = {"workflow": workflow, "status": status_value, "stuck": "1" if stuck else None}
    end = page.offset + len(page.rows)
    pager = [f"<span>{page.offset + 1} to {end} of {page.total}</span>"]
    if page.offset > 0:
        back = max(0, page.offset - page.limit)
        pager.insert(0, f'<a href="{href("/instances", **query, offset=back)}">← newer</a>')
    if end < page.total:
        pager.append(f'<a href="{href("/instances", **query, offset=end)}">older →</a>')
    return form + table + f'<p class="pager">{" ".join(pager)}</p>'


def instance_page(
    chrome: Chrome,
    view: InstanceView,
    drawn: InstanceDiagram,
    parked: Sequence[ParkedCommand],
    payloads: Sequence[tuple[str, str]],
) -> str:
    """One instance: summary and state, its diagram with its path, parked commands, timeline.

    ``payloads`` holds each event's JSON payload and metadata JSON, in history order.
    """
    summary = (
        '<dl class="summary">'
        f"<dt>Workflow</dt><dd>{_link_workflow(view.workflow)}</dd>"
        f"<dt>Status</dt><dd>{_status(view.status.value)}</dd>"
        f"<dt>Events</dt><dd>{len(view.history)}</dd>"
        f'<dt>State</dt><dd><code class="state">{esc(repr(view.state))}</code></dd></dl>'
    )
    legend = (
        '<p class="legend"><span class="key past">past</span><span class="key current">current'
        '</span><span class="key error">error</span><span class="key future">future</span></p>'
    )
    diagram = (
        '<section class="diagram-box"><h2>Path on the definition</h2>'
        f"{legend}{svg.render(drawn.diagram, drawn.classes, title=view.stream)}</section>"
    )
    parked_html = (
        f"<section><h2>Parked commands</h2>{parked_table(chrome, parked)}</section>"
        if parked
        else ""
    )
    items = []
    for entry, (payload, metadata) in zip(view.history, payloads, strict=True):
        items.append(
            '<li class="event">'
            f'<div class="event-head"><span class="rev">#{entry.revision}</span>'
            f'<span class="type">{esc(entry.type)}</span>'
            f'<span class="meta">position {entry.position} · {_time(entry.recorded_at)}</span>'
            "</div>"
            f'<pre class="payload">{esc(payload)}</pre>'
            f'<pre class="metadata">{esc(metadata)}</pre></li>'
        )
    timeline = f'<section><h2>Timeline</h2><ol class="timeline">{"".join(items)}</ol></section>'
    return layout(chrome, view.stream, summary + diagram + parked_html + timeline)


def pretty(data: bytes) -> str:
    """Stored JSON bytes, indented; shown as they are if they are not JSON."""
    try:
        return json.dumps(json.loads(data), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        return data.decode("utf-8", "replace")


# -- workflows ---------------------------------------------------------------------------


def workflows_page(chrome: Chrome) -> str:
    """The app's workflows, each with its registered input types."""
    items = "".join(
        f"<li>{_link_workflow(name)}: inputs "
        f"{', '.join(f'<code>{esc(t)}</code>' for t in registration.inputs)}</li>"
        for name, registration in sorted(chrome.app.workflows.items())
    )
    return layout(chrome, "Workflows", f'<ul class="workflows">{items}</ul>', "/workflows")


def workflow_page(chrome: Chrome, name: str, definition: Diagram, seen: Diagram) -> str:
    """A workflow's definition diagram and the diagram its instances actually took."""
    body = (
        '<section class="diagram-box"><h2>Definition</h2>'
        "<p>Explored from <code>decide</code> and <code>evolve</code> with generated inputs.</p>"
        f"{svg.render(definition, title=f'{name} definition')}"
        f"<details><summary>Mermaid</summary><pre>{esc(to_mermaid(definition))}</pre></details>"
        "</section>"
        '<section class="diagram-box"><h2>Observed</h2>'
        "<p>The transitions the stored instances took, with how many times.</p>"
    )
    if seen.transitions:
        body += (
            f"{svg.render(seen, title=f'{name} observed')}"
            f"<details><summary>Mermaid</summary><pre>{esc(to_mermaid(seen))}</pre></details>"
        )
    else:
        body += '<p class="empty">No instance yet.</p>'
    body += (
        f'<p><a href="{href("/instances", workflow=name)}">Instances of {esc(name)}</a></p>'
        "</section>"
    )
    return layout(chrome, name, body, "/workflows")


# -- parked, skipped, processors ---------------------------------------------------------


def parked_table(chrome: Chrome, parked: Sequence[ParkedCommand]) -> str:
    """Parked commands as a table, with a retry button each when actions are allowed."""
    if not parked:
        return '<p class="empty">No parked command.</p>'
    rows = "".join(
        f"<tr><td><code>{esc(c.command_id)}</code></td><td>{esc(c.command_type)}</td>"
        f'<td><a href="{href("/instance", stream=c.stream)}">{esc(c.stream)}</a>@{c.revision}'
        f'</td><td class="num">{c.attempts}</td><td>{_time(c.parked_at)}</td>'
        f'<td class="reason">{esc(c.reason)}</td>'
        f"<td>{_button(chrome, 'retry', c.command_id, 'Retry')}</td></tr>"
        for c in parked
    )
    return (
        '<table class="parked"><thead><tr><th>Command id</th><th>Type</th><th>Recorded at</th>'
        "<th>Attempts</th><th>Parked</th><th>Reason</th><th></th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def parked_page(chrome: Chrome, parked: Sequence[ParkedCommand]) -> str:
    """Every parked command of the app."""
    return layout(chrome, "Parked commands", parked_table(chrome, parked), "/parked")


def skipped_page(chrome: Chrome, skipped: Sequence[SkippedInput]) -> str:
    """Every input a processor skipped, with a re-drive button where it can be re-driven."""
    if not skipped:
        return layout(chrome, "Skipped inputs", '<p class="empty">Nothing was skipped.</p>')
    rows = "".join(
        f"<tr><td>{esc(s.processor)}</td><td>{esc(s.event_type)}</td>"
        f'<td>{esc(s.stream)}@{s.revision}</td><td class="num">{s.position}</td>'
        f'<td>{_time(s.skipped_at)}</td><td class="reason">{esc(s.reason)}</td>'
        f"<td>{_button(chrome, 'redrive', s.skip_id, 'Re-drive') if s.redrivable else ''}</td>"
        "</tr>"
        for s in skipped
    )
    table = (
        '<table class="skipped"><thead><tr><th>Processor</th><th>Input type</th><th>Stored at'
        "</th><th>Position</th><th>Skipped</th><th>Reason</th><th></th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )
    return layout(chrome, "Skipped inputs", table, "/skipped")


def processors_page(chrome: Chrome, rows: Sequence[ProcessorRow], now: datetime) -> str:
    """Each processor's checkpoint, pending events and how old the oldest of them is."""
    body = "".join(
        f'<tr><td>{esc(r.name)}</td><td class="num">{"" if r.checkpoint is None else r.checkpoint}'
        f'</td><td class="num">{r.pending}{"+" if r.capped else ""}</td>'
        f"<td>{_age(now, r.oldest_pending_at)}</td></tr>"
        for r in rows
    )
    table = (
        '<table class="processors"><thead><tr><th>Processor</th><th>Checkpoint (position)</th>'
        f"<th>Pending events (up to {LAG_CAP})</th><th>Lag (oldest pending)</th></tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )
    return layout(chrome, "Processors", table, "/processors")


# -- actions -----------------------------------------------------------------------------

ACTIONS: Mapping[str, str] = {
    "retry": "Carry the parked command {id} out again. If it fails again it is parked again.",
    "redrive": "Hand the skipped input of record {id} to its processor again, as "
    "'decider skipped redrive' does (an input is appended again to the stream it was in; a "
    "command is re-queued through the parked-command ledger).",
}
"""What each action does, as the confirmation page says it."""

_VERBS = {"retry": "Retry the command", "redrive": "Re-drive the input"}
_BACK = {"retry": "/parked", "redrive": "/skipped"}


def confirm_page(chrome: Chrome, action: str, target: str, needs_token: bool) -> str:
    """The confirmation an action needs: what it will do, and a button that does it."""
    token = (
        "<label>Action token (printed when the console started) "
        '<input type="password" name="token" autocomplete="off" required></label>'
        if needs_token
        else ""
    )
    body = (
        f'<p class="confirm-text">{esc(ACTIONS[action].format(id=target))}</p>'
        f'<form class="confirm" method="post" action="/actions/{esc(action)}">'
        f'<input type="hidden" name="id" value="{esc(target)}">{token}'
        f'<button type="submit" class="danger" id="confirm">{esc(_VERBS[action])}</button> '
        f'<a href="{_BACK[action]}">Cancel</a></form>'
    )
    return layout(chrome, "Confirm", body)


def _button(chrome: Chrome, action: str, target: str, text: str) -> str:
    if not chrome.actions:
        return ""
    return f'<a class="button" href="{href("/confirm", action=action, id=target)}">{esc(text)}</a>'


_ACTIVE = ' class="active"'
_STUCK = ' <span class="badge stuck">stuck</span>'


def _options(values: Iterable[str], chosen: str | None, anything: str) -> str:
    options = [f'<option value="">{esc(anything)}</option>']
    options += [
        f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(v)}</option>'
        for v in values
    ]
    return "".join(options)


def _status(value: str) -> str:
    return f'<span class="badge status-{esc(value)}">{esc(value)}</span>'


def _link_workflow(name: str) -> str:
    return f'<a href="{href("/workflow", name=name)}">{esc(name)}</a>'


def _time(at: datetime | None) -> str:
    if at is None:
        return ""
    at = at.astimezone(UTC)
    return f'<time datetime="{esc(at.isoformat())}">{esc(at.strftime("%Y-%m-%d %H:%M:%S"))}</time>'


def _age(now: datetime, at: datetime | None) -> str:
    if at is None:
        return "none pending"
    seconds = max(0.0, (now - at).total_seconds())
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"
