"""nexus-web: serve the inbox page and relay it to nexusd. ``main`` is the ``nexus-web`` console script.

One ``Hub`` holds the daemon link (the TUI's ``DaemonLink``: the UI role, reconnect with backoff, no
answer kept for later) and the queue (the TUI's ``TuiState``); browsers get it as server-sent events
and answer with POSTs. Like every UI it holds no policy and decides nothing: it forwards a person's
answer, and the daemon checks it (self-approval guard, blanket rules, first answer wins).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import stat
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nexus_clients.tui import risk
from nexus_clients.tui.link import DaemonLink, LinkDown, LinkUp, NotConnected
from nexus_clients.tui.state import TuiState
from nexus_clients.web import render, undo
from nexus_clients.web.access import COOKIE, CSRF_HEADER, SECURITY_HEADERS, Access, allowed_hosts, is_loopback
from nexusd import locations, protocol

ARRIVAL_GUARD = 0.6  # seconds a request must have been on screen before an answer to it is taken
MAX_MESSAGE = 2000
MAX_RULES = 20
MAX_BODY = 64 * 1024
LISTENER_BUFFER = 1000  # events queued per browser before a browser that stops reading is dropped
KEEPALIVE = 15.0


def _static(name: str) -> bytes:
    return resources.files("nexus_clients.web").joinpath("static", name).read_bytes()


class Hub:
    """The daemon link, the queue, and the browsers listening to it."""

    def __init__(self, socket_path: Path | None, name: str = "nexus-web", arrival_guard: float = ARRIVAL_GUARD) -> None:
        self.state = TuiState(clock=time.time, arrival_guard=arrival_guard)
        self.link = DaemonLink(socket_path, self.on_event, name=name)
        self.views: dict[str, dict[str, Any]] = {}  # id -> rendered item (the diff is read once)
        self.listeners: set[Any] = set()
        self.policy_errors: list[str] = []

    async def run(self) -> None:
        await self.link.run()

    def snapshot(self) -> dict[str, Any]:
        s = self.state
        return {
            "connected": s.connection == "connected",
            "detail": s.connection_detail,
            "version": s.daemon_version,
            "now": time.time(),
            "items": [self.views[e.id] | self._outcome(e) for e in s.queue() if e.id in self.views],
            "policy_errors": self.policy_errors,
        }

    def _outcome(self, entry: Any) -> dict[str, Any]:
        return {"resolved": render.resolved_view(entry)} if entry.resolved is not None else {}

    def on_event(self, event: Any) -> None:
        s = self.state
        if isinstance(event, LinkUp):
            s.connected(event.version)
        elif isinstance(event, LinkDown):
            s.disconnected(event.reason)
            self.views.clear()
            self.broadcast("snapshot", self.snapshot())
        elif isinstance(event, protocol.Snapshot):
            s.apply_snapshot(event.items)
            self.views = {e.id: self.views.get(e.id) or render.item_view(e) for e in s.queue()}
            self.broadcast("snapshot", self.snapshot())
        elif isinstance(event, protocol.Prompt):
            if s.apply_prompt(event.item):
                entry = s.entries[event.item.id]
                self.views[entry.id] = render.item_view(entry)
                self.broadcast("prompt", {"item": self.views[entry.id], "now": time.time()})
        elif isinstance(event, protocol.Resolved):
            done = s.apply_resolved(event)
            if done is not None:
                self.broadcast("resolved", render.resolved_view(done) | {"now": time.time()})
            s.prune()
            for gone in set(self.views) - set(s.entries):
                del self.views[gone]
        elif isinstance(event, protocol.PolicyNotice):
            self.policy_errors = [render.line(e, 1000) for e in event.errors]
            self.broadcast("policy", {"ok": event.ok, "errors": self.policy_errors})
        elif isinstance(event, protocol.Held):
            if s.apply_held(event) is not None:
                view = self.views.get(event.id)
                if view is not None:
                    view["deadline"], view["hold_limit"] = event.deadline, event.limit
                self.broadcast(
                    "held",
                    {
                        "id": event.id,
                        "deadline": event.deadline,
                        "limit": event.limit,
                        "by": render.line(event.by, 200),
                        "now": time.time(),
                    },
                )
        elif isinstance(event, protocol.Bye):
            self.broadcast("link", {"connected": False, "detail": render.line(f"nexusd is stopping: {event.reason}")})

    async def rules_problem(self, rules: list[str], confirmed: bool) -> str:
        return await _rules_problem(self.link, rules, confirmed)

    def broadcast(self, kind: str, data: dict[str, Any]) -> None:
        for send in list(self.listeners):
            try:
                send.send_nowait((kind, data))
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.listeners.discard(send)  # a browser that stops reading is dropped; it reconnects
                send.close()

    async def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Validate one answer from a browser and forward it; (HTTP status, JSON reply)."""
        problem = validate_answer(body)
        if problem:
            return 400, {"error": problem}
        rid: str = body["id"]
        entry = self.state.entries.get(rid)
        if entry is None:
            return 409, {"error": "that request is gone (answered, timed out or cancelled)", "code": "not_found"}
        if not entry.pending:
            return 409, {"error": f"already {entry.outcome()}", "code": "already_decided"}
        now = self.state.clock()
        if now - entry.seen_at < self.state.arrival_guard:
            return 409, {"error": "this request just arrived: read it first, then answer", "code": "too_soon"}
        if entry.remaining(now) <= 0:
            return 409, {"error": "too late: this request has timed out and is being denied", "code": "too_late"}
        scope = body.get("scope", "once")
        rules = body.get("rules")
        verdict = entry.item.verdict
        if (
            scope in ("session", "always", "timed")
            and body["decision"] == "allow"
            and not (rules or verdict.suggestions)
        ):
            return 422, {"error": "nexusd offered no rule narrow enough to remember: answer once", "code": "refused"}
        if scope == "always" and risk.is_dangerous(verdict) and body.get("confirm_risk") is not True:
            return 422, {"error": "this request is flagged high risk: confirm before persisting", "code": "confirm"}
        # how narrow the rules are is the daemon's one check (rule_check), asked before anything is forwarded
        # (the daemon checks the answer again): a refused rule, or a wide one the person did not confirm
        if body["decision"] == "allow" and scope in ("session", "always", "timed"):
            problem = await self.rules_problem(rules or verdict.suggestions, body.get("confirm_broad") is True)
            if problem:
                return 422, {"error": problem, "code": "refused"}
        msg = protocol.Answer(
            id=rid,
            decision=body["decision"],
            scope=scope,
            message=body.get("message") or None,
            rules=rules or None,
            abort=body.get("abort") is True,
            duration=body.get("duration"),
            updated_input=body.get("updated_input"),
            confirm_broad=body.get("confirm_broad") is True,
        )
        try:
            ack = await self.link.call(msg)
        except NotConnected:
            return 503, {"error": "not connected to nexusd: nothing was sent", "code": "not_connected"}
        except Exception as e:
            code = getattr(e, "code", None) or "error"
            text = render.line(str(getattr(e, "message", "") or e), 400)
            if code == "already_decided":
                for _ in range(20):  # the winner's Resolved is usually on the wire already: say who won
                    after = self.state.entries.get(rid)
                    if after is None or after.resolved is not None:
                        break
                    await anyio.sleep(0.05)
                after = self.state.entries.get(rid)
                who = after.outcome() if after and after.resolved else "already decided elsewhere"
                return 409, {"error": f"too late, your answer lost the race: {who}", "code": code}
            status = 403 if code in ("self_approval", "forbidden") else 422 if code == "refused" else 502
            return status, {"error": text, "code": code}
        entry.answered_here = f"{body['decision']} ({scope})"
        return 200, {"ok": True, "detail": render.line(getattr(ack, "detail", ""), 200)}


