"""Merge nexusd's hook (and MCP server) entries into the agents' settings files (Claude Code, Gemini CLI,
Cursor's and Copilot CLI's hooks files), and write or remove nexusd's OpenCode plugin file.

People keep their own hooks, permissions and servers in these files, so every change is a merge that
keeps everything else, recognises our own entries (by the ``nexus-hook`` / ``nexus-mcp`` command) so a
second install replaces rather than duplicates them, and can be reversed by uninstall. Files are
written atomically (temp file, fsync, rename) after a timestamped backup; a file we cannot parse is
never touched. The transforms are pure functions over parsed JSON so they are tested without files.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, Literal

from nexus_clients import codex_settings, jsonc
from nexusd.atomicfile import write_atomic

Agent = Literal["claude", "gemini", "codex", "cursor", "copilot", "opencode"]
HOOK_MARK = "nexus-hook"
MCP_MARK = "nexus-mcp"
SERVER_NAME = "nexus"
PROMPT_TOOL = f"mcp__{SERVER_NAME}__permission_prompt"
AGENT_TIMEOUT_S = 60  # what we configure the agent to give the hook
HOOK_TIMEOUT_S = 55  # what the hook gives itself: it must answer before the agent gives up on it


class SettingsError(Exception):
    """A settings file we must not touch (unparseable, not an object, unexpected shapes)."""


# --------------------------------------------------------------------------- commands


def console_script(name: str) -> str:
    """The absolute path of our console script: agents may run hooks with a PATH that lacks the venv."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    return found or name


def hook_argv(agent: Agent, timeout: float = HOOK_TIMEOUT_S, executable: str | None = None) -> list[str]:
    """How an agent runs the hook: this interpreter, isolated and without ``site`` (``-IS``), on the launcher
    file inside the installed package (``nexus_clients/nexus-hook.py``). That starts in about the time of a
    bare ``python -I -S`` (the console script's ``site`` alone costs a venv ~15 ms per tool call), ignores
    the agent's PYTHONPATH and friends, and keeps working after ``pip install --upgrade`` (same path). A
    moved or removed venv breaks it, as it breaks every script of that venv: ``nexusctl doctor`` says so.
    ``executable`` names a console script to run instead (tests, unusual layouts)."""
    tail = [agent, "--timeout", f"{timeout:g}"]
    return [executable, *tail] if executable else [*hook_launcher_argv(), *tail]


def hook_launcher_argv() -> list[str]:
    """The interpreter and launcher of ``hook_argv``, before the agent's name and options."""
    return [sys.executable, "-IS", str(Path(__file__).with_name(f"{HOOK_MARK}.py"))]


def hook_command(agent: Agent, timeout: float = HOOK_TIMEOUT_S, executable: str | None = None) -> str:
    """``hook_argv`` as one shell command line (what the agents' settings hold)."""
    return " ".join(_quote(word) for word in hook_argv(agent, timeout, executable))


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _is_ours(hook: Any, mark: str) -> bool:
    """Our entry: its ``command`` (or Copilot's ``bash``) runs our console script."""
    return isinstance(hook, dict) and any(isinstance(hook.get(k), str) and mark in hook[k] for k in ("command", "bash"))


# --------------------------------------------------------------------------- hook entries


def _event_lists(settings: dict[str, Any]) -> dict[str, Any]:
    hooks = settings.get("hooks")
    if hooks is None:
        return {}
    if not isinstance(hooks, dict):
        raise SettingsError("'hooks' is not an object")
    return hooks


def remove_hooks(settings: dict[str, Any], event: str) -> dict[str, Any]:
    """Drop our command hooks from ``hooks[event]``, and groups/lists/objects left empty by that."""
    out = copy.deepcopy(settings)
    hooks = _event_lists(out)
    groups = hooks.get(event)
    if groups is None:
        return out
    if not isinstance(groups, list):
        raise SettingsError(f"'hooks.{event}' is not a list")
    kept = []
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            mine = [h for h in group["hooks"] if _is_ours(h, HOOK_MARK)]
            if mine:
                rest = [h for h in group["hooks"] if not _is_ours(h, HOOK_MARK)]
                if not rest:
                    continue
                group = {**group, "hooks": rest}
        kept.append(group)
    if kept:
        hooks[event] = kept
    else:
        del hooks[event]
        if not hooks:
            del out["hooks"]
    return out


