"""The ``[sandbox]`` table of a policy file: schema, strict parsing, and the merge across layers.

Claude Code's sandbox settings (``sandbox.*`` in its settings.json) under our names. Paths follow the *sandbox*
path semantics (not the permission rules'): ``/abs`` is absolute, ``~/x`` is in the home directory, ``./x`` is
relative to the policy file that says it (``//abs`` is accepted as absolute, for compatibility). Anything else
is an error, so a typo never silently protects the wrong place.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from nexusd.core.policy.policy import Policy

BOOL_KEYS = (
    "enabled",
    "fail_if_unavailable",
    "auto_allow_bash_if_sandboxed",
    "allow_unsandboxed_commands",
    "network_isolation",
    "allow_all_unix_sockets",
    "allow_managed_read_paths_only",
    "allow_local_binding",
    "managed_domains_only",
    "preview",
)
FS_KEYS = ("allow_write", "deny_write", "deny_read", "allow_read")
FS_BOOL_KEYS = ("allow_managed_read_paths_only",)  # booleans that live in [sandbox.filesystem]
PLATFORMS = frozenset({"linux", "wsl2", "wsl1", "macos", "other"})  # nexusd.sandbox.probe.detect_platform
NETWORK_BOOL_KEYS = ("allow_all_unix_sockets", "allow_local_binding", "managed_domains_only")  # in [sandbox.network]
NETWORK_MODES = ("isolated", "filtered", "open")
TOP_KEYS = frozenset(
    (
        *(k for k in BOOL_KEYS if k not in (*NETWORK_BOOL_KEYS, *FS_BOOL_KEYS)),
        "excluded_commands",
        "filesystem",
        "network",
        "enabled_platforms",
    )
)
NETWORK_KEYS = frozenset(
    (
        "isolated",
        "allow_all_unix_sockets",
        "allow_unix_sockets",
        "mode",
        "allowed_domains",
        "denied_domains",
        "allowed_ports",
        "managed_domains_only",
        "allow_local_binding",
        "http_proxy_port",
        "socks_proxy_port",
    )
)
NETWORK_LIST_KEYS = ("allowed_domains", "denied_domains")
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class SandboxLayer:
    """One policy file's ``[sandbox]`` table: only what it says (``None`` = not set here)."""

    path: str
    managed: bool = False
    project: bool = False  # a workspace's own file: it may only narrow the sandbox (``loosening``)
    enabled: bool | None = None
    fail_if_unavailable: bool | None = None
    auto_allow_bash_if_sandboxed: bool | None = None
    allow_unsandboxed_commands: bool | None = None
    network_isolation: bool | None = None
    allow_all_unix_sockets: bool | None = None
    allow_managed_read_paths_only: bool | None = None
    allow_local_binding: bool | None = None
    managed_domains_only: bool | None = None
    preview: bool | None = None
    enabled_platforms: tuple[str, ...] | None = None
    network_mode: str | None = None
    allowed_ports: tuple[int, ...] | None = None
    http_proxy_port: int | None = None
    socks_proxy_port: int | None = None
    excluded_commands: tuple[str, ...] = ()
    allow_unix_sockets: tuple[str, ...] = ()
    allowed_domains: tuple[str, ...] = ()
    denied_domains: tuple[str, ...] = ()
    allow_write: tuple[str, ...] = ()
    deny_write: tuple[str, ...] = ()
    deny_read: tuple[str, ...] = ()
    allow_read: tuple[str, ...] = ()