async def _rules_problem(link: Any, rules: list[str], confirmed: bool) -> str:
    """The daemon's verdict on allow rules: why they may not be given as they are ("" when they may)."""
    try:
        reply = await link.call(protocol.RuleCheck(kind="allow", rules=list(rules)))
    except NotConnected:
        return "not connected to nexusd: nothing was sent"
    except Exception as e:
        return f"the rules could not be checked: {render.line(str(e), 200)}"
    if not isinstance(reply, protocol.RuleCheckReply) or len(reply.results) != len(rules):
        return "the rules could not be checked: unexpected reply"
    for v in reply.results:
        if v.status == "refused":
            return f"{render.line(v.rule, 200)} is too broad: {render.line(v.reason, 300)}"
        if v.status == "confirm" and not confirmed:
            return f"{render.line(v.rule, 200)} needs your explicit confirmation: {render.line(v.reason, 300)}"
    return ""


def validate_answer(body: Any) -> str:
    """Shape checks (the daemon checks again); an empty string when the answer is well formed."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    unknown = set(body) - {
        "id",
        "decision",
        "scope",
        "message",
        "rules",
        "confirm_risk",
        "confirm_broad",
        "abort",
        "duration",
        "updated_input",
    }
    if unknown:
        return f"unknown fields: {', '.join(sorted(unknown))}"
    if not isinstance(body.get("id"), str) or not body["id"]:
        return "id is required"
    if body.get("decision") not in ("allow", "deny"):
        return "decision must be allow or deny"
    scope = body.get("scope", "once")
    if scope not in ("once", "session", "always", "never", "timed"):
        return "scope must be once, session, always, never or timed"
    for flag in ("confirm_risk", "confirm_broad", "abort"):
        if flag in body and not isinstance(body[flag], bool):
            return f"{flag} must be true or false"
    if body.get("abort") is True and body["decision"] != "deny":
        return "abort goes with deny"
    duration = body.get("duration")
    if (scope == "timed") != (duration is not None):
        return "duration goes with scope timed, and only with it"
    if duration is not None and (
        isinstance(duration, bool) or not isinstance(duration, (int, float)) or not 0 < duration <= 30 * 86400
    ):
        return "duration must be seconds, more than 0 and at most 30 days"
    edited = body.get("updated_input")
    if edited is not None and (not isinstance(edited, dict) or body["decision"] != "allow" or scope != "once"):
        return "updated_input is an object and goes with allow once"
    if scope == "never" and body["decision"] != "deny":
        return "never goes with deny"
    if scope == "always" and body["decision"] != "allow":
        return "always goes with allow"
    message = body.get("message")
    if message is not None and (not isinstance(message, str) or len(message) > MAX_MESSAGE):
        return f"message must be text of at most {MAX_MESSAGE} characters"
    rules = body.get("rules")
    if rules is not None:
        if not isinstance(rules, list) or not all(isinstance(r, str) and r.strip() for r in rules):
            return "rules must be a list of non-empty strings"
        if len(rules) > MAX_RULES or any(len(r) > 4000 for r in rules):
            return "too many or too long rules"
        if scope == "once":
            return "rules go with session, timed, always or never"
    return ""


# --------------------------------------------------------------------------- HTTP


class SecurityHeaders:
    """Adds the security headers to every response, and refuses a wrong Host before any route runs."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *(h for h in SECURITY_HEADERS if h[0] not in names)]
            await send(message)

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host")
        if not self.access.host_ok(host):
            await PlainTextResponse("refused: unexpected Host header", status_code=421)(scope, receive, with_headers)
            return
        origin = headers.get("origin")
        if not self.access.origin_ok(origin, host or ""):
            await PlainTextResponse("refused: cross-origin request", status_code=403)(scope, receive, with_headers)
            return
        if headers.get("sec-fetch-site") == "cross-site":
            await PlainTextResponse("refused: cross-site request", status_code=403)(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)