def add_hook(settings: dict[str, Any], event: str, matcher: str, hook: dict[str, Any]) -> dict[str, Any]:
    """Put our hook first in ``hooks[event]`` (replacing an earlier install), keeping every other entry."""
    out = remove_hooks(settings, event)
    hooks = out.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError("'hooks' is not an object")
    groups = hooks.setdefault(event, [])
    groups.insert(0, {"matcher": matcher, "hooks": [hook]})
    return out


def claude_install(settings: dict[str, Any], command: str, *, on_failure_block: bool = False) -> dict[str, Any]:
    """PreToolUse (every call) and PermissionRequest (the asks Claude Code would show in its own dialog, in
    any mode) both go to nexusd. ``on_failure_block`` adds ``"onFailure": "block"`` (Claude Code 2.1.295+):
    a hook that cannot start, crashes or times out then blocks instead of letting the call run."""
    hook: dict[str, Any] = {"type": "command", "command": command, "timeout": AGENT_TIMEOUT_S}
    if on_failure_block:
        hook["onFailure"] = "block"
    out = add_hook(add_hook(settings, "PreToolUse", "*", hook), "PermissionRequest", "*", dict(hook))
    # SessionEnd gates nothing: it ends the session's "allow for this session" grants in nexusd
    return add_hook(out, "SessionEnd", "*", {"type": "command", "command": command, "timeout": AGENT_TIMEOUT_S})


ON_FAILURE_SINCE = (2, 1, 295)  # the first Claude Code that reads a hook's "onFailure"


def claude_version(executable: str = "claude", timeout: float = 10.0) -> tuple[int, int, int] | None:
    """The installed Claude Code's version from ``claude --version`` ("2.1.330 (Claude Code)"), or None
    when it is not found or says something else. An older Claude Code's schema may reject a key it does
    not know (and with it the whole hooks entry), so ``onFailure`` is only written where it is known."""
    import re
    import subprocess

    found = shutil.which(executable)
    if found is None:
        return None
    try:
        out = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(r"\s*(\d+)\.(\d+)\.(\d+)", out.stdout)
    return (int(m[1]), int(m[2]), int(m[3])) if m and out.returncode == 0 else None


def claude_uninstall(settings: dict[str, Any]) -> dict[str, Any]:
    return remove_hooks(remove_hooks(remove_hooks(settings, "PreToolUse"), "PermissionRequest"), "SessionEnd")


def gemini_install(settings: dict[str, Any], command: str) -> dict[str, Any]:
    hook = {"name": "nexusd", "type": "command", "command": command, "timeout": AGENT_TIMEOUT_S * 1000}
    return add_hook(settings, "BeforeTool", ".*", hook)


def gemini_uninstall(settings: dict[str, Any]) -> dict[str, Any]:
    return remove_hooks(settings, "BeforeTool")


# --------------------------------------------------------------------------- Cursor and Copilot CLI
# Both keep ``{"version": 1, "hooks": {event: [entry, ...]}}``: flat lists of entries, no matcher groups.

CURSOR_EVENTS = ("beforeShellExecution", "beforeMCPExecution", "beforeReadFile")
COPILOT_EVENT = "preToolUse"


def remove_flat_hooks(config: dict[str, Any], events: tuple[str, ...]) -> dict[str, Any]:
    """Drop our entries from ``hooks[event]``; lists and ``hooks`` left empty go too."""
    out = copy.deepcopy(config)
    hooks = _event_lists(out)
    for event in events:
        entries = hooks.get(event)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise SettingsError(f"'hooks.{event}' is not a list")
        kept = [e for e in entries if not _is_ours(e, HOOK_MARK)]
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if "hooks" in out and not hooks:
        del out["hooks"]
    return out


