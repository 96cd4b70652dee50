"""URLs of fetch-like calls: the domain a rule should see, and whether it reaches private addresses.

Normalisation follows what an HTTP client would really connect to: the host after the *last* ``@``
(``https://github.com@evil.io/`` goes to evil.io), lowercase, IDNA (punycode), no trailing dot, no
port. Numeric hosts are parsed the way browsers and libc do (``2130706433``, ``0x7f.1``, ``0177.0.0.1``
are all 127.0.0.1). No DNS is done: the core is pure, so names that resolve to private addresses
are caught only when they are well-known (``localhost``, ``*.internal``, ``metadata.google.internal``).
"""

from __future__ import annotations

import functools
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


# ---------------------------------------------------------------------- cloud metadata and link-local addresses

# Refused in every mode, for every tool (``Flag.METADATA_ADDRESS``): instance metadata services hand out the
# machine's cloud credentials to whoever asks. Link-local ranges whole (169.254.169.254 AWS/GCP/Azure/OCI,
# 169.254.170.2 ECS task roles, fe80::/10), AWS's IPv6 service, Alibaba's, Oracle's legacy address.
_METADATA_NETS = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::254/128"),
    ipaddress.ip_network("100.100.100.200/32"),
    ipaddress.ip_network("192.0.0.192/32"),
)
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "metadata.azure.internal",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
        "metadata.platformequinix.com",
    }
)
# wildcard DNS services that answer any name with the address spelled in it (169.254.169.254.nip.io)
_IP_IN_NAME = (".nip.io", ".sslip.io", ".xip.io", ".traefik.me", ".localtest.me")


def is_metadata_ip(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A link-local or cloud metadata address, also inside an IPv6 spelling of an IPv4 one (mapped, 6to4,
    NAT64, IPv4-compatible, Teredo's client)."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner: list[ipaddress.IPv4Address] = [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
        if ip.teredo is not None:
            inner.append(ip.teredo[1])
        if ip in ipaddress.ip_network("64:ff9b::/96") or ip in ipaddress.ip_network("::/96"):
            inner.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if any(is_metadata_ip(a) for a in inner):
            return True
    return any(ip.version == n.version and ip in n for n in _METADATA_NETS)


def metadata_host(host: str) -> bool:
    """Whether a normalised host (``normalize_host``/``netpolicy.normalize_name``) is a metadata service."""
    if ":" in host or host[:1].isdigit():
        try:
            return is_metadata_ip(ipaddress.ip_address(host))
        except ValueError:
            pass
    if host in METADATA_NAMES:
        return True
    for suffix in _IP_IN_NAME:
        if host.endswith(suffix):
            labels = host[: -len(suffix)].split(".")
            last = labels[-1]
            spellings = [".".join(labels[-4:]), ".".join(last.split("-")[-4:])]
            if re.fullmatch(r"[0-9a-f]{8}", last):
                spellings.append("0x" + last)  # nip.io's hex form: a9fea9fe.nip.io
            for cand in spellings:
                ip4 = parse_ipv4(cand)
                if ip4 is not None and (cand.count(".") == 3 or cand.startswith("0x")) and is_metadata_ip(ip4):
                    return True
    return False


_SCHEME_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:/+([^/?#\s'\"`<>]*)")
_DEV_NET = re.compile(r"/dev/(?:tcp|udp)/([^/\s]+)")
_HOSTISH = re.compile(r"[A-Za-z0-9.\-_\[\]:%]+")


def _host_of(authority: str) -> str | None:
    """The normalised host of ``[user@]host[:port]`` (any IP spelling), or None."""
    a = authority.rsplit("@", 1)[-1]
    if not a:
        return None
    if a.startswith("["):
        end = a.find("]")
        a = a[1:end] if end > 0 else a[1:]
    elif a.count(":") == 1:
        a = a.split(":", 1)[0]
    elif ":" in a:  # a bare IPv6 address (a port needs brackets)
        pass
    a = a.split("%", 1)[0]
    if ":" in a:
        try:
            ip6 = ipaddress.IPv6Address(a)
        except ValueError:
            return None
        mapped = ip6.ipv4_mapped
        return str(mapped) if mapped is not None else str(ip6)
    name, _ = normalize_host(a)
    if not name:
        return None
    ip4 = parse_ipv4(name)
    return str(ip4) if ip4 is not None else name


def hosts_in_word(word: str) -> tuple[str, ...]:
    """``_hosts_in_word``, remembered for short words (the same ones come back call after call)."""
    return _hosts_cached(word) if len(word) <= 256 else _hosts_in_word(word)


def _hosts_in_word(word: str) -> tuple[str, ...]:
    """Hosts a shell word may name for a program that connects (curl, wget, nc, ssh, git, python ...): every
    ``scheme://host`` inside it, ``/dev/tcp/host/port``, and the word itself read as ``[user@]host[:port][/path]``
    (after an ``--option=``), normalised (``0xa9fea9fe``, ``2852039166``, ``[::ffff:a9fe:a9fe]`` are
    169.254.169.254). A plain word yields its name too: the caller matches hosts against refusals only."""
    if len(word) > 4096:
        word = word[:4096]
    out: list[str] = []
    for m in _SCHEME_AUTHORITY.finditer(word):
        h = _host_of(m.group(1))
        if h and h not in out:
            out.append(h)
    for m in _DEV_NET.finditer(word):
        h = _host_of(m.group(1))
        if h and h not in out:
            out.append(h)
    bare = word
    if bare.startswith("-") and "=" in bare:
        bare = bare.split("=", 1)[1]
    elif bare.startswith("-") and len(bare) > 2 and bare[1] != "-":
        bare = bare[2:]  # -x169.254.169.254 (curl -x, nc -s ...): an option's glued value
    if "://" not in bare:
        bare = bare.rsplit("@", 1)[-1]
        if bare.startswith("["):
            end = bare.find("]")
            head = bare[: end + 1] if end > 0 else bare
        else:
            head = re.split(r"[/?#]", bare, maxsplit=1)[0]
            if head.count(":") == 1:
                head = head.split(":", 1)[0]  # host:port, or scp's host:path
        if head and _HOSTISH.fullmatch(head):
            h = _host_of(head)
            if h and h not in out:
                out.append(h)
    # addresses inside a compound value: curl --resolve host:80:ADDR, --connect-to ::ADDR:80, a, b lists
    for piece in _PIECES.split(word):
        if piece and piece != word and piece[0].isdigit() and ("." in piece or piece[:2].lower() == "0x"):
            ip4 = parse_ipv4(piece.rstrip("."))
            if ip4 is not None and str(ip4) not in out:
                out.append(str(ip4))
    return tuple(out)


_PIECES = re.compile(r"[:,;=@/\[\]\s]+")
_hosts_cached = functools.lru_cache(maxsize=4096)(_hosts_in_word)