UNAUTHORIZED = """<!doctype html><meta charset="utf-8"><title>nexus-web: sign in</title>
<link rel="stylesheet" href="/static/app.css">
<main class="gate"><h1>nexus-web</h1><p>Open the link <code>nexus-web</code> printed in its terminal when it
started (it holds a one-time token for this run). Links in notifications work once this browser is signed in.</p></main>
"""


def build_app(hub: Hub, access: Access) -> ASGIApp:  # noqa: C901 - its route handlers are closures, counted here
    Handler = Callable[[Request], Awaitable[Response]]

    def session_of(request: Request) -> Any:
        return access.session(request.cookies.get(COOKIE))

    def needs_session(fn: Handler) -> Handler:
        async def wrapped(request: Request) -> Response:
            if session_of(request) is None:
                return JSONResponse({"error": "not signed in"}, status_code=401)
            return await fn(request)

        return wrapped

    def needs_csrf(fn: Handler) -> Handler:
        async def wrapped(request: Request) -> Response:
            session = session_of(request)
            if session is None:
                return JSONResponse({"error": "not signed in"}, status_code=401)
            if request.headers.get("origin") is None:
                return JSONResponse({"error": "refused: a change needs an Origin header"}, status_code=403)
            if not access.csrf_ok(session, request.headers.get(CSRF_HEADER)):
                return JSONResponse({"error": "refused: missing or wrong CSRF token"}, status_code=403)
            if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
                return JSONResponse({"error": "refused: JSON only"}, status_code=415)
            return await fn(request)

        return wrapped

    async def read_json(request: Request) -> Any:
        size = 0
        chunks: list[bytes] = []
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise ValueError("body too large")
            chunks.append(chunk)
        return json.loads(b"".join(chunks))

    async def index(request: Request) -> Response:
        token = request.query_params.get("token")
        if token is not None:
            if not access.token_ok(token):
                return Response(UNAUTHORIZED, status_code=401, media_type="text/html")
            sid = access.new_session()
            response = RedirectResponse("/", status_code=303)  # the token leaves the address bar and history
            response.headers["set-cookie"] = access.cookie(sid)
            return response
        session = session_of(request)
        if session is None:
            return Response(UNAUTHORIZED, status_code=401, media_type="text/html")
        page = _static("index.html").decode().replace("__CSRF__", session.csrf)
        return Response(page, media_type="text/html")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        types = {"app.js": "text/javascript", "app.css": "text/css"}
        if name not in types:
            return PlainTextResponse("not found", status_code=404)
        return Response(_static(name), media_type=types[name])

    async def events(request: Request) -> Response:
        send, recv = anyio.create_memory_object_stream[tuple[str, dict[str, Any]]](LISTENER_BUFFER)
        hub.listeners.add(send)
        first = json.dumps(hub.snapshot())

        async def stream() -> AsyncIterator[str]:
            try:
                yield f"event: snapshot\ndata: {first}\n\n"
                while True:
                    with anyio.move_on_after(KEEPALIVE) as idle:
                        kind, data = await recv.receive()
                    if idle.cancelled_caught:
                        yield ": keepalive\n\n"
                        continue
                    yield f"event: {kind}\ndata: {json.dumps(data)}\n\n"
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return
            finally:
                hub.listeners.discard(send)
                send.close()
                recv.close()

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def answer(request: Request) -> Response:
        try:
            body = await read_json(request)
        except ValueError as e:
            return JSONResponse({"error": f"bad request: {e}"}, status_code=400)
        status, reply = await hub.answer(body)
        return JSONResponse(reply, status_code=status)

    async def whoami(request: Request) -> Response:
        """The page asks this when its event stream breaks: 401 means this server no longer knows the
        session (nexus-web was restarted), so the page says to open the new link."""
        return JSONResponse({"ok": True})

    async def hold(request: Request) -> Response:
        try:
            body = await read_json(request)
            if not isinstance(body, dict) or set(body) - {"id", "seconds"} or not isinstance(body.get("id"), str):
                raise ValueError("expected {id, seconds}")
            seconds = body.get("seconds", 60)
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= 3600:
                raise ValueError("seconds must be more than 0 and at most 3600")
        except ValueError as e:
            return JSONResponse({"error": f"bad request: {e}"}, status_code=400)
        msg = protocol.Hold(id=body["id"], seconds=float(seconds))
        return await relay(lambda: query(msg), lambda r: {"ok": True, "detail": render.line(r.detail, 200)})

    async def rule_check(request: Request) -> Response:
        try:
            body = await read_json(request)
            if not isinstance(body, dict) or set(body) != {"kind", "rules"} or body["kind"] not in ("allow", "deny"):
                raise ValueError("expected {kind: allow|deny, rules}")
            rules = body["rules"]
            if not isinstance(rules, list) or not all(isinstance(r, str) and r.strip() for r in rules):
                raise ValueError("rules must be a list of non-empty strings")
            if len(rules) > MAX_RULES or any(len(r) > 4000 for r in rules):
                raise ValueError("too many or too long rules")
        except ValueError as e:
            return JSONResponse({"error": f"bad request: {e}"}, status_code=400)
        msg = protocol.RuleCheck(kind=body["kind"], rules=[r.strip() for r in rules])
        return await relay(
            lambda: query(msg),
            lambda r: {
                "results": [
                    {"rule": render.line(x.rule, 1000), "status": x.status, "reason": render.line(x.reason, 400)}
                    for x in r.results
                ]
            },
        )

    async def query(msg: protocol._Msg) -> Any:
        return await hub.link.call(msg)

    async def audit(request: Request) -> Response:
        q = request.query_params
        try:
            limit = max(1, min(5000, int(q.get("limit") or 200)))
            msg = protocol.Audit(
                limit=limit,
                session=q.get("session") or None,
                tool=q.get("tool") or None,
                decision=q.get("decision") or None,  # type: ignore[arg-type]
                source=q.get("source") or None,  # type: ignore[arg-type]
            )
            protocol.decode_client(protocol.encode(msg))  # the filters' literal values, checked by the wire types
        except Exception as e:  # a bad number or a filter value the wire types do not know
            return JSONResponse({"error": f"bad filter: {render.line(str(e), 200)}"}, status_code=400)
        return await relay(lambda: query(msg), lambda r: {"records": [_record(x) for x in r.records]})

    async def rules(request: Request) -> Response:
        return await relay(
            lambda: query(protocol.Rules()),
            lambda r: {
                "rules": [
                    {
                        "kind": x.kind,
                        "rule": render.line(x.rule, 1000),
                        "raw": x.rule,
                        "layer": x.layer,
                        "origin": render.line(x.origin, 400),
                        "removable": x.removable,
                        "warning": render.line(x.warning or "", 400),
                    }
                    for x in r.rules
                ],
                "trusted": [render.line(t, 1000) for t in r.trusted],
            },
        )

    async def rule_remove(request: Request) -> Response:
        try:
            body = await read_json(request)
            if not isinstance(body, dict) or set(body) != {"kind", "rule"}:
                raise ValueError("expected {kind, rule}")
            if body["kind"] not in ("allow", "ask", "deny"):
                raise ValueError("expected {kind, rule}")
            if not isinstance(body["rule"], str) or not body["rule"]:
                raise ValueError("rule must be a string")
        except ValueError as e:
            return JSONResponse({"error": f"bad request: {e}"}, status_code=400)
        msg = protocol.RuleChange(action="remove", kind=body["kind"], rule=body["rule"])
        return await relay(lambda: query(msg), lambda r: {"ok": True, "detail": render.line(r.detail, 200)})

    async def grants(request: Request) -> Response:
        return await relay(
            lambda: query(protocol.Grants()),
            lambda r: {
                "grants": [
                    {
                        "id": render.line(g.id, 100),
                        "kind": g.kind,
                        "rule": render.line(g.rule, 1000),
                        "scope": g.scope,
                        "session": render.line(g.session or "", 200),
                        "given_by": render.line(g.given_by or "", 200),
                        "given_at": g.given_at,
                        "expires": g.expires,
                        "uses": g.uses,
                        "origin": render.line(g.origin or "", 400),
                    }
                    for g in r.grants
                ],
            },
        )

    async def grant_revoke(request: Request) -> Response:
        try:
            body = await read_json(request)
            if (
                not isinstance(body, dict)
                or set(body) != {"id"}
                or not isinstance(body["id"], str)
                or not body["id"]
                or len(body["id"]) > 100
            ):
                raise ValueError("expected {id}")
        except ValueError as e:
            return JSONResponse({"error": f"bad request: {e}"}, status_code=400)
        msg = protocol.RevokeGrant(id=body["id"])
        return await relay(lambda: query(msg), lambda r: {"ok": True, "detail": render.line(r.detail, 200)})

    async def status(request: Request) -> Response:
        def shape(r: protocol.StatusReply) -> dict[str, Any]:
            return {
                "version": r.version,
                "pid": r.pid,
                "uptime": r.uptime,
                "pending": r.pending,
                "connections": r.connections,
                "locked": render.line(r.locked or "", 1000),
                "audit_error": render.line(r.audit_error or "", 1000),
                "audit_unrecorded": r.audit_unrecorded,
                "sessions": {render.line(k, 200): render.line(v, 40) for k, v in r.sessions.items()},
                "policy": [
                    {
                        "layer": x.layer,
                        "path": render.line(x.path, 1000),
                        "loaded": x.loaded,
                        "error": render.line(x.error or "", 1000),
                    }
                    for x in r.policy
                ],
                "policy_errors": [render.line(x, 1000) for x in r.policy_errors],
                "sandbox": None
                if r.sandbox is None
                else {
                    "platform": r.sandbox.platform,
                    "available": r.sandbox.available,
                    "backend": r.sandbox.backend or "",
                    "reason": render.line(r.sandbox.reason, 1000),
                    "checks": {k: render.line(v, 400) for k, v in r.sandbox.checks.items()},
                },
            }

        return await relay(lambda: query(protocol.Status()), shape)

    async def relay(call: Callable[[], Awaitable[Any]], shape: Callable[[Any], dict[str, Any]]) -> Response:
        try:
            reply = await call()
        except NotConnected:
            return JSONResponse({"error": "not connected to nexusd"}, status_code=503)
        except Exception as e:
            code = getattr(e, "code", None)
            text = render.line(str(getattr(e, "message", "") or e), 400)
            status = 403 if code in ("self_approval", "forbidden") else 422 if code == "refused" else 502
            return JSONResponse({"error": text, "code": code}, status_code=status)
        return JSONResponse(shape(reply))

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
        Route("/api/events", needs_session(events), methods=["GET"]),
        Route("/api/audit", needs_session(audit), methods=["GET"]),
        Route("/api/rules", needs_session(rules), methods=["GET"]),
        Route("/api/status", needs_session(status), methods=["GET"]),
        Route("/api/answer", needs_csrf(answer), methods=["POST"]),
        Route("/api/rules/remove", needs_csrf(rule_remove), methods=["POST"]),
        Route("/api/grants", needs_session(grants), methods=["GET"]),
        Route("/api/grants/revoke", needs_csrf(grant_revoke), methods=["POST"]),
        *undo.routes(  # the undo page (web/undo.py, docs/UNDO.md)
            page=lambda request, html: (
                None
                if (s := session_of(request)) is None
                else Response(html.replace("__CSRF__", s.csrf), media_type="text/html")
            ),
            query=query,
            relay=relay,
            needs_session=needs_session,
            needs_csrf=needs_csrf,
            read_json=read_json,
            static=_static,
        ),
        Route("/api/whoami", needs_session(whoami), methods=["GET"]),
        Route("/api/hold", needs_csrf(hold), methods=["POST"]),
        Route("/api/rules/check", needs_csrf(rule_check), methods=["POST"]),
    ]
    return SecurityHeaders(Starlette(routes=routes), access)