def only_version(config: dict[str, Any]) -> bool:
    """Nothing left but ``version``: a hooks file uninstall removes (unless a backup held just that)."""
    return set(config) <= {"version"}


def add_flat_hooks(config: dict[str, Any], entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Put our entry first in ``hooks[event]`` for each event, keeping every other entry."""
    if config.get("version", 1) != 1:
        raise SettingsError(f"hooks file version {config.get('version')!r} is not 1; not touching it")
    out = remove_flat_hooks(config, tuple(entries))
    out.setdefault("version", 1)
    hooks = out.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError("'hooks' is not an object")
    for event, entry in entries.items():
        hooks.setdefault(event, []).insert(0, entry)
    return out


def cursor_install(config: dict[str, Any], command: str) -> dict[str, Any]:
    """``failClosed``: Cursor lets an action through when a hook fails unless told otherwise."""
    entry = {"command": command, "timeout": AGENT_TIMEOUT_S, "failClosed": True}
    return add_flat_hooks(config, {event: dict(entry) for event in CURSOR_EVENTS})


def cursor_uninstall(config: dict[str, Any]) -> dict[str, Any]:
    return remove_flat_hooks(config, CURSOR_EVENTS)


def copilot_install(config: dict[str, Any], command: str) -> dict[str, Any]:
    entry = {"type": "command", "bash": command, "timeoutSec": AGENT_TIMEOUT_S}
    return add_flat_hooks(config, {COPILOT_EVENT: entry})


def copilot_uninstall(config: dict[str, Any]) -> dict[str, Any]:
    return remove_flat_hooks(config, (COPILOT_EVENT,))


# --------------------------------------------------------------------------- OpenCode's plugin file

OPENCODE_MARK = "// nexusd gate for OpenCode"
OPENCODE_PLUGIN = "nexusd.js"


def opencode_plugin_text(argv: list[str], timeout: float = HOOK_TIMEOUT_S) -> str:
    """Our plugin with the hook's argv and deadline filled in (the plugin kills a hook that overruns)."""
    from importlib.resources import files

    template = (files("nexus_clients") / "data" / "opencode-nexusd.js").read_text(encoding="utf-8")
    timeout_ms = int((timeout + 3) * 1000)  # the hook answers by --timeout; a little slack for process exit
    return template.replace("__NEXUS_HOOK_ARGV__", json.dumps(argv)).replace("__NEXUS_TIMEOUT_MS__", str(timeout_ms))


def opencode_plugin_path(project: Path | None, home: Path | None = None) -> Path:
    """``.opencode/plugins/`` in a project, else OpenCode's user config directory's ``plugins/``."""
    if project is not None:
        return project / ".opencode" / "plugins" / OPENCODE_PLUGIN
    xdg = os.environ.get("XDG_CONFIG_HOME") if home is None else None
    base = Path(xdg) if xdg else (home or Path.home()) / ".config"
    return base / "opencode" / "plugins" / OPENCODE_PLUGIN


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path} is unreadable ({exc}); not touching it") from None


def opencode_changes(project: Path | None, home: Path | None, *, install: bool, timeout: float) -> list[Change]:
    path = opencode_plugin_path(project, home)
    old = _read_text(path)
    if old is not None and OPENCODE_MARK not in old:
        raise SettingsError(f"{path} exists and is not nexusd's plugin; not touching it")
    if not install:
        return [Change(path, old, None)]
    return [Change(path, old, opencode_plugin_text(hook_argv("opencode", timeout), timeout))]


# --------------------------------------------------------------------------- MCP server entries


