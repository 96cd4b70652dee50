"""What a sandboxed command's network connection is, and how the policy decides it. Pure: no I/O, no DNS.

The egress proxy (``nexusd/sandbox/proxy.py``) hands every new connection's *requested* name here.
Matching cannot be fooled by spelling: the name is case-folded, its trailing dot removed, IDNA-encoded
(punycode), userinfo and port stripped (``nexusd.core.classify.urls.normalize_host`` does the host part,
the same normalisation WebFetch rules see). IP literals in every spelling (``127.1``, ``2130706433``,
``0x7f.0.0.1``, ``0177.0.0.1``, ``[::1]``, ``::ffff:127.0.0.1``) become the one canonical address and
match only an IP pattern naming that address: a wildcard never matches an IP, and an IP never matches
a name. No reverse lookup is ever done: the proxy resolves the name itself and connects to what it
resolved, so the address a command "meant" never enters the decision.

Order (the gate's, for domains): denied domains and deny rules refuse; allowed domains and allow rules
pass, on an allowed port; everything else, including an allowed domain on another port, is asked.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from nexusd.core.classify.urls import (
    is_metadata_ip,
    is_private_ip,
    metadata_host,
    normalize_host,
    parse_ipv4,
    parse_url,
)

DEFAULT_PORTS: tuple[int, ...] = (80, 443)
MAX_NAME = 253

NetDecision = Literal["allow", "deny", "ask"]


class TargetError(ValueError):
    """The requested host or port is not something a connection can honestly be matched on."""


@dataclass(frozen=True, slots=True)
class Target:
    """A normalised destination: ``host`` is a canonical IP address or a lowercase ASCII name."""

    host: str
    port: int
    is_ip: bool

    @property
    def display(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def canonical_ip(text: str) -> str | None:
    """The canonical form of an IP literal in any spelling a client would accept, or None for a name."""
    t = text.strip()
    if t.startswith("[") and t.endswith("]"):
        t = t[1:-1]
    if "%" in t:  # a zone id names an interface, never a remote host
        t = t.split("%", 1)[0]
    if ":" in t:
        try:
            ip6 = ipaddress.IPv6Address(t)
        except ValueError:
            return None
        mapped = ip6.ipv4_mapped
        return str(mapped) if mapped is not None else str(ip6)
    ip4 = parse_ipv4(t.rstrip("."))
    return str(ip4) if ip4 is not None else None


def normalize_name(raw: str) -> tuple[str, bool]:
    """(host, is_ip) for a requested host; userinfo (``user@``) is dropped. Raises TargetError."""
    if not isinstance(raw, str) or not raw or len(raw) > 1024:
        raise TargetError("no host, or an absurdly long one")
    if any(ord(c) < 0x21 or c == "\x7f" for c in raw):
        raise TargetError("the host contains control characters or spaces")
    host = raw.rsplit("@", 1)[-1]  # what a client connects to is after the last @
    ip = canonical_ip(host)
    if ip is not None:
        return ip, True
    if host.startswith("[") or ":" in host:
        raise TargetError(f"malformed IP literal {host!r}")
    name, problems = normalize_host(host)
    if name is None:
        raise TargetError(problems[0] if problems else f"{host!r} is not a host name")
    ip = canonical_ip(name)  # an IDNA or percent spelling of a number is still a number
    if ip is not None:
        return ip, True
    if not name or len(name) > MAX_NAME or any(not 0 < len(label) <= 63 for label in name.split(".")):
        raise TargetError(f"{name!r} is not a valid host name")
    return name, False


def make_target(host: str, port: int) -> Target:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise TargetError(f"port {port!r} is not 1-65535")
    name, is_ip = normalize_name(host)
    return Target(name, port, is_ip)


def split_authority(authority: str, default_port: int | None = None) -> Target:
    """``host:port``, ``[v6]:port``, ``user@host`` (CONNECT's request target, a URL's authority)."""
    a = authority.rsplit("@", 1)[-1]
    if a.startswith("["):
        end = a.find("]")
        if end < 0:
            raise TargetError("unterminated [IPv6] literal")
        host, rest = a[: end + 1], a[end + 1 :]
        if rest and not rest.startswith(":"):
            raise TargetError("garbage after the [IPv6] literal")
        port_text = rest[1:]
    elif a.count(":") == 1:
        host, port_text = a.split(":")
    elif ":" in a:
        raise TargetError("an IPv6 literal with a port must be bracketed")
    else:
        host, port_text = a, ""
    if port_text == "":
        if default_port is None:
            raise TargetError("no port")
        port = default_port
    elif port_text.isascii() and port_text.isdigit() and len(port_text) <= 5:
        port = int(port_text)
    else:
        raise TargetError(f"malformed port {port_text!r}")
    return make_target(host, port)


# ---------------------------------------------------------------------- patterns


@dataclass(frozen=True, slots=True)
class DomainPattern:
    """``example.com`` (exactly), ``*.example.com`` (strict subdomains), or an IP; optional ``:port``
    entries (``localhost:8080``) allow that port besides the default ones."""

    text: str
    host: str  # normalised, without the ``*.``
    wildcard: bool
    is_ip: bool
    ports: tuple[int, ...] = ()

    def matches(self, target: Target) -> bool:
        if target.is_ip or self.is_ip:
            return target.is_ip and self.is_ip and not self.wildcard and target.host == self.host
        if self.wildcard:
            return target.host.endswith("." + self.host)
        return target.host == self.host


def parse_pattern(text: str) -> DomainPattern:
    """Raises ValueError with a message naming the entry."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("a domain must be a non-empty string")
    raw = text.strip()
    ports: tuple[int, ...] = ()
    body = raw
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0:
            raise ValueError(f"{text!r}: unterminated [IPv6]")
        if raw[end + 1 :]:
            body, ports = raw[: end + 1], _ports(raw[end + 2 :] if raw[end + 1] == ":" else "x", text)
    elif raw.count(":") == 1:
        body, port_text = raw.split(":")
        ports = _ports(port_text, text)
    wildcard = body.startswith("*.")
    core = body[2:] if wildcard else body
    if "*" in core or "/" in core or "@" in core:
        raise ValueError(f"{text!r}: a domain is example.com, *.example.com or an IP address (optionally :port)")
    try:
        host, is_ip = normalize_name(core)
    except TargetError as e:
        raise ValueError(f"{text!r}: {e}") from None
    if wildcard and is_ip:
        raise ValueError(f"{text!r}: a wildcard cannot name IP addresses")
    if wildcard and "." not in host:
        raise ValueError(f"{text!r}: a wildcard needs at least a second-level domain (*.example.com)")
    return DomainPattern(raw, host, wildcard, is_ip, ports)