@dataclass(frozen=True)
class SandboxSettings:
    """The effective sandbox settings. Sandbox-first: agents' shell calls run sandboxed wherever the probe
    says the sandbox works, with no network, and a sandboxed call skips the mode's bare ask.

    ``enabled_set``: some layer said ``enabled`` (either way). Unsaid, the default is *on where the sandbox
    works*: a machine without a working sandbox keeps gate-only behaviour (calls run unwrapped, every
    ask stays an ask) instead of refusing every shell call. Said ``true``, ``fail_if_unavailable`` applies."""

    enabled: bool = True  # transparently sandbox agents' shell calls (default: where the probe says it works)
    enabled_set: bool = False  # a layer said enabled = true/false: no probe-dependent default
    fail_if_unavailable: bool = True  # no working sandbox: refuse (False: run unsandboxed, with a warning)
    auto_allow_bash_if_sandboxed: bool = True  # sandboxed shell calls skip a bare ask (deny/ask rules still apply)
    allow_unsandboxed_commands: bool = True  # excluded_commands may run outside the sandbox
    network_isolation: bool = True
    # Unix sockets: closed by a seccomp filter unless allow_all_unix_sockets. allow_unix_sockets names
    # paths to re-open; a socket-creation filter cannot tell paths apart, so on Linux those paths need
    # allow_all_unix_sockets (the plan says so) and stay closed otherwise.
    allow_all_unix_sockets: bool = False
    # only the managed policy's allow_read re-opens what deny_read and the built-in masks hide
    allow_managed_read_paths_only: bool = False
    # preview before effect (docs/UNDO.md): an agent's sandboxed shell call writes into an overlay of the
    # workspace, and a person applies or discards what it changed
    preview: bool = False
    # Claude Code's sandbox.enabledPlatforms: where transparent sandboxing applies (None: every supported platform)
    enabled_platforms: tuple[str, ...] | None = None
    # [sandbox.network]: None = not said anywhere (isolated, or filtered when a domain is allowed)
    network_mode: str | None = None
    allow_local_binding: bool = False  # listening on the sandbox's own loopback (never reachable from outside)
    managed_domains_only: bool = False  # only the managed policy's allowed domains (set there)
    allowed_ports: tuple[int, ...] = (80, 443)  # 80, 443 and the ports the policy adds (allowed_ports)
    http_proxy_port: int | None = None  # the user's own proxy on the host's loopback instead of ours
    socks_proxy_port: int | None = None
    allowed_domains: tuple[str, ...] = ()
    denied_domains: tuple[str, ...] = ()
    excluded_commands: tuple[str, ...] = ()
    allow_unix_sockets: tuple[str, ...] = ()
    allow_write: tuple[str, ...] = ()  # absolute paths
    deny_write: tuple[str, ...] = ()
    deny_read: tuple[str, ...] = ()
    allow_read: tuple[str, ...] = ()
    sources: tuple[str, ...] = field(default=(), compare=False)  # the policy files that contributed
    ignored: tuple[str, ...] = field(default=(), compare=False)  # project lines that would have loosened it

    def network(self, rule_domains: bool = False) -> str:
        """isolated | filtered | open: ``mode`` if a layer says it; ``network_isolation = false`` is open;
        otherwise filtered as soon as a domain is allowed (here, or by a WebFetch allow rule:
        ``rule_domains``) or the user's own proxy port is named, else isolated."""
        if self.network_mode is not None:
            return self.network_mode
        if not self.network_isolation:
            return "open"
        named = self.allowed_domains or rule_domains or self.http_proxy_port or self.socks_proxy_port
        return "filtered" if named else "isolated"

    def gate_only_when_unavailable(self) -> bool:
        """No working sandbox: run agents' calls unwrapped under the gate alone (the default's fallback, or
        ``fail_if_unavailable = false``) rather than refuse them."""
        return not self.enabled_set or not self.fail_if_unavailable

    def active_on(self, platform: str) -> bool:
        """Whether agents' shell calls are sandboxed on ``platform`` (enabled, and the platform listed)."""
        return self.enabled and (self.enabled_platforms is None or platform in self.enabled_platforms)


def person_allow_read(policy: object) -> tuple[str, ...]:
    """allow_read of the layers a project cannot write (user, managed, and anything outside the workspace)."""
    workspace = getattr(policy, "workspace", None)
    root = workspace.rstrip("/") + "/" if isinstance(workspace, str) and workspace else None
    out: list[str] = []
    managed_only = sandbox_settings(policy).allow_managed_read_paths_only
    for item in getattr(policy, "sandbox_layers", None) or ():
        layer = (
            item
            if isinstance(item, SandboxLayer)
            else parse_sandbox_layer(
                item[0],
                Path(item[1]),
                managed=bool(item[2]) if len(item) > 2 else False,
                project=bool(item[3]) if len(item) > 3 else False,
            )
        )
        if (
            layer.project
            or (root is not None and layer.path.startswith(root) and not layer.managed)
            or (managed_only and not layer.managed)
        ):
            continue  # a project layer, or only the managed policy re-opens reads
        out.extend(p for p in layer.allow_read if p not in out)
    return tuple(out)