def mcp_install(config: dict[str, Any], executable: str | None = None) -> dict[str, Any]:
    out = copy.deepcopy(config)
    servers = out.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise SettingsError("'mcpServers' is not an object")
    existing = servers.get(SERVER_NAME)
    if existing is not None and not _is_ours(existing, MCP_MARK):
        raise SettingsError(f"an MCP server named {SERVER_NAME!r} already exists and is not nexus-mcp")
    servers[SERVER_NAME] = {"type": "stdio", "command": executable or console_script(MCP_MARK), "args": []}
    return out


def mcp_uninstall(config: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(config)
    servers = out.get("mcpServers")
    if isinstance(servers, dict) and _is_ours(servers.get(SERVER_NAME), MCP_MARK):
        del servers[SERVER_NAME]
        if not servers:
            del out["mcpServers"]
    return out


# --------------------------------------------------------------------------- where the files are


def settings_path(agent: Agent, project: Path | None, home: Path | None = None) -> Path:
    base = project if project is not None else (home or Path.home())
    if agent == "cursor":  # ~/.cursor/hooks.json, <project>/.cursor/hooks.json
        return base / ".cursor" / "hooks.json"
    if agent == "copilot":  # a file of our own among Copilot's hook files
        if project is not None:
            return project / ".github" / "hooks" / "nexusd.json"
        copilot_home = os.environ.get("COPILOT_HOME") if home is None else None
        return (Path(copilot_home) if copilot_home else base / ".copilot") / "hooks" / "nexusd.json"
    return base / (".claude" if agent == "claude" else ".gemini") / "settings.json"


def claude_mcp_path(project: Path | None, home: Path | None = None) -> Path:
    """Claude Code reads user MCP servers from ``~/.claude.json`` and project ones from ``.mcp.json``."""
    if project is not None:
        return project / ".mcp.json"
    return (home or Path.home()) / ".claude.json"


# --------------------------------------------------------------------------- planning and applying changes


@dataclass(frozen=True)
class Change:
    path: Path
    old_text: str | None  # None: the file does not exist
    new_text: str | None  # None: the file does not exist and will not be created

    @property
    def changed(self) -> bool:
        return self.old_text != self.new_text

    def diff(self) -> str:
        old = (self.old_text or "").splitlines(keepends=True)
        new = (self.new_text or "").splitlines(keepends=True)
        label = str(self.path)
        return "".join(
            difflib.unified_diff(old, new, f"{label} (before)" if self.old_text is not None else "/dev/null", label)
        )


def read_json(path: Path) -> tuple[dict[str, Any], str | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, None
    if not text.strip():
        return {}, text
    try:
        data = jsonc.loads(text)  # comments and trailing commas too: Gemini CLI accepts them
    except ValueError as exc:
        raise SettingsError(f"{path} is not valid JSON ({exc}); not touching it") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path} does not hold a JSON object; not touching it")
    return data, text


KEEP_BACKUPS = 5  # per settings file: older nexus backups are removed when a new one is made


def _backups(path: Path) -> list[Path]:
    """Our backups of ``path``, newest first."""
    found = [p for p in path.parent.glob(f"{glob_escape(path.name)}.nexus-backup-*") if p.is_file()]
    return sorted(found, key=lambda p: (p.stat().st_mtime_ns, p.name), reverse=True)


def plan(path: Path, transform: Any, *, restore: bool = False, empty: Any = None) -> Change:
    """``restore`` (uninstall): when the result is what a backup held, write that backup's exact text back
    (a round trip leaves the file byte-identical), else when nothing is left (``empty``, default: ``{}``),
    remove the file (an install that created it leaves no ``{}`` behind)."""
    data, old_text = read_json(path)
    new = transform(data)
    if new == data:
        return Change(path, old_text, old_text)
    if restore:
        for backup in _backups(path):
            try:
                text = backup.read_text(encoding="utf-8")
                if jsonc.loads(text) == new:
                    return Change(path, old_text, text)
            except (OSError, ValueError):
                continue
        if (empty or (lambda d: not d))(new):
            return Change(path, old_text, None)
    if old_text and old_text.strip():
        # only our entries change: the rest keeps its bytes (comments, indentation, key order)
        return Change(path, old_text, jsonc.edit(old_text, new))
    return Change(path, old_text, json.dumps(new, indent=2, ensure_ascii=False) + "\n")


def apply(change: Change) -> Path | None:
    """Write (or, for ``new_text=None``, remove) atomically after a backup; returns the backup's path (None
    when there was no file or no change). Only the newest ``KEEP_BACKUPS`` backups of a file are kept."""
    if not change.changed:
        return None
    path = change.path
    path.parent.mkdir(parents=True, exist_ok=True)
    backup: Path | None = None
    mode = 0o600
    if change.old_text is not None:
        mode = path.stat().st_mode & 0o777
        backup = path.with_name(f"{path.name}.nexus-backup-{time.strftime('%Y%m%d-%H%M%S')}")
        n = 1
        while backup.exists():
            backup = path.with_name(f"{path.name}.nexus-backup-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
            n += 1
        shutil.copy2(path, backup)
        for old in _backups(path)[KEEP_BACKUPS:]:
            with contextlib.suppress(OSError):
                old.unlink()
    if change.new_text is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    else:
        write_atomic(path, change.new_text, mode, dir_mode=0o755)
    return backup


# The agents' directories an install may have created: an uninstall that leaves one empty removes it.
_AGENT_DIRS = frozenset(
    {".claude", ".gemini", ".codex", ".cursor", ".copilot", "hooks", ".github", ".opencode", "plugins"}
)


def tidy_after_uninstall(change: Change, *, stop: Path | None = None) -> list[Path]:
    """After an uninstall: our backups of the file (the install's and this one's) and the agent directories
    left empty once the file is gone; returns what was removed. The user's own files are never touched: a
    directory is removed only when empty, and only the agents' own directory names, up to ``stop``."""
    removed: list[Path] = []
    for backup in _backups(change.path):
        with contextlib.suppress(OSError):
            backup.unlink()
            removed.append(backup)
    if change.new_text is None:
        d = change.path.parent
        while d.name in _AGENT_DIRS and d != stop and d != d.parent:
            try:
                d.rmdir()  # only when empty
            except OSError:
                break
            removed.append(d)
            d = d.parent
    return removed


def install_changes(
    agent: Agent,
    *,
    project: Path | None,
    mcp: bool,
    timeout: float = HOOK_TIMEOUT_S,
    home: Path | None = None,
    on_failure_block: bool = False,
) -> list[Change]:
    """The file changes an install makes (nothing is written here)."""
    if agent != "claude" and mcp:
        raise SettingsError("--mcp is for Claude Code's --permission-prompt-tool; other agents use their hooks")
    if agent == "opencode":
        return opencode_changes(project, home, install=True, timeout=timeout)
    command = hook_command(agent, timeout)
    if agent == "codex":
        codex_command, _ = codex_hook_command(command)
        return [_codex_change(project, home, lambda d, p: codex_settings.install(d, p, codex_command, AGENT_TIMEOUT_S))]
    if agent in ("cursor", "copilot"):
        transform = cursor_install if agent == "cursor" else copilot_install
        return [plan(settings_path(agent, project, home), lambda s: transform(s, command))]
    if agent == "claude":
        merge = lambda s: claude_install(s, command, on_failure_block=on_failure_block)  # noqa: E731
        changes = [plan(settings_path("claude", project, home), merge)]
        if mcp:
            changes.append(plan(claude_mcp_path(project, home), mcp_install))
        return changes
    return [plan(settings_path("gemini", project, home), lambda s: gemini_install(s, command))]


def uninstall_changes(agent: Agent, *, project: Path | None, home: Path | None = None) -> list[Change]:
    if agent == "codex":
        return [_codex_change(project, home, codex_settings.uninstall, restore=True)]
    if agent == "opencode":
        return opencode_changes(project, home, install=False, timeout=HOOK_TIMEOUT_S)
    if agent in ("cursor", "copilot"):
        transform = cursor_uninstall if agent == "cursor" else copilot_uninstall
        return [plan(settings_path(agent, project, home), transform, restore=True, empty=only_version)]
    if agent == "claude":
        changes = [plan(settings_path("claude", project, home), claude_uninstall, restore=True)]
        mcp_file = claude_mcp_path(project, home)
        if mcp_file.exists():
            changes.append(plan(mcp_file, mcp_uninstall, restore=True))
        return changes
    return [plan(settings_path("gemini", project, home), gemini_uninstall, restore=True)]


# Shells that parse `a || exit 2` (Codex runs hooks as `$SHELL -lc "<command>"`).
OR_EXIT_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "busybox", "fish"})


