"""Reading policy files into ``Layer``s, and merging layers into a ``Policy`` for one workspace.

TOML mirroring Claude Code's settings (``[permissions] allow/ask/deny/default_mode/
additional_directories``) plus nexusd's own tables (``[providers.<name>]``, ``[[hooks]]``,
``[classifier]``, ``[claude]``) and ``[sandbox]``, kept raw for ``nexusd.policy.sandbox_settings``.
Strict: unknown keys, wrong types, bad rule syntax and bad globs are errors naming file and line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import stat
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nexusd.core.policy.modes import internal_name
from nexusd.core.policy.policy import ClassifierSpec, HookSpec, Limits, NotifySpec, Policy, ProviderSettings, Trust
from nexusd.core.policy.rules import Rule, RuleError, parse_rule
from nexusd.core.policy.suggest import blanket_reason, code_blanket_reason
from nexusd.policy.sandbox_settings import (
    SandboxSettings,
    loosening_lines,
    merge_settings,
    parse_sandbox_layer,
    resolve_sandbox_path,
)

TOP_KEYS = frozenset(
    {"permissions", "providers", "hooks", "classifier", "sandbox", "claude", "audit", "limits", "notify", "trust"}
)
TRUST_KEYS = frozenset({"ask_new_sessions"})
AUDIT_KEYS = frozenset({"on_failure"})
LIMIT_KEYS = frozenset({"calls_per_minute", "repeats_per_minute"})
PERM_KEYS = frozenset(
    {"allow", "ask", "deny", "default_mode", "additional_directories", "allowed_modes", "disable_bypass"}
)
PROVIDER_KEYS = frozenset({"allowed_modes", "auto_approval", "prompt_timeout", "default_mode"})
HOOK_KEYS = frozenset({"command", "tools", "timeout", "on_error"})
CLASSIFIER_KEYS = frozenset({"command", "timeout", "on_error", "max_denials"})
CLAUDE_KEYS = frozenset({"import_settings", "managed_settings"})
RULE_TABLE_KEYS = frozenset({"rule", "match", "not_match", "require_human"})
CLAUDE_MANAGED = "/etc/claude-code/managed-settings.json"


@dataclass
class Layer:
    """One file's contribution (possibly empty), with its errors and warnings."""

    layer: str  # managed | user | project | learned | claude-managed | claude-user | claude-project | claude-local
    path: str
    project: bool = False
    managed: bool = False
    rules: list[Rule] = field(default_factory=list)
    default_mode: str | None = None
    additional_directories: list[str] = field(default_factory=list)
    allowed_modes: frozenset[str] | None = None
    disable_bypass: str | None = None  # origin when set
    providers: dict[str, ProviderSettings] = field(default_factory=dict)
    hooks: list[HookSpec] = field(default_factory=list)
    classifier: ClassifierSpec | None = None
    sandbox: dict[str, Any] | None = None
    audit_on_failure: str | None = None  # continue | deny
    ask_new_sessions: bool | None = None  # [trust] ask_new_sessions
    limits: dict[str, int] = field(default_factory=dict)  # [limits] keys this layer sets
    notify: NotifySpec | None = None
    import_claude: bool | None = None
    claude_managed: str | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    loaded: bool = True


class _Lines:
    """Best-effort line numbers for TOML values (tomllib does not keep them)."""

    def __init__(self, text: str, path: str) -> None:
        self.lines = text.splitlines()
        self.path = path

    def table(self, name: str) -> int:
        pat = re.compile(r"^\s*\[\[?\s*" + re.escape(name).replace(r"\.", r"\s*\.\s*") + r"\s*\]\]?")
        for i, line in enumerate(self.lines):
            if pat.match(line):
                return i
        return 0

    def key(self, key: str, start: int = 0) -> int:
        pat = re.compile(r"^\s*[\"']?" + re.escape(key) + r"[\"']?\s*=")
        for i in range(start, len(self.lines)):
            if pat.match(self.lines[i]):
                return i
        return start

    def value(self, value: str, start: int = 0) -> int:
        needles = (json.dumps(value), f"'{value}'", f'"""{value}', f"'''{value}")
        for i in range(start, len(self.lines)):
            if any(n in self.lines[i] for n in needles):
                return i
        return start

    def at(self, i: int) -> str:
        return f"{self.path}:{i + 1}"


