"""nexus-web's undo page (``/undo``): past calls that could change a workspace, each call's diff, and rewind.

Its routes are built here and added to the app's by ``build_app`` (one line there), with the app's own
guards: reading needs a signed-in session, a rewind needs the session's CSRF token, an Origin and JSON,
as every other change does. The daemon refuses ``history`` and ``rewind`` from an agent's process tree,
whatever the page does. Every string from the daemon is escaped here (``render``) and set with
``textContent`` by ``undo.js``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from nexus_clients.web import render
from nexusd import protocol

Handler = Callable[[Request], Awaitable[Response]]
Relay = Callable[[Callable[[], Awaitable[Any]], Callable[[Any], dict[str, Any]]], Awaitable[Response]]


def entry_view(e: protocol.HistoryEntry) -> dict[str, Any]:
    return {
        "id": e.id,
        "time": e.time,
        "kind": e.kind,
        "checkpoint": e.tree is not None,
        "workspace": render.line(e.workspace, 1000),
        "session": render.line(e.session, 200),
        "provider": render.line(e.provider, 40),
        "tool": render.line(e.tool, 200),
        "summary": render.line(e.summary, 500),
        "note": render.line(e.note, 500),
        "added": e.added,
        "changed": e.changed,
        "deleted": e.deleted,
        "plus": e.plus,
        "minus": e.minus,
        "files": [{"path": render.line(f.path, 1000), "status": f.status} for f in e.files[:500]],
    }


def routes(
    *,
    page: Callable[[Request, str], Response | None],
    query: Callable[[protocol._Msg], Awaitable[Any]],
    relay: Relay,
    needs_session: Callable[[Handler], Handler],
    needs_csrf: Callable[[Handler], Handler],
    read_json: Callable[[Request], Awaitable[Any]],
    static: Callable[[str], bytes],
) -> list[Route]:
    """``page(request, html)``: the page with the session's CSRF token, or None when not signed in."""

    async def undo_page(request: Request) -> Response:
        shown = page(request, static("undo.html").decode())
        return shown if shown is not None else PlainTextResponse("not signed in: open nexus-web's link", 401)

    async def undo_js(request: Request) -> Response:
        return Response(static("undo.js"), media_type="text/javascript")

    async def history(request: Request) -> Response:
        return await relay(
            lambda: query(protocol.History(limit=500)),
            lambda r: {"entries": [entry_view(e) for e in r.entries]},
        )

    async def show(request: Request) -> Response:
        try:
            cid = int(request.query_params.get("id") or "")
        except ValueError:
            return JSONResponse({"error": "bad request: id must be a number"}, status_code=400)
        return await relay(
            lambda: query(protocol.History(id=cid, diff=True)),
            lambda r: {"entry": entry_view(r.entries[0]), "diff": render.block(r.diff or ""), "cut": r.truncated},
        )

    async def rewind(request: Request) -> Response:
        try:
            body = await read_json(request)
            if not isinstance(body, dict) or not set(body) <= {"id", "dry_run", "force"} or "id" not in body:
                raise ValueError("expected {id, dry_run?, force?}")
            if type(body["id"]) is not int or not all(type(body.get(k, False)) is bool for k in ("dry_run", "force")):
                raise ValueError("id is a number, dry_run and force are true or false")
        except ValueError as e:
            return JSONResponse({"error": f"bad request: {e}"}, status_code=400)
        msg = protocol.Rewind(id=body["id"], dry_run=body.get("dry_run", False), force=body.get("force", False))
        return await relay(
            lambda: query(msg),
            lambda r: {
                "ok": r.ok,
                "detail": render.line(r.detail, 1000),
                "changes": [[a, render.line(p, 1000)] for a, p in r.changes[:2000]],
                "conflicts": [render.line(p, 1000) for p in r.conflicts[:2000]],
                "errors": [render.line(x, 1000) for x in r.errors[:200]],
                "rescue": r.rescue,
            },
        )

    return [
        Route("/undo", undo_page, methods=["GET"]),
        Route("/undo.js", undo_js, methods=["GET"]),
        Route("/api/undo/history", needs_session(history), methods=["GET"]),
        Route("/api/undo/show", needs_session(show), methods=["GET"]),
        Route("/api/undo/rewind", needs_csrf(rewind), methods=["POST"]),
    ]
