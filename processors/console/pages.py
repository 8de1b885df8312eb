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

from decider import Ignored, InitiatedBy, Lifecycle, Received
from decider.codec import Kind
from decider.diagram import Diagram, to_mermaid
from decider.processors.app.definition import AppDefinition
from decider.processors.client.forking import ForkPlan, PlannedEvent
from decider.processors.commands.parking import ParkedCommand
from decider.processors.console import svg
from decider.processors.console.data import (
    LAG_CAP,
    InstanceDiagram,
    InstancePage,
    PartitionsView,
    ProcessorRow,
    SkippedInput,
)
from decider.processors.operate.progress import Progress
from decider.processors.operate.queries import InstanceView

NAV = (
    ("/instances", "Instances"),
    ("/workflows", "Workflows"),
    ("/parked", "Parked commands"),
    ("/skipped", "Skipped inputs"),
    ("/processors", "Processors"),
    ("/partitions", "Partitions"),
)

REFRESH_CHOICES = (0, 5, 10, 30, 60)
"""The page refresh intervals offered, in seconds (0: never)."""


def esc(value: object) -> str:
    """``value`` as HTML text: ``<``, ``>``, ``&`` and quotes escaped."""
    return html.escape(str(value), quote=True)


def href(path: str, **query: object) -> str:
    """A link to ``path`` with ``query`` (``None`` values left out), escaped for an attribute."""
    params = {k: str(v) for k, v in query.items() if v is not None and v != ""}
    return esc(path + ("?" + urllib.parse.urlencode(params) if params else ""))


@attrs.frozen
class Chrome:
    """What every page shows around its content: the app, whether actions are allowed, and
    for the page being served its path and query, and how often it refreshes itself
    (``refresh`` seconds, 0: never; by ``<meta http-equiv="refresh">``, no script)."""

    app: AppDefinition
    actions: bool
    path: str = "/instances"
    query: Mapping[str, str] = attrs.field(factory=dict)
    refresh: int = 0


def layout(chrome: Chrome, title: str, body: str, active: str = "") -> str:
    """A whole page: head, navigation, ``body``."""
    again = chrome.refresh or None
    links = "".join(
        f'<a href="{href(path, refresh=again)}"{_ACTIVE if path == active else ""}>{esc(text)}</a>'
        for path, text in NAV
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
        f"{_refresh_meta(chrome)}"
        '<link rel="stylesheet" href="/static/console.css"></head><body>'
        f'<header><a class="brand" href="/">decider console</a>'
        f'<span class="app">app <b>{esc(chrome.app.name)}</b></span>'
        f"<nav>{links}</nav>{_refresh_form(chrome)}{mode}</header>"
        f"<main><h1>{esc(title)}</h1>{body}</main></body></html>"
    )


def _refresh_meta(chrome: Chrome) -> str:
    if not chrome.refresh:
        return ""
    return f'<meta http-equiv="refresh" content="{chrome.refresh}">'


def _refresh_form(chrome: Chrome) -> str:
    """A form that shows the page again with another refresh interval (its query kept)."""
    kept = "".join(
        f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">'
        for k, v in chrome.query.items()
        if k not in ("refresh", "token")
    )
    choices = "".join(
        f'<option value="{n}"{" selected" if n == chrome.refresh else ""}>'
        f"{'off' if n == 0 else f'every {n} s'}</option>"
        for n in REFRESH_CHOICES
    )
    return (
        f'<form class="refresh" method="get" action="{esc(chrome.path)}">{kept}'
        f'<label>Refresh <select name="refresh">{choices}</select></label>'
        '<button type="submit">Set</button></form>'
    )


def message_page(
    chrome: Chrome, title: str, text: str, back: str, css: str = "notice", *, label: str = "Back"
) -> str:
    """A page that says one thing (an error, an action's outcome) with a way on: back, or
    where ``label`` says ``back`` leads."""
    body = f'<p class="{css}">{esc(text)}</p><p><a href="{esc(back)}">{esc(label)}</a></p>'
    return layout(chrome, title, body)


# -- instances ---------------------------------------------------------------------------


