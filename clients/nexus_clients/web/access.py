"""Who may use the web inbox: the start token, session cookies, CSRF, Host and Origin checks.

The threat is any other program on the machine or in the person's browser: an agent's own processes
(same uid, loopback reachable), a web page in another tab (CSRF, DNS rebinding), a proxy or history
that keeps URLs. So:

- a random token per start, printed once to the person's terminal, is the only way in; it is traded
  for a session cookie (HttpOnly, SameSite=Strict, Secure over TLS) and a redirect that drops it from
  the address bar; nothing without a live session reads or answers anything (401);
- every request's ``Host`` must be one this server answers to (DNS rebinding gives a hostile name);
- any ``Origin`` must be this server's own, and every change (POST) must carry it plus the session's
  CSRF token in a header that a cross-site form cannot send; no CORS headers are ever sent;
- every response carries a strict Content-Security-Policy (scripts only from this origin, no inline
  code), no framing, no referrer and no caching.
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

COOKIE = "nexus_web"
CSRF_HEADER = "x-nexus-csrf"
MAX_SESSIONS = 64
SESSION_IDLE = 12 * 3600.0  # a session unused this long is forgotten

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allowed_hosts(listen: str, port: int, extra: list[str]) -> frozenset[str]:
    """The exact ``Host`` header values accepted (lower case, with the port unless it is implied)."""
    names = {"127.0.0.1", "localhost", "[::1]"} if is_loopback(listen) else set()
    if listen and listen not in ("0.0.0.0", "::"):
        names.add(f"[{listen}]" if ":" in listen else listen)
    hosts = {f"{n}:{port}" for n in names} if port else set()
    for name in extra:  # --host: a name a reverse proxy or a certificate uses; give it with its port if any
        hosts.add(name.lower())
    return frozenset(h.lower() for h in hosts)


@dataclass
class Session:
    csrf: str
    last_used: float


@dataclass
class Access:
    """The per-start token and the live sessions; all in memory, gone when nexus-web stops."""

    hosts: frozenset[str]
    tls: bool = False
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    sessions: OrderedDict[str, Session] = field(default_factory=OrderedDict)

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    def host_ok(self, host: str | None) -> bool:
        return host is not None and host.lower() in self.hosts

    def origin_ok(self, origin: str | None, host: str) -> bool:
        """An Origin, when a browser sends one, must be exactly this server as the browser reached it."""
        return origin is None or origin.lower() == f"{self.scheme}://{host.lower()}"

    def token_ok(self, token: str | None) -> bool:
        return token is not None and secrets.compare_digest(token.encode(), self.token.encode())

    def new_session(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        sid = secrets.token_urlsafe(32)
        self.sessions[sid] = Session(csrf=secrets.token_urlsafe(32), last_used=now)
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.popitem(last=False)
        return sid

    def session(self, sid: str | None, now: float | None = None) -> Session | None:
        if not sid:
            return None
        now = time.time() if now is None else now
        found = next((s for k, s in self.sessions.items() if secrets.compare_digest(k.encode(), sid.encode())), None)
        if found is None:
            return None
        if now - found.last_used > SESSION_IDLE:
            self.sessions = OrderedDict((k, s) for k, s in self.sessions.items() if s is not found)
            return None
        found.last_used = now
        return found

    def csrf_ok(self, session: Session, value: str | None) -> bool:
        return value is not None and secrets.compare_digest(value.encode(), session.csrf.encode())

    def cookie(self, sid: str) -> str:
        secure = "; Secure" if self.tls else ""
        return f"{COOKIE}={sid}; Path=/; HttpOnly; SameSite=Strict{secure}"