def codex_hook_command(command: str, shell: str | None = None) -> tuple[str, str | None]:
    """The command Codex runs, and a warning when it cannot be made fail-closed.

    `|| exit 2`: Codex lets the call run on any exit but 2, so with it a hook that cannot start (a removed
    venv: 127) or dies before answering still blocks. In a shell that cannot parse it (nushell, xonsh …)
    it would fail every time, and let every call through, so there it is left out, and said so."""
    name = os.path.basename(shell if shell is not None else os.environ.get("SHELL") or "/bin/sh")
    if name in OR_EXIT_SHELLS:
        return f"{command} || exit 2", None
    return command, (
        f"Codex runs hooks through your shell ({name}), which may not parse `|| exit 2`: installed without it, "
        "so if nexus-hook cannot start (a removed venv), Codex lets the call through."
    )


def _codex_change(project: Path | None, home: Path | None, transform: Any, *, restore: bool = False) -> Change:
    """Codex's config is TOML: ``codex_settings`` merges it with tomlkit (comments kept)."""
    path = codex_settings.config_path(project, home)
    try:
        old, new = codex_settings.plan_text(path, lambda doc: transform(doc, path), _backups(path), restore=restore)
    except codex_settings.CodexSettingsError as exc:
        raise SettingsError(str(exc)) from None
    return Change(path, old, new)


