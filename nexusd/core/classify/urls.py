"""URLs of fetch-like calls: the domain a rule should see, and whether it reaches private addresses.

Normalisation follows what an HTTP client would really connect to: the host after the *last* ``@``
(``https://github.com@evil.io/`` goes to evil.io), lowercase, IDNA (punycode), no trailing dot, no
port. Numeric hosts are parsed the way browsers and libc do (``2130706433``, ``0x7f.1``, ``0177.0.0.1``
are all 127.0.0.1). No DNS is done: the core is pure, so names that resolve to private addresses
are caught only when they are well-known (``localhost``, ``*.internal``, ``metadata.google.internal``).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import unquote

import msgspec

URL_RE = re.compile(r"""\b(?:https?|ftp|file|gopher|ws|wss)://[^\s<>"'`)\]]+""", re.I)

_PRIVATE_NAMES = (
    "localhost",
    "localhost.localdomain",
    "metadata",
    "metadata.google.internal",
    "instance-data",
    "ip6-localhost",
    "ip6-loopback",
    "kubernetes.default",
)
_PRIVATE_SUFFIXES = (
    ".localhost",
    ".local",
    ".internal",
    ".localdomain",
    ".home.arpa",
    ".lan",
    ".intranet",
    ".nip.io",
    ".sslip.io",
    ".xip.io",
    ".localtest.me",
    ".lvh.me",
)
_PRIVATE_EXACT_EXTRA = ("localtest.me", "lvh.me")
_EXTRA_NETS = (ipaddress.ip_network("100.64.0.0/10"), ipaddress.ip_network("198.18.0.0/15"))


class UrlInfo(msgspec.Struct, frozen=True):
    url: str
    scheme: str
    domain: str | None  # normalised host; None when it cannot be determined
    private: bool = False  # loopback, private, link-local, metadata ...
    problems: tuple[str, ...] = ()  # why the URL is suspicious or could not be normalised


def parse_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """WHATWG IPv4 parsing: 1-4 parts, each decimal, 0x-hex or 0-octal; the last part fills the rest."""
    parts = host.split(".")
    if parts and parts[-1] == "":
        parts = parts[:-1]
    if not 1 <= len(parts) <= 4:
        return None
    nums: list[int] = []
    for p in parts:
        if not p:
            return None
        try:
            if p[:2].lower() == "0x":
                n = int(p[2:] or "0", 16)
            elif len(p) > 1 and p[0] == "0":
                n = int(p[1:], 8)
            else:
                if not p.isdigit():
                    return None
                n = int(p)
        except ValueError:
            return None
        nums.append(n)
    if any(n > 255 for n in nums[:-1]) or nums[-1] >= 256 ** (5 - len(nums)):
        return None
    value = 0
    for n in nums[:-1]:
        value = value * 256 + n
    value = value * 256 ** (5 - len(nums)) + nums[-1]
    return ipaddress.IPv4Address(value)


def is_private_ip(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        for inner in (ip.ipv4_mapped, ip.sixtofour):
            if inner is not None:
                return is_private_ip(inner)
        if ip.teredo is not None:
            return True
        if ip in ipaddress.ip_network("64:ff9b::/96"):  # NAT64 embeds an IPv4 address
            return is_private_ip(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if ip in ipaddress.ip_network("::/96"):  # IPv4-compatible (deprecated) ::127.0.0.1
            return True
    if any(ip in n for n in _EXTRA_NETS if n.version == ip.version):
        return True
    return not ip.is_global or ip.is_multicast or ip.is_reserved or ip.is_unspecified


def normalize_host(host: str) -> tuple[str | None, list[str]]:
    """Lowercase, percent-decode, IDNA-encode, strip the trailing dot. Returns (host, problems)."""
    problems: list[str] = []
    host = unquote(host)
    if any(c in host for c in "\\/@ \t\r\n%") or not host:
        return None, ["host contains characters an HTTP client would read differently"]
    host = host.rstrip(".").lower()
    if host.startswith("[") and host.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(host[1:-1].split("%", 1)[0])), problems
        except ValueError:
            return None, ["malformed IPv6 host"]
    try:
        host.encode("ascii")
    except UnicodeEncodeError:
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None, ["host is not valid IDNA"]
        problems.append(f"internationalised domain name, shown as {host}")
    if not re.fullmatch(r"[a-z0-9._\-]+", host):
        return None, ["host contains characters that are not allowed in a domain"]
    ip4 = parse_ipv4(host)
    if ip4 is not None:
        return str(ip4), problems
    return host, problems


def parse_url(url: str) -> UrlInfo:
    """Split a URL the way a client connects; never raises."""
    m = re.match(r"^\s*([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", url, re.S)
    if not m:
        return UrlInfo(url=url, scheme="", domain=None, problems=("not an absolute URL",))
    scheme, rest = m.group(1).lower(), m.group(2)
    problems: list[str] = []
    if scheme not in ("http", "https"):
        problems.append(f"scheme {scheme}: is not http(s)")
    raw_authority = re.split(r"[/?#]", rest.lstrip("/\\"), maxsplit=1)[0]
    if "\\" in raw_authority and "@" in raw_authority:
        # browsers read https://a.com\@b.io as host a.com, other HTTP clients as b.io: no domain for rules
        return UrlInfo(
            url=url,
            scheme=scheme,
            domain=None,
            problems=(*problems, "backslash and user info: clients disagree on the host"),
        )
    rest = rest.replace("\\", "/")  # browsers treat \ like / in special schemes
    if not rest.startswith("//"):
        return UrlInfo(url=url, scheme=scheme, domain=None, problems=(*problems, "no host in URL"))
    authority = re.split(r"[/?#]", rest[2:].lstrip("/"), maxsplit=1)[0]
    if "@" in authority:
        problems.append("URL carries user info before the host (the host is what follows the last @)")
        authority = authority.rsplit("@", 1)[1]
    if authority.startswith("["):
        end = authority.find("]")
        host = authority[: end + 1] if end > 0 else authority
        port = authority[end + 1 :] if end > 0 else ""
    else:
        host, _, port = authority.partition(":")
        port = ":" + port if port else ""
    if port and not re.fullmatch(r":\d{0,5}", port):
        problems.append("malformed port")
    domain, host_problems = normalize_host(host)
    problems.extend(host_problems)
    private = False
    if domain is not None:
        try:
            ip = ipaddress.ip_address(domain)
        except ValueError:
            ip = None
        if ip is not None:
            private = is_private_ip(ip)
        else:
            private = domain in _PRIVATE_NAMES or domain in _PRIVATE_EXACT_EXTRA or domain.endswith(_PRIVATE_SUFFIXES)
            if "." not in domain:
                private = True  # single-label names resolve through the local search domain
    if scheme == "file":
        private = True
    return UrlInfo(url=url, scheme=scheme, domain=domain, private=private, problems=tuple(problems))


def find_urls(text: str) -> list[str]:
    return URL_RE.findall(text)


def domain_matches(pattern: str, domain: str) -> bool:
    """``WebFetch(domain:PATTERN)``: exact, or ``*.example.com`` for subdomains (never example.com.evil.io).

    Both sides are normalised; a pattern or domain that does not normalise matches nothing.
    """
    wildcard = pattern.startswith("*.")
    pat, _ = normalize_host(pattern[2:] if wildcard else pattern)
    dom, _ = normalize_host(domain)
    if pat is None or dom is None or not pat or "*" in pat:
        return False
    if wildcard:
        return dom.endswith("." + pat)
    return dom == pat
