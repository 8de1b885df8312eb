"""The console's web server: stdlib ``http.server``, pages rendered per request, no JavaScript.

Safety, in one place:

- it listens on loopback unless told otherwise, and answers only requests whose ``Host`` is
  the address it listens on (a page of another site cannot reach it by DNS rebinding);
- it is read-only unless started with ``actions=True``; then an action (retry a parked command,
  re-drive a skipped input, cancel a running instance, fork an instance from one of its
  inputs, after the dry run's preview) is a POST from the console's own
  confirmation page that carries the token printed at start: as a form field, or as the
  cookie that opening the printed URL sets (``HttpOnly``, ``SameSite=Strict``); a POST whose
  ``Origin`` is another site is refused;
- every response carries a Content-Security-Policy that allows no script at all, styles and
  images from the console only, and forms that post only to the console; stored data is
  escaped where it is written into a page (:mod:`decider.processors.console.pages`).
"""

from __future__ import annotations

import hmac
import http.server
import importlib.resources
import logging
import secrets
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Any

import attrs

from decider.diagram import Diagram
from decider.processors.app.definition import AppDefinition
from decider.processors.app.errors import InstanceEnded, NotParked, OperationError
from decider.processors.client.cancelling import request_cancel
from decider.processors.client.forking import ForkPlan, commit_fork, fork_point, plan_fork
from decider.processors.console import data, pages
from decider.processors.operate import skipped
from decider.processors.operate.queries import list_parked, retry_parked, show
from decider.stores.errors import CorruptEvent, StoreError
from decider.stores.protocol import EventStore

LOGGER = logging.getLogger("decider.console")
"""The console's logger."""

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
"""The Content-Security-Policy of every response: no script, nothing from elsewhere."""

COOKIE = "decider_console_token"
"""The cookie that carries the action token once the printed URL was opened."""

_MAX_BODY = 16_384
_PAGES = frozenset(
    (
        "/instances",
        "/instance",
        "/workflows",
        "/workflow",
        "/parked",
        "/skipped",
        "/processors",
        "/partitions",
    )
)
_STATIC = {"console.css": "text/css; charset=utf-8"}
_PREVIEW = "(preview)"
"""The reason a fork is planned with to preview it (the reason given is recorded)."""


class Console:
    """The console's state: app, store, whether actions are allowed, their token, diagrams.

    ``token`` is drawn at random (``secrets``) unless given. Definition diagrams are explored
    once per workflow and kept, drawing the input types ``strategies`` names from the
    strategies given (see :func:`decider.processors.console.data.definition`).
    """

    def __init__(
        self,
        app: AppDefinition,
        store: EventStore,
        *,
        actions: bool = False,
        token: str | None = None,
        stuck_after: timedelta | None = None,
        page_size: int = 50,
        strategies: Mapping[str, Any] | None = None,
    ) -> None:
        self.app = app
        self.store = store
        self.actions = actions
        self.token = token or secrets.token_urlsafe(24)
        self.stuck_after = stuck_after
        self.page_size = page_size
        self.strategies = dict(strategies or {})
        self.chrome = pages.Chrome(app, actions)
        self._definitions: dict[str, Diagram] = {}
        self._lock = threading.Lock()

    def definition(self, workflow: str) -> Diagram:
        """The definition diagram of ``workflow`` (explored on first use).

        If it cannot be explored (hypothesis missing, an input type it cannot draw), the
        diagram holds the initial state only, and pages add the transitions instances took.
        """
        with self._lock:
            if workflow not in self._definitions:
                try:
                    found = data.definition(self.app, workflow, strategies=self._of(workflow))
                except Exception as exc:
                    LOGGER.warning("console: cannot explore %s: %r", workflow, exc)
                    found = data.bare_definition(self.app, workflow)
                self._definitions[workflow] = found
            return self._definitions[workflow]

    def _of(self, workflow: str) -> dict[str, Any]:
        """The strategies of the input types of ``workflow`` (the others are another's)."""
        registration = self.app.workflows[workflow]
        names = {*registration.inputs, *(r.cls.__name__ for r in registration.inputs.values())}
        return {name: s for name, s in self.strategies.items() if name in names}

    def token_ok(self, given: str | None) -> bool:
        """Whether ``given`` is the action token (compared in constant time)."""
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