def _record(r: protocol.AuditRecord) -> dict[str, Any]:
    return {
        "time": r.time,
        "id": r.id,
        "provider": render.line(r.provider, 40),
        "session": render.line(r.session, 200),
        "tool": render.line(r.tool, 200),
        "summary": render.line(r.summary, 400),
        "lookalike": render.lookalike(r.summary),
        "decision": r.decision,
        "source": r.source,
        "reason": render.line(r.reason, 600),
        "rule": render.line(r.rule or "", 400),
        "answered_by": render.line(r.answered_by or "", 200),
        "scope": r.scope or "",
        "event": r.event,
    }


# --------------------------------------------------------------------------- command line


def bind(listen: str, port: int, unix: str | None) -> socket.socket:
    """Bind ourselves, so the real port is known before the URL is printed and a Unix socket is 0600."""
    if unix:
        path = Path(unix)
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(path.lstat().st_mode):
                path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
    else:
        family = socket.AF_INET6 if ":" in listen else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((listen, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="nexus-web",
        description="The web inbox: answer AI agents' requests to nexusd from a browser. Prints the URL to "
        "open (with a one-time token for this run) on start.",
    )
    parser.add_argument("--socket", help="the daemon's socket (default: $NEXUS_SOCKET, then the per-user runtime dir)")
    parser.add_argument("--port", type=int, default=8765, help="TCP port (default 8765; 0 picks a free one)")
    parser.add_argument(
        "--listen",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1); any non-loopback address needs --cert/--key",
    )
    parser.add_argument(
        "--unix", metavar="PATH", help="listen on a Unix socket (0600) for a reverse proxy instead of TCP"
    )
    parser.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="another Host header to accept (the name a proxy or certificate uses); repeatable",
    )
    parser.add_argument("--cert", help="TLS certificate (PEM), with --key")
    parser.add_argument("--key", help="TLS private key (PEM), with --cert")
    parser.add_argument("--qr", action="store_true", help="also print the URL as a QR code in the terminal")
    parser.add_argument("--name", default="nexus-web", help="how this UI names itself in 'answered by'")
    args = parser.parse_args(argv)
    if bool(args.cert) != bool(args.key):
        parser.error("--cert and --key go together")
    if not args.unix and not is_loopback(args.listen) and not args.cert:
        parser.error(
            f"--listen {args.listen} is not loopback: give --cert and --key (TLS), or use a reverse proxy (--unix)"
        )
    if not args.unix and args.listen in ("0.0.0.0", "::") and not args.host:
        parser.error(
            f"--listen {args.listen} needs --host NAME:PORT: the exact name browsers will use (DNS "
            "rebinding protection accepts no other)"
        )
    if args.unix and not args.host:
        args.host = ["localhost"]
    if not 0 <= args.port <= 65535:
        parser.error("--port must be 0..65535")
    return args