def resolve_sandbox_path(raw: str, policy_file: Path, home: str | None = None) -> str:
    """A sandbox filesystem path as Claude Code resolves one (``resolveSandboxFilesystemPath``): absolute, ``~/``,
    or ``./`` relative to the policy file."""
    if not isinstance(raw, str) or not raw:
        raise ValueError("a sandbox path must be a non-empty string")
    if "\x00" in raw:
        raise ValueError(f"sandbox path {raw!r} contains a NUL byte")
    if _GLOB_CHARS & set(raw):
        raise ValueError(f"sandbox path {raw!r}: globs are not supported in sandbox paths, name the directory")
    if raw.startswith("//"):
        p = raw[1:]
    elif raw.startswith("/"):
        p = raw
    elif raw == "~" or raw.startswith("~/"):
        p = (home or os.path.expanduser("~")) + raw[1:]
    elif raw == "." or raw.startswith("./") or raw == ".." or raw.startswith("../"):
        p = str(policy_file.parent / raw)
    else:
        raise ValueError(
            f"sandbox path {raw!r} is ambiguous: write /absolute, ~/in-home or ./relative-to-the-policy-file"
        )
    return os.path.normpath(p)


def _bool(table: Mapping[str, Any], key: str, where: str) -> bool | None:
    if key not in table:
        return None
    v = table[key]
    if not isinstance(v, bool):
        raise ValueError(f"{where}.{key} must be true or false, not {type(v).__name__}")
    return v


def _strings(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    if key not in table:
        return ()
    v = table[key]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"{where}.{key} must be a list of strings")
    return tuple(str(x) for x in v)


def _check_keys(table: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(allowed))})")


def parse_sandbox_layer(
    table: Mapping[str, Any],
    policy_file: Path,
    *,
    managed: bool = False,
    home: str | None = None,
    project: bool = False,
) -> SandboxLayer:
    """Strict: unknown keys and wrong types are errors (raised as ValueError naming the key)."""
    if not isinstance(table, Mapping):
        raise ValueError("[sandbox] must be a table")
    _check_keys(table, TOP_KEYS, "sandbox")
    values: dict[str, Any] = {
        k: _bool(table, k, "sandbox") for k in BOOL_KEYS if k not in (*NETWORK_BOOL_KEYS, *FS_BOOL_KEYS)
    }
    for key in (*NETWORK_BOOL_KEYS, "allow_managed_read_paths_only"):
        values[key] = None
    if "enabled_platforms" in table:
        plats = _strings(table, "enabled_platforms", "sandbox")
        unknown = sorted(set(plats) - PLATFORMS)
        if unknown:
            raise ValueError(
                f"sandbox.enabled_platforms: unknown platform(s) {', '.join(unknown)} "
                f"(known: {', '.join(sorted(PLATFORMS))})"
            )
        values["enabled_platforms"] = plats
    net = table.get("network")
    if net is not None:
        if not isinstance(net, Mapping):
            raise ValueError("sandbox.network must be a table")
        _check_keys(net, NETWORK_KEYS, "sandbox.network")
        isolated = _bool(net, "isolated", "sandbox.network")
        if isolated is not None:
            if values["network_isolation"] is not None and values["network_isolation"] != isolated:
                raise ValueError("sandbox.network_isolation and sandbox.network.isolated disagree")
            values["network_isolation"] = isolated
        for key in NETWORK_BOOL_KEYS:
            values[key] = _bool(net, key, "sandbox.network")
        if values["managed_domains_only"] is not None and not managed:
            raise ValueError("sandbox.network.managed_domains_only is honoured only in the managed policy")
        values.update(_network_values(net, values["network_isolation"]))
    sockets: tuple[str, ...] = ()
    if net is not None:
        try:
            sockets = tuple(
                resolve_sandbox_path(r, policy_file, home)
                for r in _strings(net, "allow_unix_sockets", "sandbox.network")
            )
        except ValueError as e:
            raise ValueError(f"sandbox.network.allow_unix_sockets: {e}") from None
    excluded = _strings(table, "excluded_commands", "sandbox")
    for rule in excluded:
        if not rule.strip():
            raise ValueError("sandbox.excluded_commands: empty rule")
        from nexusd.core.disposition import excluded_rule

        try:
            excluded_rule(rule)  # the policy's own Bash rule syntax: a bad pattern is an error at load
        except ValueError as e:
            raise ValueError(f"sandbox.excluded_commands: {e}") from None
    fs = table.get("filesystem", {})
    if not isinstance(fs, Mapping):
        raise ValueError("sandbox.filesystem must be a table")
    _check_keys(fs, (*FS_KEYS, *FS_BOOL_KEYS), "sandbox.filesystem")
    values["allow_managed_read_paths_only"] = _bool(fs, "allow_managed_read_paths_only", "sandbox.filesystem")
    paths: dict[str, Any] = {}  # tuples of paths, by field name
    for key in FS_KEYS:
        raw = _strings(fs, key, "sandbox.filesystem")
        try:
            paths[key] = tuple(resolve_sandbox_path(r, policy_file, home) for r in raw)
        except ValueError as e:
            raise ValueError(f"sandbox.filesystem.{key}: {e}") from None
    return SandboxLayer(
        path=str(policy_file),
        managed=managed,
        project=project,
        excluded_commands=excluded,
        allow_unix_sockets=sockets,
        **values,
        **paths,
    )