def _ports(text: str, entry: str) -> tuple[int, ...]:
    if not (text.isascii() and text.isdigit() and len(text) <= 5 and 0 < int(text) < 65536):
        raise ValueError(f"{entry!r}: malformed port")
    return (int(text),)


# ---------------------------------------------------------------------- decision


@dataclass(frozen=True, slots=True)
class NetRule:
    """A permission rule that speaks about domains (``WebFetch(domain:…)``), reduced to its pattern."""

    text: str
    kind: Literal["allow", "deny"]
    pattern: DomainPattern
    origin: str = ""


@dataclass(frozen=True, slots=True)
class NetPolicy:
    allowed: tuple[DomainPattern, ...] = ()
    denied: tuple[DomainPattern, ...] = ()
    ports: tuple[int, ...] = DEFAULT_PORTS
    rules: tuple[NetRule, ...] = ()  # deny and allow rules (policy and session), in that order of strength


@dataclass(frozen=True, slots=True)
class NetVerdict:
    decision: NetDecision
    reason: str
    rule: str | None = None
    suggestions: tuple[str, ...] = field(default=())


def suggestion(target: Target) -> str:
    """The rule an "always"/"session" answer learns: this exact host (a person may send the wildcard)."""
    return f"WebFetch(domain:{target.host})"


def wildcard_suggestion(target: Target) -> str | None:
    if target.is_ip or target.host.count(".") < 2:
        return None
    return "WebFetch(domain:*." + target.host.split(".", 1)[1] + ")"