# --------------------------------------------------------------------------- what is installed (doctor)


def _commands_in(node: Any, mark: str) -> list[str]:
    """Every ``command`` (or Copilot's ``bash``) string under ``node`` that runs our ``mark``."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("command", "bash") and isinstance(value, str) and mark in value:
                found.append(value)
            else:
                found += _commands_in(value, mark)
    elif isinstance(node, list):
        for item in node:
            found += _commands_in(item, mark)
    return found


def installed_hook_commands(agent: Agent, project: Path | None, home: Path | None = None) -> tuple[Path, list[str]]:
    """The settings file an install of ``agent`` writes, and the hook command lines it holds now (distinct,
    in file order; empty when none or no file). SettingsError when the file cannot be read or parsed."""
    if agent == "opencode":
        path = opencode_plugin_path(project, home)
        text = _read_text(path)
        if text is None or OPENCODE_MARK not in text:
            return path, []
        start = text.find("const HOOK = ")
        end = text.find(";\n", start)
        try:
            argv = json.loads(text[start + len("const HOOK = ") : end]) if start >= 0 and end > start else None
        except ValueError:
            argv = None
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            raise SettingsError(f"{path}: nexusd's plugin has no readable hook command")
        return path, [" ".join(_quote(a) for a in argv)]
    if agent == "codex":
        import tomllib

        path = codex_settings.config_path(project, home)
        text = _read_text(path)
        try:
            data: Any = tomllib.loads(text) if text is not None else {}
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{path} is not valid TOML ({exc})") from None
    else:
        path = settings_path(agent, project, home)
        text = _read_text(path)
        try:
            data = json.loads(text) if text is not None and text.strip() else {}
        except ValueError as exc:
            raise SettingsError(f"{path} is not valid JSON ({exc})") from None
    return path, list(dict.fromkeys(_commands_in(data, HOOK_MARK)))