def _port(net: Mapping[str, Any], key: str) -> int | None:
    if key not in net:
        return None
    v = net[key]
    if isinstance(v, bool) or not isinstance(v, int) or not 0 < v < 65536:
        raise ValueError(f"sandbox.network.{key} must be a port number 1-65535")
    return v


def _network_values(net: Mapping[str, Any], isolation: bool | None) -> dict[str, Any]:
    """mode, domains, ports of one ``[sandbox.network]``; every domain is validated here (the error names it)."""
    from nexusd.core.netpolicy import parse_pattern

    out: dict[str, Any] = {}
    mode = net.get("mode")
    if mode is not None:
        if mode not in NETWORK_MODES:
            raise ValueError(f"sandbox.network.mode must be one of {', '.join(NETWORK_MODES)}, not {mode!r}")
        if isolation is not None and isolation != (mode == "isolated"):
            raise ValueError(f"sandbox.network.mode = {mode!r} disagrees with network_isolation / isolated")
        out["network_mode"] = mode
    for key in NETWORK_LIST_KEYS:
        entries = _strings(net, key, "sandbox.network")
        for e in entries:
            try:
                parse_pattern(e)
            except ValueError as err:
                raise ValueError(f"sandbox.network.{key}: {err}") from None
        out[key] = entries
    if "allowed_ports" in net:
        ports = net["allowed_ports"]
        if not isinstance(ports, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) and 0 < x < 65536 for x in ports
        ):
            raise ValueError("sandbox.network.allowed_ports must be a list of port numbers 1-65535")
        out["allowed_ports"] = tuple(ports)
    for key in ("http_proxy_port", "socks_proxy_port"):
        out[key] = _port(net, key)
    return out