def _qr(url: str) -> None:
    try:
        import segno
    except ImportError:
        print("nexus-web: --qr needs the segno package", file=sys.stderr)
        return
    segno.make(url, error="l").terminal(compact=True)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    args = parse_args(argv)
    sock = bind(args.listen, args.port, args.unix)
    port = 0 if args.unix else sock.getsockname()[1]
    tls = bool(args.cert)
    access = Access(hosts=allowed_hosts("" if args.unix else args.listen, port, args.host), tls=tls)
    hub = Hub(locations.socket_path(args.socket), name=args.name)
    app = build_app(hub, access)
    config = uvicorn.Config(
        app,
        log_level="warning",
        ssl_certfile=args.cert,
        ssl_keyfile=args.key,
        proxy_headers=False,
        server_header=False,
        date_header=False,
        lifespan="off",
        access_log=False,
        timeout_graceful_shutdown=2,  # open event streams must not hold a stop
    )
    server = uvicorn.Server(config)
    if args.unix:
        print(f"nexus-web: listening on {args.unix}; the proxy must send Host {args.host[0]}", flush=True)
        url = f"{'https' if tls else 'http'}://{args.host[0]}/?token={access.token}"
    else:
        shown = f"[{args.listen}]" if ":" in args.listen else args.listen
        url = f"{access.scheme}://{shown}:{port}/?token={access.token}"
        if not is_loopback(args.listen):
            print(
                f"nexus-web: WARNING: listening on {args.listen}, reachable from other machines; anyone with "
                "this link can answer your agents",
                file=sys.stderr,
                flush=True,
            )
    print(f"nexus-web: open {url}", flush=True)
    if args.qr:
        _qr(url)

    async def serve() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(hub.run)
            await server.serve(sockets=[sock])
            tg.cancel_scope.cancel()

    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        if args.unix:
            with contextlib.suppress(OSError):
                os.unlink(args.unix)


if __name__ == "__main__":
    main()
