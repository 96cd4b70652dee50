"""Tell a person an ask is waiting when they are not looking at a UI: desktop notifications and webhooks.

Configured by ``[notify]`` (``NotifySpec``; off by default). The daemon calls ``asked`` when a request
starts pending and ``resolved`` when it ends; ``run`` sends. What is sent is bounded by design:

- grouping and rate limits: asks that arrive within ``group_window`` make one notification, and a
  channel sends at most one per ``min_interval`` (a burst of 50 asks is one notification; what is still
  pending when the interval ends is summed up in the next one, and nothing is sent for what was
  answered meanwhile);
- no secrets leave the machine: webhooks carry no command text unless ``include_command`` is set, and
  every text is passed through the redaction patterns first (tokens, keys, passwords, credentials in
  URLs, long opaque strings, plus the user's own ``redact`` patterns);
- never an answer by a link: links point to nexus-web's page (``web_url``), which needs its session;
  the desktop notification's only answer is *Deny* (and *Hold*, which only delays the deny, up to what
  the agent itself waits). No *Allow* action: notification daemons let any
  process of the user invoke a notification's actions (``dunstctl action``, ``makoctl invoke``), so an
  Allow button would be a way for an agent to approve itself. A deny only ever narrows.

The notification server may restart (a desktop session's daemon crashes, a person switches servers): its
unique bus name changes, so the daemon follows ``NameOwnerChanged`` from the bus itself, takes the new
owner's signals from then on (and no one else's), forgets the old server's notification ids (the new server
numbers its own), and shows what still waits again.

Sending never raises and never blocks the event loop: D-Bus is asynchronous (jeepney), webhooks run in
a worker thread with a timeout, and every failure is logged and dropped.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog

from nexusd import protocol as p
from nexusd.core.policy.policy import NotifySpec
from nexusd.daemon.audit import summarize

log = structlog.get_logger("nexusd.notify")

APP_NAME = "nexusd"
MAX_LISTED = 5  # items named in one notification; the rest are counted
WEBHOOK_TIMEOUT = 10.0
NOTIFICATIONS = "org.freedesktop.Notifications"
NOTIFICATIONS_PATH = "/org/freedesktop/Notifications"

# Secrets by shape. Values after a telling key name are blanked (the name, in group "keep", stays), and
# so is any long opaque string: a notification loses nothing a person needs by that.
SECRET_PATTERNS: tuple[str, ...] = (
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)",
    r"\bAKIA[0-9A-Z]{16}\b",
    r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    r"\bsk-(ant-)?[A-Za-z0-9_-]{16,}",
    r"\bAIza[0-9A-Za-z_-]{30,}",
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
    r"(?i)(?P<keep>\b(bearer|basic|token)\s+)[A-Za-z0-9._~+/=-]{8,}",
    r"(?P<keep>://)[^/\s:@]+:[^/\s@]+(?=@)",
    r"(?i)(?P<keep>(^|\s)--?(password|passwd|token|secret|api-key|apikey)[= ])\S+",
    r"(?P<keep>(^|\s)-p)\S{6,}",
    r"(?i)(?P<keep>\b(passwd|password|secret|apikey|api[_-]key|access[_-]key|token|credential)s?[\"']?\s*[=:]\s*)"
    r"[\"']?[^\s\"'&]+",
    r"[A-Za-z0-9+_=-]{32,}",
)
REDACTED = "[redacted]"


def redactor(extra: tuple[str, ...] = ()) -> Callable[[str], str]:
    patterns = [re.compile(x) for x in (*SECRET_PATTERNS, *extra)]

    def keep(m: re.Match[str]) -> str:
        return (m.groupdict().get("keep") or "") + REDACTED

    def redact(text: str) -> str:
        for pat in patterns:
            text = pat.sub(keep, text)
        return text

    return redact


@dataclass(frozen=True)
class Ask:
    id: str
    provider: str
    tool: str
    session: str
    workspace: str
    summary: str  # escaped, not yet redacted
    deadline: float


def ask_of(rid: str, call: p.CallInfo, deadline: float) -> Ask:
    return Ask(rid, call.provider, call.tool, call.session, call.workspace or call.cwd, summarize(call.input), deadline)


@dataclass
class Batcher:
    """Grouping and rate limiting, with the clock passed in (pure; tested with a fake clock)."""

    group_window: float
    min_interval: float
    waiting: dict[str, Ask] = field(default_factory=dict)  # asked, not yet in a notification
    first_at: float | None = None
    last_sent: float = float("-inf")

    def add(self, ask: Ask, now: float) -> None:
        self.waiting[ask.id] = ask
        if self.first_at is None:
            self.first_at = now

    def drop(self, rid: str) -> None:
        self.waiting.pop(rid, None)
        if not self.waiting:
            self.first_at = None

    def due_at(self) -> float | None:
        if self.first_at is None:
            return None
        return max(self.first_at + self.group_window, self.last_sent + self.min_interval)

    def take(self, now: float) -> list[Ask]:
        """The asks to notify about now (oldest first), or [] when it is not time yet."""
        due = self.due_at()
        if due is None or now < due:
            return []
        out = list(self.waiting.values())
        self.waiting.clear()
        self.first_at = None
        self.last_sent = now
        return out


def texts(asks: list[Ask], *, with_command: bool, redact: Callable[[str], str]) -> tuple[str, list[str]]:
    """(title, lines): what any channel says about a batch."""
    n = len(asks)
    title = "nexusd: an agent is waiting for you" if n == 1 else f"nexusd: {n} agent requests waiting"
    lines = []
    for a in asks[:MAX_LISTED]:
        where = a.workspace.rstrip("/").rsplit("/", 1)[-1] or a.workspace
        head = f"{a.tool} from {a.provider} in {where}"
        lines.append(redact(f"{head}: {a.summary}" if with_command else head))
    if n > MAX_LISTED:
        lines.append(f"and {n - MAX_LISTED} more")
    return title, lines


def webhook_payload(spec: NotifySpec, asks: list[Ask], redact: Callable[[str], str]) -> tuple[bytes, dict[str, str]]:
    """The body and headers for ``spec.webhook_format``; a link to nexus-web, never an answer."""
    title, lines = texts(asks, with_command=spec.include_command, redact=redact)
    link = spec.web_url
    text = "\n".join(lines)
    headers = {"Content-Type": "application/json", "User-Agent": "nexusd"}
    if spec.webhook_format == "ntfy":  # publish as a message body with ntfy's headers
        headers = {
            "Content-Type": "text/plain; charset=utf-8",
            "Title": title,
            "Tags": "robot",
            "Priority": "high",
            "User-Agent": "nexusd",
        }
        if link:
            headers["Click"] = link
        return text.encode(), headers
    if spec.webhook_format == "slack":
        body: dict[str, Any] = {"text": f"*{title}*\n{text}" + (f"\n<{link}|Open the nexus-web inbox>" if link else "")}
    elif spec.webhook_format == "discord":
        body = {"content": f"**{title}**\n{text}" + (f"\n{link}" if link else ""), "allowed_mentions": {"parse": []}}
    else:
        body = {
            "event": "nexusd.ask",
            "title": title,
            "text": text,
            "count": len(asks),
            "link": link,
            "items": [
                {
                    "provider": a.provider,
                    "tool": a.tool,
                    "workspace": redact(a.workspace),
                    "deadline": a.deadline,
                    **({"summary": redact(a.summary)} if spec.include_command else {}),
                }
                for a in asks[:MAX_LISTED]
            ],
        }
    return json.dumps(body).encode(), headers


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    import urllib.request  # here, not at start: with http.client and email it is ~10 % of the daemon's start-up

    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    opener = urllib.request.build_opener(urllib.request.HTTPRedirectHandler())  # no proxy surprises beyond env
    with opener.open(req, timeout=WEBHOOK_TIMEOUT) as resp:
        return int(resp.status)


class Desktop:
    """freedesktop notifications over the session bus (jeepney), with a Deny action where supported."""

    def __init__(
        self,
        on_deny: Callable[[str], None],
        web_url: Callable[[], str | None],
        on_hold: Callable[[str], None] | None = None,
        reshow: Callable[[list[Ask]], None] | None = None,
    ) -> None:
        self.on_deny = on_deny
        self.on_hold = on_hold
        self.reshow = reshow
        self.web_url = web_url
        self.asks: dict[str, Ask] = {}  # shown and not withdrawn: shown again by a new server
        self.caps_stale = False
        self.router: Any = None
        self.server: str | None = None  # the notification server's unique bus name
        self.actions = False
        self.shown: dict[int, list[str]] = {}  # notification id -> request ids
        self.early: dict[int, str] = {}  # actions on ids not shown yet (a click before Notify's reply)
        self.queue: Any = None
        self._filter: Any = None
        self._owner_filter: Any = None
        self._cm: Any = None

    async def _connect(self) -> bool:
        if self.router is not None:
            return True
        from jeepney import DBusAddress, MatchRule, message_bus, new_method_call
        from jeepney.io.asyncio import Proxy, open_dbus_router

        cm = open_dbus_router(bus="SESSION")
        router = await cm.__aenter__()
        try:
            bus = Proxy(message_bus, router)
            (self.server,) = await bus.GetNameOwner(NOTIFICATIONS)
            addr = DBusAddress(NOTIFICATIONS_PATH, bus_name=NOTIFICATIONS, interface=NOTIFICATIONS)
            reply = await router.send_and_get_reply(new_method_call(addr, "GetCapabilities"))
            self.actions = "actions" in (reply.body[0] if reply.body else [])
            self.match = MatchRule(type="signal", interface=NOTIFICATIONS, path=NOTIFICATIONS_PATH)
            # listening before the first Notify: a click that comes at once must not be lost
            self._filter = router.filter(self.match, bufsize=64)
            self.queue = self._filter.__enter__()
            await bus.AddMatch(self.match)
            # the server's restart: the bus itself says who owns the name now (same queue, one listener)
            owner = MatchRule(
                type="signal",
                sender="org.freedesktop.DBus",
                interface="org.freedesktop.DBus",
                path="/org/freedesktop/DBus",
                member="NameOwnerChanged",
            )
            owner.add_arg_condition(0, NOTIFICATIONS)
            self._owner_filter = router.filter(owner, queue=self.queue)
            self._owner_filter.__enter__()
            await bus.AddMatch(owner)
        except BaseException:
            await cm.__aexit__(None, None, None)
            raise
        self.router, self._cm, self.addr = router, cm, addr
        return True

    async def close(self) -> None:
        for f in (self._filter, self._owner_filter):
            if f is not None:
                with contextlib.suppress(Exception):
                    f.__exit__(None, None, None)
        self._filter = self._owner_filter = None
        if self._cm is not None:
            cm, self._cm, self.router = self._cm, None, None
            with contextlib.suppress(Exception):
                await cm.__aexit__(None, None, None)

    async def show(self, asks: list[Ask], redact: Callable[[str], str]) -> None:
        from jeepney import new_method_call

        await self._connect()
        if self.caps_stale:  # a new server: what it supports is asked again
            reply = await self.router.send_and_get_reply(new_method_call(self.addr, "GetCapabilities"))
            self.actions = "actions" in (reply.body[0] if reply.body else [])
            self.caps_stale = False
        title, lines = texts(asks, with_command=True, redact=redact)
        body = "\n".join(lines).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        actions: list[str] = []
        if self.actions:
            if self.web_url():
                actions += ["default", "Open inbox"]
            if len(asks) == 1:
                actions += ["deny", "Deny"]
                if self.on_hold is not None:
                    actions += ["hold", "Hold 1 min"]
        hints = {"urgency": ("y", 2), "category": ("s", "im.received")}
        msg = new_method_call(
            self.addr, "Notify", "susssasa{sv}i", (APP_NAME, 0, "dialog-question", title, body, actions, hints, 0)
        )
        reply = await self.router.send_and_get_reply(msg)
        nid = int(reply.body[0])
        self.shown[nid] = [a.id for a in asks]
        self.asks.update((a.id, a) for a in asks)
        early = self.early.pop(nid, None)
        if early is not None:  # clicked before the reply to Notify reached us
            self._act(nid, early)

    async def withdraw(self, rid: str) -> None:
        """Close a notification once none of its requests is waiting (they were answered elsewhere)."""
        from jeepney import new_method_call

        self.asks.pop(rid, None)
        for nid, ids in list(self.shown.items()):
            if rid in ids:
                ids.remove(rid)
                if not ids:
                    del self.shown[nid]
                    if self.router is not None:
                        with contextlib.suppress(Exception):
                            await self.router.send_and_get_reply(
                                new_method_call(self.addr, "CloseNotification", "u", (nid,))
                            )

    async def listen(self) -> None:
        """Deny / open on the server's signals; a signal from any other sender is ignored."""
        from jeepney import HeaderFields

        queue = self.queue
        while True:
            msg = await queue.get()
            sender = msg.header.fields.get(HeaderFields.sender)
            if sender == "org.freedesktop.DBus" and msg.header.fields.get(HeaderFields.member) == "NameOwnerChanged":
                name, _old, new = msg.body
                if name == NOTIFICATIONS:
                    self.owner_changed(new or None)
                continue
            if sender != self.server:
                continue  # not the notification server: anyone can emit a signal with this name
            member = msg.header.fields.get(HeaderFields.member)
            if member == "ActionInvoked":
                nid, key = int(msg.body[0]), msg.body[1]
                if nid in self.shown:
                    self._act(nid, key)
                elif len(self.early) < 64:
                    self.early[nid] = key  # ours, perhaps, before Notify's reply: show() applies it
            elif member == "NotificationClosed":
                self.shown.pop(int(msg.body[0]), None)

    def owner_changed(self, new: str | None) -> None:
        """The notification server went away (``new`` None) or another took its name: only the new owner's
        signals count from now on, the old server's ids mean nothing (the new one numbers its own), and
        what still waits is shown again by the new server."""
        if new == self.server:
            return
        log.info("notification server changed", old=self.server, new=new)
        self.server = new
        self.shown.clear()
        self.early.clear()
        self.caps_stale = True
        if new is None:
            return  # no server for now: what waits is shown when one takes the name
        waiting = list(self.asks.values())
        self.asks.clear()
        if waiting and self.reshow is not None:
            self.reshow(waiting)

    def _act(self, nid: int, key: str) -> None:
        ids = self.shown.get(nid, [])
        if key == "deny" and len(ids) == 1:
            self.on_deny(ids[0])
        elif key == "hold" and len(ids) == 1 and self.on_hold is not None:
            self.on_hold(ids[0])
        elif key == "default":
            self.open_inbox()

    def open_inbox(self) -> None:
        url, opener = self.web_url(), shutil.which("xdg-open")
        if url and opener:
            with contextlib.suppress(OSError):
                subprocess.Popen(
                    [opener, url],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )


class PersonNotifier:
    """One per daemon. ``spec`` is read at each use, so a policy reload takes effect at once."""

    def __init__(
        self,
        spec: Callable[[], NotifySpec],
        on_deny: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        on_hold: Callable[[str], None] | None = None,
    ) -> None:
        self.spec = spec
        self.clock = clock
        self.desktop_batch = Batcher(2.0, 30.0)
        self.webhook_batch = Batcher(2.0, 30.0)
        self.desktop = Desktop(on_deny, lambda: self.spec().web_url, on_hold, self._reshow)
        self._wake = anyio.Event()
        self._withdraw: list[str] = []
        self.sent = 0  # notifications sent, all channels (status, tests)
        self.failures = 0

    @property
    def waits(self) -> bool:
        """Whether an ask with no UI connected should wait for a person reached this way."""
        return self.spec().enabled

    def asked(self, rid: str, call: p.CallInfo, deadline: float) -> None:
        """Never raises: a notification problem must not cost the request its pending state."""
        try:
            self._asked(rid, call, deadline)
        except Exception:
            log.exception("notification not queued")

    def _asked(self, rid: str, call: p.CallInfo, deadline: float) -> None:
        spec = self.spec()
        if not spec.enabled:
            return
        ask, now = ask_of(rid, call, deadline), self.clock()
        for on, batch in ((spec.desktop, self.desktop_batch), (spec.webhook is not None, self.webhook_batch)):
            if on:
                batch.group_window, batch.min_interval = spec.group_window, spec.min_interval
                batch.add(ask, now)
        self._wake.set()

    def _reshow(self, asks: list[Ask]) -> None:
        """A new notification server: what the old one showed and still waits is shown again."""
        now = self.clock()
        for a in asks:
            self.desktop_batch.add(a, now)
        self._wake.set()

    def resolved(self, rid: str) -> None:
        self.desktop_batch.drop(rid)
        self.webhook_batch.drop(rid)
        if self.desktop.shown:
            self._withdraw.append(rid)
            self._wake.set()

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            while True:
                dues = [d for d in (self.desktop_batch.due_at(), self.webhook_batch.due_at()) if d is not None]
                wait = max(0.0, min(dues) - self.clock()) if dues else None
                with anyio.move_on_after(wait if wait is not None else float("inf")):
                    await self._wake.wait()
                self._wake = anyio.Event()
                while self._withdraw:
                    tg.start_soon(self._guard, "desktop withdraw", self.desktop.withdraw(self._withdraw.pop()))
                now = self.clock()
                spec = self.spec()
                redact = redactor(spec.redact)
                if asks := self.desktop_batch.take(now):
                    tg.start_soon(self._guard, "desktop", self._show_desktop(asks, redact))
                if asks := self.webhook_batch.take(now):
                    tg.start_soon(self._guard, "webhook", self._send_webhook(spec, asks, redact))

    async def _show_desktop(self, asks: list[Ask], redact: Callable[[str], str]) -> None:
        first = self.desktop.router is None
        await self.desktop.show(asks, redact)
        self.sent += 1
        if first:
            self._tg.start_soon(self._guard, "desktop signals", self.desktop.listen())

    async def _send_webhook(self, spec: NotifySpec, asks: list[Ask], redact: Callable[[str], str]) -> None:
        assert spec.webhook is not None
        body, headers = webhook_payload(spec, asks, redact)
        status = await anyio.to_thread.run_sync(_post, spec.webhook, body, headers, abandon_on_cancel=True)
        if status >= 300:
            raise OSError(f"HTTP {status}")
        self.sent += 1

    async def _guard(self, what: str, coro: Any) -> None:
        try:
            await coro
        except Exception as e:  # a notification that fails costs the notification, never the daemon
            self.failures += 1
            log.warning("notification failed", channel=what, error=f"{type(e).__name__}: {e}"[:300])
            if what.startswith("desktop"):
                await self.desktop.close()