# A project layer (a workspace's .nexus/policy.toml, .claude/settings*.json) may only narrow the sandbox: the
# value of each boolean that narrows it; any other value of these keys, and any entry of the lists below, would
# loosen it and is ignored (said in the trust question, the policy's warnings and ``nexusctl policy validate``).
NARROWING_BOOLS: dict[str, bool] = {
    "enabled": True,
    "fail_if_unavailable": True,
    "auto_allow_bash_if_sandboxed": False,
    "allow_unsandboxed_commands": False,
    "network_isolation": True,
    "allow_all_unix_sockets": False,
    "allow_local_binding": False,
    "allow_managed_read_paths_only": True,
    "preview": True,
}
LOOSENING_LISTS = ("excluded_commands", "allow_unix_sockets", "allowed_domains", "allow_write", "allow_read")
LOOSENING_SCALARS = ("allowed_ports", "http_proxy_port", "socks_proxy_port")
_WHY = {
    "enabled": "would switch the sandbox off",
    "fail_if_unavailable": "would run commands unsandboxed when no sandbox works",
    "auto_allow_bash_if_sandboxed": "would allow sandboxed shell calls without a person",
    "allow_unsandboxed_commands": "would let excluded commands leave the sandbox",
    "network_isolation": "would open the network",
    "allow_all_unix_sockets": "would open the host's Unix sockets",
    "allow_local_binding": "would let commands listen on loopback",
    "allow_managed_read_paths_only": "would let other layers' allow_read re-open reads",
    "preview": "would let sandboxed commands change the workspace without a person's review",
    "excluded_commands": "would run these commands outside the sandbox",
    "allow_unix_sockets": "would open these Unix sockets",
    "allowed_domains": "would let these domains through without a person",
    "allow_write": "would make these paths writable",
    "allow_read": "would re-open these hidden paths",
    "allowed_ports": "would allow more ports",
    "http_proxy_port": "would send traffic to another proxy instead of nexusd's",
    "socks_proxy_port": "would send traffic to another proxy instead of nexusd's",
    "network_mode": "would widen the network",
    "enabled_platforms": "would leave shell calls unsandboxed on the other platforms",
}


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def _key(field_name: str) -> str:
    """A setting's name as a policy file spells it (``sandbox.network.allowed_domains``)."""
    if field_name in (*FS_KEYS, *FS_BOOL_KEYS):
        return f"sandbox.filesystem.{field_name}"
    if field_name in NETWORK_KEYS:
        return f"sandbox.network.{field_name}"
    return f"sandbox.{field_name}"


def loosening(layer: SandboxLayer, base_mode: str | None = None) -> list[tuple[str, str]]:
    """(field, the line as shown to a person) of every setting of ``layer`` that would loosen the sandbox.
    ``base_mode``: the network mode the layers before it said (a project may go from open to filtered)."""
    out: list[tuple[str, str]] = []
    for key, narrow in NARROWING_BOOLS.items():
        v = getattr(layer, key)
        if v is not None and v != narrow:
            out.append((key, f"{_key(key)} = {_show(v)} ({_WHY[key]})"))
    for key in (*LOOSENING_LISTS, *LOOSENING_SCALARS):
        v = getattr(layer, key)
        if v:
            out.append((key, f"{_key(key)} = {_show(v)} ({_WHY[key]})"))
    if layer.enabled_platforms is not None:  # fewer platforms sandboxed is less sandbox
        out.append(
            (
                "enabled_platforms",
                f"sandbox.enabled_platforms = {_show(layer.enabled_platforms)} ({_WHY['enabled_platforms']})",
            )
        )
    mode = layer.network_mode
    if mode is not None and mode != "isolated" and not (mode == "filtered" and base_mode == "open"):
        out.append(("network_mode", f'sandbox.network.mode = "{mode}" ({_WHY["network_mode"]})'))
    return out


def loosening_lines(layer: SandboxLayer) -> list[str]:
    """What a project layer says that would loosen the sandbox, each as ``file: line (why)``."""
    return [f"{layer.path}: {line}" for _, line in loosening(layer)]


def parse_sandbox_table(table: Mapping[str, Any], policy_file: Path) -> SandboxSettings:
    """One file's table as complete settings (defaults for what it leaves out); raises ValueError."""
    return merge_settings([parse_sandbox_layer(table, policy_file)])