def decide(target: Target, policy: NetPolicy) -> NetVerdict:
    """Metadata and link-local addresses, denied domains and deny rules refuse; then allowed domains and allow
    rules on an allowed port pass; else ask."""
    if metadata_host(target.host):
        return NetVerdict("deny", f"{target.host} is a cloud metadata or link-local address: refused always", None)
    for pat in policy.denied:
        if pat.matches(target):
            return NetVerdict("deny", f"{target.host} is a denied domain ({pat.text})", pat.text)
    for rule in policy.rules:
        if rule.kind == "deny" and rule.pattern.matches(target):
            return NetVerdict("deny", f"denied by rule {rule.text}", rule.text)
    sugg = tuple(s for s in (suggestion(target), wildcard_suggestion(target)) if s)[:1]
    hits: list[tuple[str, tuple[int, ...]]] = [(p.text, p.ports) for p in policy.allowed if p.matches(target)]
    hits += [(r.text, r.pattern.ports) for r in policy.rules if r.kind == "allow" and r.pattern.matches(target)]
    for text, extra in hits:
        if target.port in policy.ports or target.port in extra:
            return NetVerdict("allow", f"{target.host} is allowed ({text})", text)
    if hits:
        return NetVerdict(
            "ask",
            f"{target.host} is allowed ({hits[0][0]}) but not port {target.port} "
            f"(allowed ports: {', '.join(map(str, policy.ports))}); a person decides",
            None,
            (),
        )
    return NetVerdict("ask", f"{target.display} is not an allowed domain; a person decides", None, sugg)


def rules_from(texts: Iterable[tuple[str, str, str | None, str]]) -> tuple[NetRule, ...]:
    """(rule text, kind, domain, origin) of WebFetch domain rules; a domain that does not parse is skipped
    for allows and kept as an exact-name deny (fail closed)."""
    out: list[NetRule] = []
    for text, kind, domain, origin in texts:
        if kind not in ("allow", "deny") or not domain:
            continue
        try:
            pat = parse_pattern(domain)
        except ValueError:
            if kind != "deny":
                continue
            wild = domain.startswith("*.")
            pat = DomainPattern(domain, domain[2 if wild else 0 :].lower().strip("."), wild, False)
        out.append(NetRule(text, kind, pat, origin))  # type: ignore[arg-type]
    out.sort(key=lambda r: r.kind != "deny")
    return tuple(out)


def patterns(entries: Sequence[str]) -> tuple[DomainPattern, ...]:
    return tuple(parse_pattern(e) for e in entries)


def private_refusal(target: Target, addresses: Sequence[str], allowed: Sequence[DomainPattern]) -> str | None:
    """Why an allowed *name* must not be connected to what it resolved to, or None.

    A name that resolves to a loopback, private, link-local or otherwise non-global address (DNS rebinding:
    ``x.attacker.example`` -> 127.0.0.1 or the cloud metadata address) reaches the host's own services only
    when the name says it is local (``localhost``, ``*.local``, ``*.internal``, single labels ...) or an
    exact ``allowed_domains`` entry names it (an internal host a person listed); never through a wildcard
    or a learned rule. IP literals were matched as addresses already."""
    for a in addresses:  # a metadata service is never reached, whatever name leads there and whoever listed it
        try:
            if is_metadata_ip(ipaddress.ip_address(a.split("%", 1)[0])):
                return f"{target.host} resolves to {a}, a cloud metadata or link-local address: refused always"
        except ValueError:
            continue
    if target.is_ip:
        return None
    if parse_url(f"http://{target.host}/").private:
        return None
    if any(not p.wildcard and not p.is_ip and p.host == target.host for p in allowed):
        return None
    for a in addresses:
        try:
            ip = ipaddress.ip_address(a.split("%", 1)[0])
        except ValueError:
            return f"{target.host} resolved to {a!r}, which is not an address"
        if is_private_ip(ip):
            return (
                f"{target.host} resolves to {ip}, a private or local address (list the exact name in "
                "[sandbox.network] allowed_domains if it is an internal host)"
            )
    return None