def instances_page(
    chrome: Chrome,
    page: InstancePage,
    workflow: str | None,
    status_value: str | None,
    stuck: bool,
    *,
    search: str | None = None,
) -> str:
    """The instance list with its filters, search (instance id or business key) and paging."""
    workflows = _options(sorted(chrome.app.workflows), workflow, "all workflows")
    statuses = _options([s.value for s in Lifecycle], status_value, "any status")
    form = (
        '<form class="filters" method="get" action="/instances">'
        '<label>Instance id or key <input type="search" name="q" '
        f'value="{esc(search or "")}" placeholder="e.g. PR-1"></label>'
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
    query = {
        "q": search,
        "workflow": workflow,
        "status": status_value,
        "stuck": "1" if stuck else None,
        "refresh": chrome.refresh or None,
    }
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
    *,
    end_reason: str | None = None,
    fork_at: int | None = None,
) -> str:
    """One instance: how it ended (failed or cancelled: the reason, first; forked: the new
    generation, linked), summary and state,
    its diagram with its path, parked commands, and its timeline (one line per event, its
    payload and metadata opened on demand; with actions allowed, a fork button on each input).

    ``payloads`` holds each event's JSON payload and metadata JSON, in history order;
    ``fork_at`` the revision of the input where the current code first decides otherwise
    (replay-check's first difference), said and marked on the timeline.
    """
    ended = ""
    if view.status in (Lifecycle.FAILED, Lifecycle.CANCELLED):
        verb = Kind.FAILED if view.status is Lifecycle.FAILED else Kind.CANCELLED
        because = f": {esc(end_reason)}" if end_reason else ""
        ended = f'<p class="ended {esc(view.status.value)}"><b>{verb}</b>{because}</p>'
    elif parked:
        ended = (
            f'<p class="ended failed"><b>Waiting on {len(parked)} parked command'
            f"{'s' if len(parked) > 1 else ''}</b>: it goes on once retried.</p>"
        )
    if view.forked_to is not None:
        target = f'<a href="{href("/instance", stream=view.forked_to)}">{esc(view.forked_to)}</a>'
        ended = (
            f'<p class="ended forked"><b>Forked</b> to {target}: its inputs go there now.</p>'
            + ended
        )
    cancel = (
        f"<p>{_button(chrome, 'cancel', view.stream, 'Cancel this instance')}</p>"
        if view.status is Lifecycle.RUNNING
        else ""
    )
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
    can_fork = forkable(chrome, view)
    items = []
    for entry, (payload, metadata) in zip(view.history, payloads, strict=True):
        fork = (
            _fork_button(view.stream, entry.revision, entry.revision == fork_at)
            if can_fork and isinstance(entry.event, _INPUTS)
            else ""
        )
        items.append(
            '<li class="event"><details><summary>'
            f'<span class="rev">#{entry.revision}</span>'
            f'<span class="type">{esc(entry.type)}</span>'
            f'<span class="meta">position {entry.position} · {_time(entry.recorded_at)}</span>'
            f"{fork}</summary>"
            f'<pre class="payload">{esc(payload)}</pre>'
            f'<pre class="metadata">{esc(metadata)}</pre></details></li>'
        )
    fork_hint = (
        " <b>Fork from here</b> on an input previews, then begins, a new generation that "
        "decides the inputs up to it again with the current code."
        if can_fork
        else ""
    )
    if can_fork and fork_at is not None:
        fork_hint += (
            f" The current code first decides otherwise at input #{fork_at} (what "
            "<code>decider replay-check</code> finds): fork from there to repair it."
        )
    timeline = (
        '<section><h2>Timeline</h2><p class="hint">One line per event; open one for its '
        f'payload and metadata.{fork_hint}</p><ol class="timeline">{"".join(items)}</ol></section>'
    )
    body = ended + cancel + summary + diagram + parked_html + timeline
    return layout(chrome, view.stream, body)


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
        f"{_fails_on_error(chrome, name)}"
        f"{svg.render(definition, title=f'{name} definition')}"
        f"<details><summary>Mermaid</summary><pre>{esc(to_mermaid(definition))}</pre></details>"
        f"{_gaps(definition)}</section>"
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


def _fails_on_error(chrome: Chrome, name: str) -> str:
    """A note for a workflow whose instances fail when ``decide`` raises: those ends are real
    but not drawn (exploring drops an input ``decide`` raises on)."""
    if chrome.app.workflows[name].workflow.on_error != "fail":
        return ""
    return (
        '<p class="note">This workflow fails an instance when <code>decide</code> raises '
        '(<code>on_error="fail"</code>): any state can end <b>failed</b> that way; those ends '
        "are not drawn.</p>"
    )