class _Answer(Exception):
    """Ends a request with a status and a page saying why."""

    def __init__(self, status: HTTPStatus, title: str, text: str) -> None:
        super().__init__(text)
        self.status, self.title, self.text = status, title, text


def make_server(
    console: Console, host: str = "127.0.0.1", port: int = 0
) -> http.server.ThreadingHTTPServer:
    """A threading HTTP server for ``console`` bound to ``host:port`` (0: any free port)."""
    handler = type("ConsoleHandler", (_Handler,), {"console": console})
    server = http.server.ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


class _Handler(http.server.BaseHTTPRequestHandler):
    console: Console
    chrome: pages.Chrome  # the console's, for the request being served
    server_version = "decider-console"
    sys_version = ""

    # -- plumbing -----------------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:
        LOGGER.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._serve(self._get)

    def do_POST(self) -> None:
        self._serve(self._post)

    def _serve(self, route: Callable[[str, dict[str, str]], str | None]) -> None:
        self.chrome = self.console.chrome
        try:
            self._check_host()
            url = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            self.chrome = attrs.evolve(
                self.console.chrome, path=url.path, query=query, refresh=_refresh(query)
            )
            page = route(url.path, query)
            if page is not None:
                self._send(HTTPStatus.OK, page.encode())
        except _Answer as answer:
            page = pages.message_page(self.chrome, answer.title, answer.text, "/", "error")
            self._send(answer.status, page.encode())
        except CorruptEvent as exc:
            page = pages.message_page(self.chrome, "Corrupt event", str(exc), "/", "error")
            self._send(HTTPStatus.UNPROCESSABLE_ENTITY, page.encode())
        except StoreError as exc:
            LOGGER.warning("console: store error: %s", exc)
            page = pages.message_page(
                self.chrome, "Store unavailable", f"{type(exc).__name__}: {exc}", "/"
            )
            self._send(HTTPStatus.SERVICE_UNAVAILABLE, page.encode())
        except Exception:
            LOGGER.exception("console: %s %s failed", self.command, self.path)
            page = pages.message_page(
                self.chrome, "Error", "The console failed; see its log.", "/", "error"
            )
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, page.encode())

    def _check_host(self) -> None:
        host, port = _address(self.server)
        if host in ("0.0.0.0", "::"):
            return  # listening everywhere, on purpose: any name may reach it
        allowed = {f"{host}:{port}", f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
        if self.headers.get("Host", "") not in allowed:
            raise _Answer(HTTPStatus.MISDIRECTED_REQUEST, "Wrong host", "unexpected Host header")

    def _headers(self, status: HTTPStatus, content_type: str, length: int) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "same-origin")  # "no-referrer" makes Origin "null"
        self.send_header("Cache-Control", "no-store")

    def _send(
        self, status: HTTPStatus, body: bytes, ctype: str = "text/html; charset=utf-8"
    ) -> None:
        self._headers(status, ctype, len(body))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str, cookie: str | None = None) -> None:
        self._headers(HTTPStatus.SEE_OTHER, "text/plain", 0)
        self.send_header("Location", location)
        if cookie is not None:
            self.send_header("Set-Cookie", cookie)
        self.end_headers()

    # -- reading ------------------------------------------------------------------------

    def _get(self, path: str, query: dict[str, str]) -> str | None:
        console = self.console
        if "token" in query:
            self._login(path, query)
            return None
        if path.startswith("/static/"):
            self._static(path.removeprefix("/static/"))
            return None
        chrome, store, app = self.chrome, console.store, console.app
        match path:
            case "/":
                self._redirect("/instances")
                return None
            case "/instances":
                return self._instances(query)
            case "/instance":
                return self._instance(query.get("stream", ""))
            case "/workflows":
                return pages.workflows_page(chrome)
            case "/workflow":
                name = self._workflow_name(query.get("name", ""))
                seen = data.observed_diagram(store, app, name)
                return pages.workflow_page(chrome, name, console.definition(name), seen)
            case "/parked":
                return pages.parked_page(chrome, list_parked(store, app))
            case "/skipped":
                return pages.skipped_page(chrome, data.list_skipped(store, app))
            case "/processors":
                now = datetime.now(UTC)
                return pages.processors_page(chrome, data.processor_rows(store, app, now), now)
            case "/partitions":
                now = datetime.now(UTC)
                return pages.partitions_page(chrome, data.partitions_view(store, app, now), now)
            case "/confirm":
                return self._confirm(query)
        raise _Answer(HTTPStatus.NOT_FOUND, "Not found", f"no page {path}")

    def _login(self, path: str, query: dict[str, str]) -> None:
        if not self.console.actions or not self.console.token_ok(query.get("token")):
            raise _Answer(HTTPStatus.FORBIDDEN, "Forbidden", "wrong token, or actions are off")
        rest = {k: v for k, v in query.items() if k != "token"}
        # Back to one of the console's own pages only: never to a path a browser might read
        # as another site's address ("//host", "/\\host").
        page = path if path in _PAGES else "/instances"
        target = page + ("?" + urllib.parse.urlencode(rest) if rest else "")
        cookie = f"{COOKIE}={self.console.token}; HttpOnly; SameSite=Strict; Path=/"
        self._redirect(target, cookie)

    def _static(self, name: str) -> None:
        if name not in _STATIC:
            raise _Answer(HTTPStatus.NOT_FOUND, "Not found", f"no file {name}")
        resource = importlib.resources.files("decider.processors.console") / "static" / name
        self._send(HTTPStatus.OK, resource.read_bytes(), _STATIC[name])

    def _instances(self, query: dict[str, str]) -> str | None:
        console = self.console
        search = query.get("q", "").strip() or None
        workflow = query.get("workflow") or None
        if workflow is not None:
            self._workflow_name(workflow)
        status_value = query.get("status") or None
        stuck = query.get("stuck") == "1"
        try:
            offset = max(0, int(query.get("offset", "0")))
        except ValueError:
            raise _Answer(
                HTTPStatus.BAD_REQUEST, "Bad request", "offset must be a number"
            ) from None
        page = data.list_instances(
            console.store,
            console.app,
            workflow=workflow,
            status_value=status_value,
            stuck_only=stuck,
            stuck_after=console.stuck_after,
            search=search,
            offset=offset,
            limit=console.page_size,
        )
        if search is not None and page.total == 1:
            (row,) = page.rows
            if search in (row.stream, data.instance_id(console.app, row)):
                self._redirect(pages.href("/instance", stream=row.stream).replace("&amp;", "&"))
                return None  # the one instance of that id or key: its page
        body = pages.instances_page(self.chrome, page, workflow, status_value, stuck, search=search)
        return pages.layout(self.chrome, "Instances", body, "/instances")

    def _instance(self, stream: str) -> str:
        console = self.console
        try:
            view = show(console.store, console.app, stream)
        except KeyError as exc:
            raise _Answer(HTTPStatus.NOT_FOUND, "Not found", str(exc.args[0])) from None
        if not view.history:
            raise _Answer(HTTPStatus.NOT_FOUND, "Not found", f"stream {stream!r} has no events")
        parked = data.parked_of(console.store, console.app, stream)
        drawn = data.instance_diagram(
            console.app,
            view,
            console.definition(view.workflow),
            error=data.is_error(view, parked),
        )
        codec = console.app.codec
        payloads = [
            (
                pages.pretty(codec.encode_event(e.event)[1]),
                pages.pretty(codec.encode_metadata(e.metadata)),
            )
            for e in view.history
        ]
        fork_at = None
        if pages.forkable(self.chrome, view):
            try:
                fork_at = fork_point(console.app, console.store, stream)
            except (OperationError, CorruptEvent):
                fork_at = None  # no suggestion; the page shows the instance all the same
        return pages.instance_page(
            self.chrome,
            view,
            drawn,
            parked,
            payloads,
            end_reason=data.end_reason(view),
            fork_at=fork_at,
        )

    def _workflow_name(self, name: str) -> str:
        if name not in self.console.app.workflows:
            raise _Answer(HTTPStatus.NOT_FOUND, "Not found", f"no workflow {name!r}")
        return name

    def _confirm(self, query: dict[str, str]) -> str:
        action, target = query.get("action", ""), query.get("id", "")
        self._allowed(action)
        if not target:
            raise _Answer(HTTPStatus.BAD_REQUEST, "Bad request", "no id given")
        needs_token = not self.console.token_ok(self._cookie())
        if action == "fork":
            plan = self._plan_fork(target, query.get("at", ""), _PREVIEW)
            return pages.fork_confirm_page(self.chrome, plan, needs_token)
        return pages.confirm_page(self.chrome, action, target, needs_token)

    # -- acting -------------------------------------------------------------------------

    def _allowed(self, action: str) -> None:
        if not self.console.actions:
            raise _Answer(
                HTTPStatus.FORBIDDEN, "Read-only", "this console is read-only (--allow-actions)"
            )
        if action not in pages.ACTIONS:
            raise _Answer(HTTPStatus.NOT_FOUND, "Not found", f"no action {action!r}")

    def _post(self, path: str, query: dict[str, str]) -> str:
        action = path.removeprefix("/actions/")
        self._allowed(action)
        origin = self.headers.get("Origin")
        if origin is not None and urllib.parse.urlsplit(origin).netloc != self.headers["Host"]:
            raise _Answer(HTTPStatus.FORBIDDEN, "Forbidden", "a request from another site")
        form = self._form()
        if not (self.console.token_ok(form.get("token")) or self.console.token_ok(self._cookie())):
            raise _Answer(HTTPStatus.FORBIDDEN, "Forbidden", "the action token is missing or wrong")
        target = form.get("id", "")
        console, chrome = self.console, self.chrome
        if action == "cancel":
            return self._cancel(target, form.get("reason", "").strip())
        if action == "fork":
            return self._fork(target, form)
        if action == "retry":
            try:
                request = retry_parked(console.store, console.app, target)
            except NotParked as exc:
                raise _Answer(HTTPStatus.CONFLICT, "Not parked", str(exc)) from None
            except InstanceEnded as exc:
                raise _Answer(HTTPStatus.CONFLICT, "Instance ended", str(exc)) from None
            LOGGER.info("console: retry of parked command %s requested (%s)", target, request)
            text = (
                f"Retry of command {target} requested ({request}); "
                "a running service carries it out again."
            )
            return pages.message_page(chrome, "Retry requested", text, "/parked")
        try:
            found = skipped.find_skipped(console.store, console.app, target, exact=True)
            copy = skipped.redrive(console.store, console.app, found).event_id
        except skipped.NotRedrivable as exc:
            raise _Answer(HTTPStatus.CONFLICT, "Not re-driven", str(exc)) from None
        LOGGER.info("console: skipped input %s re-driven as %s", target, copy)
        text = f"Skipped input {target} re-driven as event {copy}; a running service handles it."
        return pages.message_page(chrome, "Input re-driven", text, "/skipped")

    def _cancel(self, stream: str, reason: str) -> str:
        console = self.console
        if not reason:
            raise _Answer(HTTPStatus.BAD_REQUEST, "Bad request", "a cancel needs a reason")
        try:
            request = request_cancel(console.store, console.app, stream, reason)
        except OperationError as exc:
            raise _Answer(HTTPStatus.CONFLICT, "Not cancelled", str(exc)) from None
        if request.already:
            text = f"A cancel of {stream} was already requested ({request.message_id})."
        else:
            LOGGER.info("console: cancel of %s requested (%s)", stream, request.message_id)
            text = (
                f"Cancel of {stream} requested ({request.message_id}); a running service "
                "delivers it to the instance."
            )
        back = pages.href("/instance", stream=stream).replace("&amp;", "&")
        return pages.message_page(self.chrome, "Cancel requested", text, back)

    def _plan_fork(self, stream: str, at: str, reason: str) -> ForkPlan:
        """The fork of ``stream`` at revision ``at`` planned (nothing written)."""
        try:
            revision = int(at)
        except ValueError:
            raise _Answer(
                HTTPStatus.BAD_REQUEST, "Bad request", "at must be a revision (a number)"
            ) from None
        try:
            console = self.console
            return plan_fork(console.app, console.store, stream, at=revision, reason=reason)
        except OperationError as exc:
            raise _Answer(HTTPStatus.CONFLICT, "Not forked", str(exc)) from None

    def _fork(self, stream: str, form: dict[str, str]) -> str:
        """Fork as previewed: planned again, and written only if the instance recorded
        nothing since the preview (the revision the confirmation page carries)."""
        reason = form.get("reason", "").strip()
        if not reason:
            raise _Answer(HTTPStatus.BAD_REQUEST, "Bad request", "a fork needs a reason")
        plan = self._plan_fork(stream, form.get("at", ""), reason)
        back = pages.href("/instance", stream=stream).replace("&amp;", "&")
        if plan.already:
            text = f"{stream} was already forked to {plan.generation} at revision {plan.at}."
            return pages.message_page(self.chrome, "Forked already", text, back)
        if form.get("revision") != str(plan.source_revision):
            raise _Answer(
                HTTPStatus.CONFLICT,
                "Not forked",
                f"{stream} recorded more events since the preview (it is at revision "
                f"{plan.source_revision} now): nothing was written; preview the fork again",
            )
        try:
            commit_fork(self.console.store, plan)
        except OperationError as exc:
            raise _Answer(HTTPStatus.CONFLICT, "Not forked", str(exc)) from None
        LOGGER.info("console: %s forked to %s at revision %s", stream, plan.generation, plan.at)
        text = (
            f"{stream} forked to {plan.generation} at revision {plan.at}: "
            f"{len(plan.reused)} command(s)/timer(s) reused, {len(plan.anew)} carried out anew; "
            "a running service carries on in the new generation."
        )
        forked = pages.href("/instance", stream=plan.generation).replace("&amp;", "&")
        return pages.message_page(
            self.chrome, "Forked", text, forked, label=f"Open {plan.generation}"
        )

    def _form(self) -> dict[str, str]:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_BODY:
            raise _Answer(HTTPStatus.BAD_REQUEST, "Bad request", "bad Content-Length")
        body = self.rfile.read(length).decode("utf-8", "replace")
        return dict(urllib.parse.parse_qsl(body))

    def _cookie(self) -> str | None:
        for part in self.headers.get("Cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE:
                return value
        return None


def serve(
    console: Console,
    host: str = "127.0.0.1",
    port: int = 8765,
    announce: Callable[[str], None] = print,
    stop: threading.Event | None = None,
) -> None:
    """Serve ``console`` until ``stop`` is set (or KeyboardInterrupt); ``announce`` gets the
    URL to open (with the action token when actions are allowed)."""
    server = make_server(console, host, port)
    bound_host, bound_port = _address(server)
    shown = f"[{bound_host}]" if ":" in str(bound_host) else str(bound_host)
    url = f"http://{shown}:{bound_port}/"
    mode = "actions allowed" if console.actions else "read-only"
    announce(f"decider console for app {console.app.name!r} on {url} ({mode})")
    if console.actions:
        announce(f"actions allowed with token {console.token}: open {url}?token={console.token}")
    if stop is not None:

        def stopper() -> None:
            stop.wait()
            server.shutdown()

        threading.Thread(target=stopper, name="decider-console-stop", daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


def _refresh(query: dict[str, str]) -> int:
    """The page refresh interval a query asks for: one of the choices offered, else none."""
    try:
        asked = int(query.get("refresh", "0"))
    except ValueError:
        return 0
    return asked if asked in pages.REFRESH_CHOICES else 0


def _address(server: Any) -> tuple[str, int]:
    """The host and port a server listens on."""
    address = server.server_address
    return str(address[0]), int(address[1])
