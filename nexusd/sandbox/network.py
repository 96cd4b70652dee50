"""The network section of a sandbox plan: which policy decides a connection, the environment.

``filtered`` networking: the command runs with ``--unshare-net`` (no route anywhere), and the daemon's
proxy listens on the sandbox's own loopback, on sockets the joiner made there from outside
(``netjoin.py``): the sandbox never names, and under the seccomp filter could not even create, a Unix
socket, and no process of ours runs inside for the network.
"""

from __future__ import annotations

from collections.abc import Iterable

from nexusd.core.netpolicy import NetPolicy, patterns, rules_from
from nexusd.policy.sandbox_settings import SandboxSettings

HTTP_PORT = 3128  # on the sandbox's own loopback (its own network namespace: no clash between sandboxes)
SOCKS_PORT = 1080
MANAGED_LAYERS = frozenset({"managed", "claude-managed"})


def _domain_rules(policy: object, managed_only: bool) -> list[tuple[str, str, str | None, str]]:
    out: list[tuple[str, str, str | None, str]] = []
    for rule in getattr(policy, "rules", ()) or ():
        if getattr(rule, "family", None) != "fetch" or not getattr(rule, "domain", None):
            continue
        if rule.kind == "allow" and (rule.project or (managed_only and rule.layer not in MANAGED_LAYERS)):
            continue  # a project only narrows the sandbox (trusted or not), or not the managed policy's domain
        if rule.kind in ("allow", "deny"):
            out.append((rule.text, rule.kind, rule.domain, rule.origin))
    return out


def has_rule_domains(policy: object, settings: SandboxSettings) -> bool:
    """Whether a WebFetch(domain:…) allow rule names a domain (which turns ``filtered`` on by itself)."""
    return any(k == "allow" for _, k, _, _ in _domain_rules(policy, settings.managed_domains_only))


def net_policy(
    policy: object, settings: SandboxSettings, session_allow: Iterable[str] = (), session_deny: Iterable[str] = ()
) -> NetPolicy:
    """The domains of ``[sandbox.network]`` plus the WebFetch domain rules of the policy and the session."""
    from nexusd.core.policy.rules import RuleError, parse_rule

    texts = _domain_rules(policy, settings.managed_domains_only)
    for kind, items in (("allow", session_allow), ("deny", session_deny)):
        for t in items:
            try:
                r = parse_rule(t, kind, layer="session", origin="session")  # type: ignore[arg-type]
            except RuleError:
                continue
            if r.family == "fetch" and r.domain:
                texts.append((r.text, kind, r.domain, "session"))
    return NetPolicy(
        allowed=patterns(settings.allowed_domains),
        denied=patterns(settings.denied_domains),
        ports=settings.allowed_ports,
        rules=rules_from(texts),
    )


def proxy_env(settings: SandboxSettings) -> tuple[tuple[str, str], ...]:
    """What curl, git, pip, npm and most HTTP libraries read. ``NO_PROXY`` is empty (so an inherited one
    cannot send a name around the proxy to nowhere) unless ``allow_local_binding``: then the sandbox's
    own loopback names go direct, to servers the command itself runs."""
    http = f"http://127.0.0.1:{HTTP_PORT}"
    socks = f"socks5h://127.0.0.1:{SOCKS_PORT}"
    no_proxy = "localhost,127.0.0.1,::1" if settings.allow_local_binding else ""
    env = []
    for name, value in (("http_proxy", http), ("https_proxy", http), ("all_proxy", socks), ("no_proxy", no_proxy)):
        env += [(name, value), (name.upper(), value)]
    env += [
        ("npm_config_proxy", http),
        ("npm_config_https_proxy", http),
        ("PIP_PROXY", http),
        ("NEXUS_SANDBOX_NETWORK", "filtered"),
    ]
    return tuple(env)