def _gaps(definition: Diagram) -> str:
    """What exploring could not do, said under the definition diagram."""
    if not definition.gaps and not definition.exhausted:
        return ""
    items = "".join(f"<li>{esc(str(gap))}</li>" for gap in definition.gaps)
    budget = (
        '<p class="notice">Exploring stopped when its budget ran out: states may be missing.</p>'
        if definition.exhausted
        else ""
    )
    return (
        f'<details class="gaps"><summary>Not explored ({len(definition.gaps)})</summary>'
        "<p>Input types no drawn value of which a state accepted, with what the last one "
        f"raised (an input a state does not expect shows here too).</p>{budget}"
        f"<ul>{items}</ul></details>"
    )


# -- parked, skipped, processors ---------------------------------------------------------


def parked_table(chrome: Chrome, parked: Sequence[ParkedCommand]) -> str:
    """Parked commands as a table, with a retry button each when actions are allowed."""
    if not parked:
        return '<p class="empty">No parked command.</p>'
    rows = "".join(
        f"<tr><td><code>{esc(c.command_id)}</code></td><td>{esc(c.command_type)}</td>"
        f'<td><a href="{href("/instance", stream=c.stream)}">{esc(c.stream)}</a>@{c.revision}'
        f'</td><td class="num">{c.attempts}</td><td>{_time(c.parked_at)}</td>'
        f'<td class="reason">{esc(c.reason)}{_traceback(c.traceback)}</td>'
        f"<td>{_button(chrome, 'retry', c.command_id, 'Retry')}</td></tr>"
        for c in parked
    )
    return (
        '<table class="parked"><thead><tr><th>Command id</th><th>Type</th><th>Recorded at</th>'
        "<th>Attempts</th><th>Parked</th><th>Reason</th><th></th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _traceback(traceback: str | None) -> str:
    """A kept traceback, folded under the reason it explains."""
    if not traceback:
        return ""
    shown = f'<pre class="traceback">{esc(traceback)}</pre>'
    return f"<details><summary>Traceback</summary>{shown}</details>"


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
        f"<td>{_time(s.skipped_at)}</td>"
        f'<td class="reason">{esc(s.reason)}{_traceback(s.traceback)}</td>'
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
    """Each processor's checkpoint, the inputs it has to do, the timers waiting, and its lag."""
    body = "".join(
        f"<tr><td>{esc(r.name)}</td><td>{_checkpoint(r)}</td>"
        f'<td class="num">{_pending(r)}</td>'
        f'<td class="num">{r.waiting if r.name.endswith(".timers") else ""}</td>'
        f"<td>{_lag(now, r)}</td></tr>"
        for r in rows
    )
    table = (
        '<table class="processors"><thead><tr><th>Processor</th><th>Checkpoint (position)</th>'
        f"<th>Pending inputs (up to {LAG_CAP})</th><th>Timers not due</th>"
        "<th>Lag (oldest pending)</th></tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )
    note = (
        '<p class="note">Pending: the inputs a processor has yet to do, each partition\'s '
        "counted after its own checkpoint. A timer is pending once due, unless it fired or its "
        "instance ended (then it is dropped); before that it waits. The command processor moves "
        "its checkpoint on in batches, so some of its commands may have concluded already: its "
        'figures are upper bounds ("at most"). Lag: how long the oldest pending input has '
        "waited (a timer: since it fell due), as the <code>decider.processor.lag</code> gauge "
        "measures it, read here from the stored checkpoints. "
        '<a href="/partitions">Partitions and processes</a></p>'
    )
    return layout(chrome, "Processors", table + note, "/processors")


def _checkpoint(row: ProcessorRow) -> str:
    shown = "none yet" if row.checkpoint is None else str(row.checkpoint)
    if row.partitions:
        return f'{esc(shown)} <span class="hint">(lowest of {row.partitions} partitions)</span>'
    return esc(shown)


def _pending(row: ProcessorRow) -> str:
    text = f"{row.pending}{'+' if row.capped else ''}"
    return text if row.exact or row.pending == 0 else f"at most {text}"


def _lag(now: datetime, row: ProcessorRow) -> str:
    if row.oldest_pending_at is None:
        return "none pending"
    age = _age(now, row.oldest_pending_at)
    return age if row.exact else f"at most {age}"


def partitions_page(chrome: Chrome, view: PartitionsView, now: datetime) -> str:
    """The processes of the app's group and every partition: owner, lease expiry, and each
    processor's checkpoint, pending inputs and lag there."""
    beat = (
        f"last at {_time(view.heartbeat_at)} ({_age(now, view.heartbeat_at)} ago)"
        if view.heartbeat_at is not None
        else "none (no service running, or it stopped gracefully)"
    )
    head = f'<p class="note">Service heartbeat (<code>decider run</code>): {beat}.</p>'
    if not view.partitioned:
        work = view.partitions[0].work if view.partitions else []
        text = (
            '<p class="empty">This app has not run partitioned on this store '
            "(<code>--partitions all</code>): one process does all the work, under each "
            "processor's own checkpoint.</p>"
        )
        return layout(chrome, "Partitions", head + text + _work_table(work, now), "/partitions")
    if view.processes:
        rows = "".join(
            f"<tr><td>{esc(p.owner)}</td><td>{_until(now, p.expires_at)}</td>"
            f'<td class="num">{len(p.held)}</td>'
            f"<td>{esc(', '.join(str(n) for n in p.held))}</td></tr>"
            for p in view.processes
        )
        processes = (
            '<table class="processes"><thead><tr><th>Process</th><th>Member lease '
            "(renewed by its heartbeat)</th><th>Partitions</th><th>Which</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
    else:
        processes = '<p class="empty">No process holds a member lease now.</p>'
    names = [w.processor for w in view.partitions[0].work] if view.partitions else []
    cells = "".join(f"<th>{esc(chrome_short(chrome, n))}</th>" for n in names)
    rows = "".join(
        f'<tr><td class="num">{part.number}</td><td>{esc(part.owner or "free")}</td>'
        f'<td class="num">{part.epoch}</td><td>{_until(now, part.expires_at)}</td>'
        + "".join(f"<td>{_cell(w, now)}</td>" for w in part.work)
        + "</tr>"
        for part in view.partitions
    )
    table = (
        '<table class="partitions"><thead><tr><th>Partition</th><th>Owner</th><th>Epoch</th>'
        f"<th>Lease</th>{cells}</tr></thead><tbody>{rows}</tbody></table>"
        '<p class="note">Each processor cell: checkpoint (position) · pending inputs of that '
        "partition · lag (the oldest pending input's age). See Processors for what counts as "
        "pending.</p>"
    )
    body = head + "<h2>Processes</h2>" + processes + "<h2>Partitions</h2>" + table
    return layout(chrome, "Partitions", body, "/partitions")


def chrome_short(chrome: Chrome, processor: str) -> str:
    """A processor's name without its app's prefix (``workflow.Order``, ``commands``)."""
    return processor.removeprefix(f"{chrome.app.name}.")


def _work_table(work: Sequence[Progress], now: datetime) -> str:
    rows = "".join(f"<tr><td>{esc(w.processor)}</td><td>{_cell(w, now)}</td></tr>" for w in work)
    return (
        '<table class="partitions"><thead><tr><th>Processor</th><th>Checkpoint · pending · lag'
        f"</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _cell(work: Progress, now: datetime) -> str:
    mark = "none" if work.checkpoint is None else str(work.checkpoint)
    pending = f"{work.pending}{'+' if work.capped else ''}"
    if not work.exact and work.pending:
        pending = f"at most {pending}"
    lag = "none pending" if work.oldest_pending_at is None else _age(now, work.oldest_pending_at)
    waiting = f" · {work.waiting} not due" if work.waiting else ""
    return f"@{esc(mark)} · {esc(pending)} · {esc(lag)}{esc(waiting)}"


def _until(now: datetime, at: datetime | None) -> str:
    if at is None:
        return ""
    state = "expired" if at <= now else "until"
    return f'<span class="lease-{state}">{state} {_time(at)}</span>'


# -- actions -----------------------------------------------------------------------------

ACTIONS: Mapping[str, str] = {
    "retry": "Carry the parked command {id} out again. If it fails again it is parked again.",
    "redrive": "Hand the skipped input of record {id} to its processor again, as "
    "'decider skipped redrive' does (an input is appended again to the stream it was in; a "
    "command is re-queued through the parked-command ledger).",
    "cancel": "Ask the instance {id} to cancel, as 'decider cancel' does: a cancel request is "
    "recorded; the workflow compensates and cancels, or is cancelled at once if it does not "
    "decide on cancel requests. It cannot be undone.",
    "fork": "Fork the instance {id}, as 'decider fork' does: a new generation decides the "
    "inputs {id} recorded up to revision {at} again with the current code, and records what "
    "this preview shows; {id} ends, and the instance's later inputs go to the new generation. "
    "It cannot be undone (a generation can be forked again).",
}
"""What each action does, as the confirmation page says it."""

_VERBS = {
    "retry": "Retry the command",
    "redrive": "Re-drive the input",
    "cancel": "Cancel the instance",
    "fork": "Fork the instance",
}
_BACK = {"retry": "/parked", "redrive": "/skipped", "cancel": "/instances"}
_INPUTS = (InitiatedBy, Received, Ignored)


def confirm_page(chrome: Chrome, action: str, target: str, needs_token: bool) -> str:
    """The confirmation an action needs: what it will do, and a button that does it."""
    token = (
        "<label>Action token (printed when the console started) "
        '<input type="password" name="token" autocomplete="off" required></label>'
        if needs_token
        else ""
    )
    reason = (
        '<label>Reason (given to the workflow) <input type="text" name="reason" '
        'maxlength="500" required></label>'
        if action == "cancel"
        else ""
    )
    back = href("/instance", stream=target) if action == "cancel" else _BACK[action]
    body = (
        f'<p class="confirm-text">{esc(ACTIONS[action].format(id=target))}</p>'
        f'<form class="confirm" method="post" action="/actions/{esc(action)}">'
        f'<input type="hidden" name="id" value="{esc(target)}">{reason}{token}'
        f'<button type="submit" class="danger" id="confirm">{esc(_VERBS[action])}</button> '
        f'<a href="{back}">Back</a></form>'
    )
    return layout(chrome, "Confirm", body)


def fork_confirm_page(chrome: Chrome, plan: ForkPlan, needs_token: bool) -> str:
    """The confirmation of a fork: what it does, the dry run's preview of what the new
    generation records, and a form (reason, token) that forks. The form carries the revision
    the preview was planned on: the fork is refused if the instance has moved on since."""
    token = (
        "<label>Action token (printed when the console started) "
        '<input type="password" name="token" autocomplete="off" required></label>'
        if needs_token
        else ""
    )
    rows = "".join(
        f'<tr><td class="num">#{e.revision}</td><td>{esc(e.type)}</td><td>{_fork_note(e)}</td></tr>'
        for e in plan.events
    )
    skipped = "".join(f"<li>{esc(reason)}</li>" for reason in plan.skipped)
    preview = (
        '<section class="preview"><h2>Preview (dry run)</h2>'
        f"<p>{esc(plan.source)} forks to <b>{esc(plan.generation)}</b> at revision {plan.at} "
        f"(of {plan.source_revision}): {plan.inputs} input(s) decided again "
        f"({plan.carried} carried over), {len(plan.events)} event(s), {len(plan.reused)} "
        f"command(s)/timer(s) reused, {len(plan.anew)} carried out anew.</p>"
        '<table class="preview"><thead><tr><th>Revision</th><th>Event</th><th>Effect</th></tr>'
        f"</thead><tbody>{rows}</tbody></table>"
        + (f"<p>Inputs not recorded (skipped):</p><ul>{skipped}</ul>" if skipped else "")
        + "</section>"
    )
    text = ACTIONS["fork"].format(id=plan.source, at=plan.at)
    back = href("/instance", stream=plan.source)
    body = (
        f'<p class="confirm-text">{esc(text)}</p>{preview}'
        '<form class="confirm" method="post" action="/actions/fork">'
        f'<input type="hidden" name="id" value="{esc(plan.source)}">'
        f'<input type="hidden" name="at" value="{plan.at}">'
        f'<input type="hidden" name="revision" value="{plan.source_revision}">'
        '<label>Reason (recorded in the fork) <input type="text" name="reason" '
        f'maxlength="500" required></label>{token}'
        f'<button type="submit" class="danger" id="confirm">{esc(_VERBS["fork"])}</button> '
        f'<a href="{back}">Back</a></form>'
    )
    return layout(chrome, "Confirm", body)


def _fork_note(event: PlannedEvent) -> str:
    if event.reuses is not None:
        where = f"#{event.reuses_revision}" if event.reuses_revision is not None else event.reuses
        return f"reuses {esc(where)}"
    return "carried out anew" if event.anew else ""


def forkable(chrome: Chrome, view: InstanceView) -> bool:
    """Whether the instance page offers to fork: actions allowed, an event-sourced workflow,
    and an instance not forked already."""
    registration = chrome.app.workflows.get(view.workflow)
    return (
        chrome.actions
        and view.forked_to is None
        and registration is not None
        and registration.stored == "events"
    )


def _fork_button(stream: str, revision: int, suggested: bool) -> str:
    link = href("/confirm", action="fork", id=stream, at=revision)
    css = "button fork suggested" if suggested else "button fork"
    return f'<a class="{css}" href="{link}">Fork from here</a>'


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