def policy_root(path: Path) -> str:
    """What a '/' anchor is relative to: a project's root for files in .nexus/ or .claude/, else the dir."""
    parent = path.parent
    if parent.name in (".nexus", ".claude"):
        return str(parent.parent)
    return str(parent)


def _modes(value: Any, where: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ValueError(f"{where} must be a list of mode names")
    out = set()
    for m in value:
        n = internal_name(m)
        if n is None:
            raise ValueError(f"{where}: unknown mode {m!r}")
        out.add(n)
    return frozenset(out)


def _command(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        argv = shlex.split(value)
    elif isinstance(value, list) and all(isinstance(x, str) for x in value):
        argv = list(value)
    else:
        raise ValueError(f"{where} must be a string or a list of strings")
    if not argv or not argv[0]:
        raise ValueError(f"{where} is empty")
    return tuple(argv)


def _number(value: Any, where: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise ValueError(f"{where} must be a number between {lo} and {hi}")
    return float(value)


def _unknown(table: dict[str, Any], allowed: Iterable[str], where: str) -> list[str]:
    return sorted(set(table) - set(allowed))


def parse_rules_into(
    layer: Layer, perms: dict[str, Any], lines: _Lines | None, root: str, base_line: int, home: str | None = None
) -> None:
    for kind in ("deny", "ask", "allow"):
        items = perms.get(kind, [])
        kline = lines.key(kind, base_line) if lines else 0
        at = lines.at(kline) if lines else layer.path
        if not isinstance(items, list):
            layer.errors.append(f"{at}: permissions.{kind} must be a list of rules")
            continue
        for item in items:
            match: list[str] = []
            not_match: list[str] = []
            human = False
            if isinstance(item, dict):
                bad = _unknown(item, RULE_TABLE_KEYS, "")
                text = item.get("rule")
                match, not_match = item.get("match", []), item.get("not_match", [])
                human = item.get("require_human", False)
                if not isinstance(human, bool) or (human and kind != "ask"):
                    layer.errors.append(f"{at}: require_human = true goes on ask rules only (a boolean)")
                    continue
                if (
                    bad
                    or not isinstance(text, str)
                    or not all(isinstance(x, list) and all(isinstance(y, str) for y in x) for x in (match, not_match))
                ):
                    layer.errors.append(
                        f"{at}: a rule table is {{rule = '...', match = [...], not_match = [...]}}"
                        + (f"; unknown key(s) {', '.join(bad)}" if bad else "")
                    )
                    continue
            elif isinstance(item, str):
                text = item
            else:
                layer.errors.append(f"{at}: permissions.{kind}: a rule must be a string, not {type(item).__name__}")
                continue
            line = lines.at(lines.value(text, kline)) if lines else layer.path
            try:
                rule = parse_rule(
                    text,
                    kind,
                    layer=layer.layer,
                    origin=line,
                    policy_root=root,
                    project=layer.project,
                    match=match,
                    not_match=not_match,
                    home=home,
                )
            except RuleError as e:
                layer.errors.append(f"{line}: {e}")
                continue
            if human:
                rule = dataclasses.replace(rule, human=True)
            if kind == "allow":
                code = code_blanket_reason(text)
                why = code or blanket_reason(text)
                if code:
                    layer.warnings.append(
                        f"{line}: allow rule {text!r} is set aside in every mode: {code}, so it would let the "
                        "model run any code it writes; allow the exact commands instead (e.g. "
                        "Bash(python -m pytest)), or keep it as an ask rule"
                    )
                elif why:
                    layer.warnings.append(f"{line}: allow rule {text!r} is very broad: {why}")
            layer.rules.append(rule)


def parse_policy(
    text: str, path: Path, *, layer: str, project: bool = False, managed: bool = False, home: str | None = None
) -> Layer:
    """Parse one nexusd policy file; never raises (errors are collected with file and line)."""
    out = Layer(layer=layer, path=str(path), project=project, managed=managed)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        out.errors.append(f"{path}: invalid TOML: {e}")
        out.loaded = False
        return out
    lines = _Lines(text, str(path))
    root = policy_root(path)
    home = home or os.path.expanduser("~")
    for k in _unknown(doc, TOP_KEYS, ""):
        out.errors.append(f"{lines.at(lines.key(k))}: unknown key {k!r} (known: {', '.join(sorted(TOP_KEYS))})")
    perms = doc.get("permissions", {})
    pl = lines.table("permissions")
    if not isinstance(perms, dict):
        out.errors.append(f"{path}: permissions must be a table")
        perms = {}
    for k in _unknown(perms, PERM_KEYS, ""):
        out.errors.append(
            f"{lines.at(lines.key(k, pl))}: unknown key permissions.{k} (known: {', '.join(sorted(PERM_KEYS))})"
        )
    parse_rules_into(out, perms, lines, root, pl, home=home)

    def guard(where: str, line: int, fn: Any) -> Any:
        try:
            return fn()
        except ValueError as e:
            out.errors.append(f"{lines.at(line)}: {where}: {e}")
            return None

    if "default_mode" in perms:
        v = perms["default_mode"]
        if not isinstance(v, str) or internal_name(v) is None:
            out.errors.append(f"{lines.at(lines.key('default_mode', pl))}: unknown default_mode {v!r}")
        else:
            out.default_mode = v
    if "additional_directories" in perms:
        v = perms["additional_directories"]
        ln = lines.key("additional_directories", pl)
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            out.errors.append(f"{lines.at(ln)}: additional_directories must be a list of paths")
        else:
            for d in v:
                p = home + d[1:] if d == "~" or d.startswith("~/") else d
                out.additional_directories.append(os.path.normpath(os.path.join(root, p)))
    if "allowed_modes" in perms:
        out.allowed_modes = guard(
            "permissions.allowed_modes",
            lines.key("allowed_modes", pl),
            lambda: _modes(perms["allowed_modes"], "allowed_modes"),
        )
    if "disable_bypass" in perms:
        ln = lines.key("disable_bypass", pl)
        if not isinstance(perms["disable_bypass"], bool):
            out.errors.append(f"{lines.at(ln)}: disable_bypass must be true or false")
        elif perms["disable_bypass"]:
            out.disable_bypass = lines.at(ln)
    provs = doc.get("providers", {})
    if not isinstance(provs, dict):
        out.errors.append(f"{path}: providers must be a table of [providers.<name>] tables")
        provs = {}
    for name, t in provs.items():
        tl = lines.table(f"providers.{name}")
        if not isinstance(t, dict):
            out.errors.append(f"{lines.at(tl)}: providers.{name} must be a table")
            continue
        for k in _unknown(t, PROVIDER_KEYS, ""):
            out.errors.append(
                f"{lines.at(lines.key(k, tl))}: unknown key providers.{name}.{k} "
                f"(known: {', '.join(sorted(PROVIDER_KEYS))})"
            )
        allowed = (
            guard(f"providers.{name}.allowed_modes", tl, lambda t=t: _modes(t["allowed_modes"], "allowed_modes"))
            if "allowed_modes" in t
            else None
        )
        auto = t.get("auto_approval")
        if auto is not None and not isinstance(auto, bool):
            out.errors.append(f"{lines.at(lines.key('auto_approval', tl))}: auto_approval must be true or false")
            auto = None
        timeout = (
            guard(
                f"providers.{name}.prompt_timeout",
                lines.key("prompt_timeout", tl),
                lambda t=t: _number(t["prompt_timeout"], "prompt_timeout", 1, 3600),
            )
            if "prompt_timeout" in t
            else None
        )
        dm = t.get("default_mode")
        if dm is not None and (not isinstance(dm, str) or internal_name(dm) is None):
            out.errors.append(f"{lines.at(lines.key('default_mode', tl))}: unknown default_mode {dm!r}")
            dm = None
        out.providers[str(name)] = ProviderSettings(allowed, auto, timeout, dm)
    hooks = doc.get("hooks", [])
    if not isinstance(hooks, list):
        out.errors.append(f"{path}: hooks must be an array of [[hooks]] tables")
        hooks = []
    hl = 0
    for h in hooks:
        hl = next((i for i in range(hl, len(lines.lines)) if re.match(r"^\s*\[\[\s*hooks\s*\]\]", lines.lines[i])), hl)
        at = lines.at(hl)
        hl += 1
        if not isinstance(h, dict):
            out.errors.append(f"{at}: a hook must be a table")
            continue
        bad = _unknown(h, HOOK_KEYS, "")
        if bad:
            known = ", ".join(sorted(HOOK_KEYS))
            out.errors.append(f"{at}: unknown key(s) in [[hooks]]: {', '.join(bad)} (known: {known})")
            continue
        try:
            cmd = _command(h.get("command"), "hooks.command")
            tools = h.get("tools", [])
            if not isinstance(tools, list) or not all(isinstance(x, str) for x in tools):
                raise ValueError("hooks.tools must be a list of tool names")
            matchers = tuple(parse_rule(x, "ask") for x in tools)
            if any(not m.bare for m in matchers):
                raise ValueError("hooks.tools takes tool names (Bash, Edit, mcp__server), not specifiers")
            timeout = _number(h.get("timeout", 5), "hooks.timeout", 0.05, 600)
            on_error = h.get("on_error", "deny")
            if on_error not in ("deny", "ask", "allow"):
                raise ValueError("hooks.on_error must be deny, ask or allow")
            out.hooks.append(HookSpec(cmd, matchers, timeout, on_error, at))
        except (ValueError, RuleError) as e:
            out.errors.append(f"{at}: {e}")
    if "classifier" in doc:
        c = doc["classifier"]
        cl = lines.table("classifier")
        at = lines.at(cl)
        if not isinstance(c, dict):
            out.errors.append(f"{at}: classifier must be a table")
        elif bad := _unknown(c, CLASSIFIER_KEYS, ""):
            out.errors.append(f"{at}: unknown key(s) in [classifier]: {', '.join(bad)}")
        else:
            try:
                on_error = c.get("on_error", "deny")
                if on_error not in ("deny", "ask"):
                    raise ValueError("classifier.on_error must be deny (fail closed) or ask (fail open to a person)")
                md = c.get("max_denials", 3)
                if isinstance(md, bool) or not isinstance(md, int) or not 1 <= md <= 100:
                    raise ValueError("classifier.max_denials must be an integer between 1 and 100")
                out.classifier = ClassifierSpec(
                    _command(c.get("command"), "classifier.command"),
                    _number(c.get("timeout", 10), "classifier.timeout", 0.05, 600),
                    on_error,
                    md,
                    at,
                )
            except ValueError as e:
                out.errors.append(f"{at}: {e}")
    if "sandbox" in doc:
        sb = doc["sandbox"]
        at = lines.at(lines.table("sandbox"))
        if not isinstance(sb, dict):
            out.errors.append(f"{at}: sandbox must be a table")
        else:
            try:
                parse_sandbox_layer(sb, path, managed=managed, home=home)
            except ValueError as e:
                out.errors.append(f"{at}: {e}")
            else:
                out.sandbox = sb
    if "audit" in doc:
        a = doc["audit"]
        at = lines.at(lines.table("audit"))
        if not isinstance(a, dict):
            out.errors.append(f"{at}: audit must be a table")
        else:
            unknown = sorted(set(a) - AUDIT_KEYS)
            if unknown:
                out.errors.append(f"{at}: audit: unknown key(s) {', '.join(unknown)} (known: on_failure)")
            if "on_failure" in a:
                if a["on_failure"] not in ("continue", "deny"):
                    out.errors.append(f'{at}: audit.on_failure must be "continue" or "deny"')
                else:
                    out.audit_on_failure = a["on_failure"]
    if "trust" in doc:
        t = doc["trust"]
        at = lines.at(lines.table("trust"))
        if not isinstance(t, dict):
            out.errors.append(f"{at}: trust must be a table")
        else:
            unknown = sorted(set(t) - TRUST_KEYS)
            if unknown:
                out.errors.append(f"{at}: trust: unknown key(s) {', '.join(unknown)} (known: ask_new_sessions)")
            if "ask_new_sessions" in t:
                if not isinstance(t["ask_new_sessions"], bool):
                    out.errors.append(f"{at}: trust.ask_new_sessions must be true or false")
                else:
                    out.ask_new_sessions = t["ask_new_sessions"]
    if "limits" in doc:
        lim = doc["limits"]
        at = lines.at(lines.table("limits"))
        if not isinstance(lim, dict):
            out.errors.append(f"{at}: limits must be a table")
        else:
            unknown = sorted(set(lim) - LIMIT_KEYS)
            if unknown:
                out.errors.append(
                    f"{at}: limits: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(LIMIT_KEYS))})"
                )
            for key in sorted(LIMIT_KEYS & set(lim)):
                v = lim[key]
                if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1_000_000:
                    out.errors.append(f"{at}: limits.{key} must be a whole number from 0 (off) to 1000000")
                else:
                    out.limits[key] = v
    if "notify" in doc:
        at = lines.at(lines.table("notify"))
        if project:
            out.warnings.append(f"{at}: [notify] is read only from your own or the managed policy; ignored here")
        else:
            try:
                out.notify = parse_notify(doc["notify"])
            except ValueError as e:
                out.errors.append(f"{at}: notify: {e}")
    if "claude" in doc:
        c = doc["claude"]
        at = lines.at(lines.table("claude"))
        if not isinstance(c, dict) or (bad := _unknown(c, CLAUDE_KEYS, "")):
            out.errors.append(f"{at}: [claude] takes import_settings (bool) and managed_settings (path)")
        else:
            v = c.get("import_settings")
            if v is not None and not isinstance(v, bool):
                out.errors.append(f"{at}: claude.import_settings must be true or false")
            else:
                out.import_claude = v
            ms = c.get("managed_settings")
            if ms is not None:
                if not isinstance(ms, str) or not os.path.isabs(ms):
                    out.errors.append(f"{at}: claude.managed_settings must be an absolute path")
                else:
                    out.claude_managed = ms
    if out.errors:
        out.loaded = False
    return out


def parse_notify(t: Any) -> NotifySpec:
    """``[notify]`` (docs/POLICY.md); ValueError names the first problem."""
    from urllib.parse import urlsplit

    if not isinstance(t, dict):
        raise ValueError("must be a table")
    known = set(NotifySpec.__slots__)
    if bad := sorted(set(t) - known):
        raise ValueError(f"unknown key(s) {', '.join(bad)} (known: {', '.join(sorted(known))})")
    kw: dict[str, Any] = {}
    choices = {"no_ui": ("agent", "deny"), "webhook_format": ("json", "ntfy", "slack", "discord")}
    for key, allowed in choices.items():
        if key in t:
            if t[key] not in allowed:
                raise ValueError(f"{key} must be one of {', '.join(allowed)}")
            kw[key] = t[key]
    for key in ("desktop", "include_command"):
        if key in t:
            if not isinstance(t[key], bool):
                raise ValueError(f"{key} must be true or false")
            kw[key] = t[key]
    for key in ("webhook", "web_url"):
        if key in t:
            url = t[key]
            parts = urlsplit(url) if isinstance(url, str) else None
            if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"{key} must be an http(s) URL")
            if key == "web_url" and ("token=" in (parts.query or "") or parts.username or parts.password):
                raise ValueError("web_url must not carry the token or credentials: links only open the page")
            kw[key] = url
    for key, lo, hi in (("min_interval", 0.0, 86400.0), ("group_window", 0.0, 60.0)):
        if key in t:
            kw[key] = _number(t[key], f"{key}", lo, hi)
    if "redact" in t:
        pats = t["redact"]
        if not isinstance(pats, list) or not all(isinstance(x, str) and x for x in pats):
            raise ValueError("redact must be a list of regular expressions")
        for x in pats:
            try:
                re.compile(x)
            except re.error as e:
                raise ValueError(f"redact: bad pattern {x!r}: {e}") from None
        kw["redact"] = tuple(pats)
    return NotifySpec(**kw)


# Claude Code's ``sandbox`` settings (its settings reference and the SDK's sandboxTypes schema) -> ours, with
# Claude's meaning. Keys nexusd has no equivalent for are named in a warning (start log, ``nexusctl policy
# validate``), never dropped silently.
CLAUDE_SANDBOX_KEYS = {
    "enabled": "enabled",
    "failIfUnavailable": "fail_if_unavailable",
    "autoAllowBashIfSandboxed": "auto_allow_bash_if_sandboxed",
    "allowUnsandboxedCommands": "allow_unsandboxed_commands",
    "excludedCommands": "excluded_commands",  # Claude's entries are Bash rule bodies: ours too
    "enabledPlatforms": "enabled_platforms",
}
CLAUDE_NETWORK_KEYS = {
    "allowUnixSockets": "allow_unix_sockets",
    "allowAllUnixSockets": "allow_all_unix_sockets",
    "allowLocalBinding": "allow_local_binding",
    "httpProxyPort": "http_proxy_port",
    "socksProxyPort": "socks_proxy_port",
    "allowedDomains": "allowed_domains",
    "deniedDomains": "denied_domains",
    "allowManagedDomainsOnly": "managed_domains_only",  # honoured in managed settings only (as Claude does)
}
CLAUDE_FS_KEYS = {
    "allowWrite": "allow_write",
    "denyWrite": "deny_write",
    "denyRead": "deny_read",
    "allowRead": "allow_read",
    "allowManagedReadPathsOnly": "allow_managed_read_paths_only",  # managed settings only
}
CLAUDE_MANAGED_ONLY = frozenset({"allowManagedDomainsOnly", "allowManagedReadPathsOnly"})
CLAUDE_PATH_KEYS = frozenset({"allowWrite", "denyWrite", "denyRead", "allowRead", "allowUnixSockets"})
# Claude's platform names -> ours (nexusd.sandbox.probe.detect_platform)
CLAUDE_PLATFORMS = {"macos": ("macos",), "linux": ("linux",), "wsl": ("wsl1", "wsl2"), "wsl2": ("wsl2",)}


def _claude_path(raw: Any, base: Path) -> Any:
    """A Claude sandbox path as an absolute one: ``/`` and ``//`` absolute, ``~/`` the home directory, ``./`` or
    no prefix relative to ``base`` (the project root for a project's settings, else the settings' directory)."""
    if not isinstance(raw, str) or not raw or raw.startswith(("/", "~")):
        return raw
    rel = raw if raw.startswith(("./", "../")) or raw in (".", "..") else "./" + raw
    return resolve_sandbox_path(rel, base / "settings.json")


def claude_sandbox(
    doc: Any, path: Path, managed: bool = False, project: bool = False
) -> tuple[dict[str, Any] | None, list[str]]:
    """A settings.json's ``sandbox`` object as our ``[sandbox]`` table (validated by the caller), and a warning
    naming each key that is not imported."""
    sb = doc.get("sandbox") if isinstance(doc, dict) else None
    if sb is None:
        return None, []
    where = f"{path}: sandbox"
    if not isinstance(sb, dict):
        return None, [f"{where} is not an object: ignored"]
    base = Path(policy_root(path)) if project else path.parent
    warnings: list[str] = []
    table: dict[str, Any] = {}

    def take(obj: dict[str, Any], keys: dict[str, str], into: dict[str, Any], prefix: str) -> None:
        for theirs, value in obj.items():
            ours = keys.get(theirs)
            if ours is None:
                warnings.append(f"{where}.{prefix}{theirs}: not a sandbox setting nexusd has; ignored")
            elif theirs in CLAUDE_MANAGED_ONLY and not managed:
                warnings.append(
                    f"{where}.{prefix}{theirs}: honoured in managed settings only (as Claude does); ignored"
                )
            elif theirs in CLAUDE_PATH_KEYS and isinstance(value, list):
                into[ours] = [_claude_path(v, base) for v in value]
            elif theirs == "enabledPlatforms" and isinstance(value, list):
                names = [n for v in value for n in CLAUDE_PLATFORMS.get(str(v).lower(), ())]
                unknown = [str(v) for v in value if str(v).lower() not in CLAUDE_PLATFORMS]
                if unknown:
                    warnings.append(f"{where}.enabledPlatforms: {', '.join(unknown)} not a platform nexusd runs on")
                into[ours] = list(dict.fromkeys(names))
            else:
                into[ours] = value

    top = {k: v for k, v in sb.items() if k not in ("network", "filesystem")}
    take(top, CLAUDE_SANDBOX_KEYS, table, "")
    for name, keys in (("network", CLAUDE_NETWORK_KEYS), ("filesystem", CLAUDE_FS_KEYS)):
        sub = sb.get(name)
        if sub is None:
            continue
        if not isinstance(sub, dict):
            warnings.append(f"{where}.{name} is not an object: ignored")
            continue
        inner: dict[str, Any] = {}
        take(sub, keys, inner, f"{name}.")
        if inner:
            table[name] = inner
    return (table or None), warnings


def parse_claude_settings(text: str, path: Path, *, layer: str, project: bool = False) -> Layer:
    """The ``permissions`` of a Claude Code settings.json (allow/ask/deny, defaultMode, additionalDirectories)
    and its ``sandbox`` settings (``claude_sandbox``: every key Claude has, or a warning naming it)."""
    out = Layer(layer=layer, path=str(path), project=project)
    try:
        doc = json.loads(text)
    except ValueError as e:
        out.errors.append(f"{path}: invalid JSON: {e}")
        out.loaded = False
        return out
    perms = doc.get("permissions", {}) if isinstance(doc, dict) else {}
    if not isinstance(perms, dict):
        out.errors.append(f"{path}: permissions must be an object")
        return out
    lines = _Lines(text, str(path))
    parse_rules_into(out, {k: perms[k] for k in ("allow", "ask", "deny") if k in perms}, lines, policy_root(path), 0)
    dm = perms.get("defaultMode")
    if isinstance(dm, str) and internal_name(dm):
        out.default_mode = dm
    if (isinstance(doc, dict) and doc.get("disableBypassPermissionsMode") == "disable") or perms.get(
        "disableBypassPermissionsMode"
    ) == "disable":
        out.disable_bypass = str(path)
    for d in perms.get("additionalDirectories", []) or []:
        if isinstance(d, str) and d:
            p = os.path.expanduser(d) if d.startswith("~") else d
            out.additional_directories.append(os.path.normpath(os.path.join(policy_root(path), p)))
    try:
        sandbox, notes = claude_sandbox(doc, path, managed=layer == "claude-managed", project=project)
    except ValueError as e:  # a path Claude would not take either
        out.errors.append(f"{path}: {e}")
        sandbox, notes = None, []
    out.warnings += notes
    if sandbox is not None:
        try:
            parse_sandbox_layer(sandbox, path, managed=layer == "claude-managed")
        except ValueError as e:
            out.errors.append(f"{path}: {e}")
        else:
            out.sandbox = sandbox
    if out.errors:
        out.loaded = False
    return out


def managed_file_problem(path: Path, trusted_uids: Sequence[int] = (0,)) -> str | None:
    """Managed policy counts only if root-owned and not group/other-writable (its directory too)."""
    for p in (path, path.parent):
        try:
            st = p.stat()
        except OSError as e:
            return f"cannot stat {p}: {e.strerror}"
        if st.st_uid not in trusted_uids:
            return f"{p} is not owned by root (uid {st.st_uid}): ignored"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{p} is writable by group or others: ignored"
    return None


def _merge_limits(sets: dict[str, list[int]], project: dict[str, int]) -> Limits:
    """The strictest value wins: among the user's and managed layers (0, off, is the loosest: a managed
    limit cannot be turned off by the user), then a trusted or untrusted project may only tighten."""
    out: dict[str, int] = {}
    for key in LIMIT_KEYS:
        value = getattr(Limits(), key)
        if key in sets:
            value = min(sets[key], key=lambda v: v or float("inf"))
        if key in project and (value == 0 or project[key] < value):
            value = project[key]
        out[key] = value
    return Limits(**out)


def _loosening(layer: Layer) -> list[str]:
    """A project layer's ``[sandbox]`` lines that would loosen the sandbox (shown in the trust question)."""
    try:
        return loosening_lines(parse_sandbox_layer(layer.sandbox or {}, Path(layer.path), project=True))
    except ValueError:
        return []  # validated at load: cannot happen; nothing of it applies anyway


def unix_sockets_warning(paths: Sequence[str], platform: str = sys.platform) -> str | None:
    """What ``allow_unix_sockets`` does here (docs/SANDBOX.md, "Unix sockets"): on Linux nexusd's
    supervisor connects exactly these (nothing to warn of); elsewhere they stay closed."""
    if platform.startswith("linux"):
        return None
    named = ", ".join(paths)
    return (
        f"[sandbox.network] allow_unix_sockets = [{named}]: these stay CLOSED, nexusd's sandbox here does not "
        "open single Unix sockets (docs/SANDBOX.md, 'Unix sockets'); only allow_all_unix_sockets = true reaches "
        "them, and it opens every host socket (docker's included)"
    )


def _effective_sandbox(sandbox: list[tuple[dict[str, Any], str, bool, bool]]) -> SandboxSettings:
    """The merged ``[sandbox]`` settings, for what the engine needs of them (hidden paths, denied domains)."""
    try:
        return merge_settings(parse_sandbox_layer(t, Path(p), managed=m, project=pr) for t, p, m, pr in sandbox)
    except ValueError:  # validated at load: cannot happen
        return SandboxSettings()


def merge(layers: Sequence[Layer], *, workspace: str | None = None, trust: Trust = "none") -> Policy:
    """Layers in increasing precedence: managed, claude-managed, user, claude-user, project..., learned.

    Deny and ask rules of every layer apply. A project layer contributes only restrictions unless the
    workspace is trusted (rules keep their ``project`` flag; the engine ignores untrusted allow rules).
    Scalars: managed settings are final; otherwise the last layer that sets one wins.
    """
    trusted = trust == "trusted"
    rules: list[Rule] = []
    default_mode: str | None = None
    managed_mode = False
    dirs: list[str] = []
    allowed: frozenset[str] | None = None
    disable_bypass = ""
    providers: dict[str, ProviderSettings] = {}
    hooks: list[HookSpec] = []
    classifier: ClassifierSpec | None = None
    classifier_final = False
    sandbox: list[tuple[dict[str, Any], str, bool, bool]] = []
    sandbox_ignored: list[str] = []  # what project layers say that would loosen the sandbox (never applied)
    audit_on_failure, audit_final = "continue", False
    ask_new_sessions, ask_new_final = True, False
    limit_sets: dict[str, list[int]] = {}  # [limits] values of the user's and managed layers
    project_limits: dict[str, int] = {}
    notify, notify_final = NotifySpec(), False
    warnings: list[str] = []
    builtin = True
    for layer in layers:
        restrict_only = layer.project and not trusted
        warnings.extend(layer.warnings)
        if layer.ask_new_sessions is not None:
            if layer.project:  # a workspace cannot decide whether it is asked about
                warnings.append(f"{layer.path}: [trust] is ignored in a project's policy (say it in your own)")
            elif not ask_new_final:
                ask_new_sessions, ask_new_final = layer.ask_new_sessions, layer.managed
        if layer.rules or layer.hooks or layer.classifier or layer.sandbox or layer.default_mode or layer.providers:
            builtin = False
        rules.extend(layer.rules)
        if layer.disable_bypass and not disable_bypass:
            disable_bypass = layer.disable_bypass
        if layer.allowed_modes is not None:
            allowed = layer.allowed_modes if allowed is None else allowed & layer.allowed_modes
        for key, v in layer.limits.items():
            if not layer.project:
                limit_sets.setdefault(key, []).append(v)
            elif v:  # a project, trusted or not, can only tighten
                project_limits[key] = min(v, project_limits.get(key, v))
        if layer.project and layer.sandbox is not None:
            sandbox_ignored += _loosening(layer)
        if restrict_only:
            continue
        if layer.default_mode and not managed_mode:
            default_mode = layer.default_mode
            managed_mode = layer.managed
        dirs.extend(d for d in layer.additional_directories if d not in dirs)
        for name, p in layer.providers.items():
            old = providers.get(name, ProviderSettings())
            providers[name] = ProviderSettings(
                allowed_modes=(
                    p.allowed_modes
                    if old.allowed_modes is None or p.allowed_modes is None
                    else old.allowed_modes & p.allowed_modes
                )
                or old.allowed_modes,
                auto_approval=p.auto_approval if p.auto_approval is not None else old.auto_approval,
                prompt_timeout=p.prompt_timeout or old.prompt_timeout,
                default_mode=p.default_mode or old.default_mode,
            )
        hooks.extend(layer.hooks)
        if layer.classifier is not None and not classifier_final:
            classifier, classifier_final = layer.classifier, layer.managed
        if layer.sandbox is not None:
            sandbox.append((layer.sandbox, layer.path, layer.managed, layer.project))
        if layer.audit_on_failure is not None and not audit_final and not layer.project:  # the user's or managed
            audit_on_failure, audit_final = layer.audit_on_failure, layer.managed
        if layer.notify is not None and not notify_final and not layer.project:  # the user's or managed, whole
            notify, notify_final = layer.notify, layer.managed
    effective = _effective_sandbox(sandbox)
    if effective.allow_unix_sockets and not effective.allow_all_unix_sockets:
        said = unix_sockets_warning(effective.allow_unix_sockets)
        warnings += [said] if said else []
    warnings += [
        f"{line}: ignored, a project can only narrow the sandbox (say it in your own policy to use it)"
        for line in sandbox_ignored
    ]
    return Policy(
        rules=tuple(rules),
        default_mode=default_mode,
        additional_directories=tuple(dirs),
        allowed_modes=allowed,
        disable_bypass=bool(disable_bypass),
        disable_bypass_origin=disable_bypass,
        providers=providers,
        hooks=tuple(hooks),
        classifier=classifier,
        sandbox_layers=tuple(sandbox),
        sandbox_hidden=effective.deny_read,
        denied_domains=effective.denied_domains,
        sandbox_ignored=tuple(dict.fromkeys(sandbox_ignored)),
        workspace=workspace,
        trust=trust,
        builtin=builtin,
        warnings=tuple(warnings),
        audit_on_failure=audit_on_failure,  # type: ignore[arg-type]
        ask_new_sessions=ask_new_sessions,
        limits=_merge_limits(limit_sets, project_limits),
        notify=notify,
    )