def merge_settings(layers: Iterable[SandboxLayer]) -> SandboxSettings:
    """Layers in increasing precedence (e.g. user, project, local). Lists are unions: a layer can add
    protection or room, never remove another layer's deny. A managed layer's booleans are final."""
    values: dict[str, Any] = {}
    final: set[str] = set()
    lists: dict[str, list[str]] = {
        k: [] for k in (*FS_KEYS, "excluded_commands", "allow_unix_sockets", *NETWORK_LIST_KEYS)
    }
    managed_reads: list[str] = []
    managed_domains: list[str] = []
    scalars: dict[str, Any] = {}
    ports: list[int] | None = None
    platforms: tuple[str, ...] | None = None
    sources: list[str] = []
    ignored: list[str] = []
    for layer in layers:
        sources.append(layer.path)
        if layer.project and not layer.managed:
            loose = loosening(layer, scalars.get("network_mode"))
            if loose:  # a project only narrows: what would loosen is dropped, and said
                ignored += [f"{layer.path}: {line}" for _, line in loose]
                unset: dict[str, Any] = {k: _UNSET.get(k) for k, _ in loose}
                layer = replace(layer, **unset)
        if layer.managed:
            managed_reads.extend(x for x in layer.allow_read if x not in managed_reads)
        if layer.enabled_platforms is not None:  # narrowing only: every layer's list must name the platform
            platforms = (
                layer.enabled_platforms
                if platforms is None
                else tuple(p for p in platforms if p in layer.enabled_platforms)
            )
        for key in BOOL_KEYS:
            v = getattr(layer, key)
            if v is None or key in final:
                continue
            values[key] = v
            if layer.managed:
                final.add(key)
        for key, acc in lists.items():
            acc.extend(x for x in getattr(layer, key) if x not in acc)
        if layer.managed:
            managed_domains.extend(x for x in layer.allowed_domains if x not in managed_domains)
        for key in ("network_mode", "http_proxy_port", "socks_proxy_port"):
            v = getattr(layer, key)
            if v is not None and key not in final:
                scalars[key] = v
                if layer.managed:
                    final.add(key)
        if layer.allowed_ports is not None:  # a union too: ports a layer names for its domains
            ports = [*(ports or []), *(x for x in layer.allowed_ports if x not in (ports or []))]
    if values.get("allow_managed_read_paths_only"):
        lists["allow_read"] = managed_reads
    if values.get("managed_domains_only"):
        lists["allowed_domains"] = managed_domains
    if ports is not None:
        scalars["allowed_ports"] = tuple(dict.fromkeys((80, 443, *ports)))
    frozen: dict[str, Any] = {k: tuple(v) for k, v in lists.items()}
    return SandboxSettings(
        **values,
        **scalars,
        **frozen,
        enabled_set="enabled" in values,
        enabled_platforms=platforms,
        sources=tuple(sources),
        ignored=tuple(ignored),
    )


# what a dropped setting becomes: unset (None) or empty
_UNSET: dict[str, Any] = {k: () for k in LOOSENING_LISTS}


_MEMO_MAX = 64
_memo: dict[int, tuple[object, SandboxSettings]] = {}


def sandbox_settings(policy: object) -> SandboxSettings:
    """The effective settings of a loaded policy (defaults when it has no ``[sandbox]`` tables).

    The policy loader keeps each layer's table as ``Policy.sandbox_layers``: ``SandboxLayer`` objects
    (validated at load, so errors name their file) or ``(table, path)`` pairs. Policies are immutable,
    so the answer is remembered per policy object (held, so its id cannot be reused): every allowed
    shell call asks.
    """
    if not isinstance(policy, Policy):
        return _sandbox_settings(policy)
    hit = _memo.get(id(policy))
    if hit is not None and hit[0] is policy:
        return hit[1]
    settings = _sandbox_settings(policy)
    if len(_memo) >= _MEMO_MAX:
        _memo.pop(next(iter(_memo)))
    _memo[id(policy)] = (policy, settings)
    return settings


def _sandbox_settings(policy: object) -> SandboxSettings:
    layers = getattr(policy, "sandbox_layers", None) or ()
    parsed: list[SandboxLayer] = []
    for item in layers:
        if isinstance(item, SandboxLayer):
            parsed.append(item)
        else:
            table, path = item[0], item[1]
            managed = bool(item[2]) if len(item) > 2 else False
            project = bool(item[3]) if len(item) > 3 else False
            parsed.append(parse_sandbox_layer(table, Path(path), managed=managed, project=project))
    return merge_settings(parsed)
