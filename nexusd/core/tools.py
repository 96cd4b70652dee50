"""The tool catalog: every agent's tool names mapped to one canonical kind and name.

One rule covers a kind across providers (``Bash(git status)`` governs Gemini's run_shell_command and
Codex's shell), so the engine matches on ``canonical`` (Claude's spelling). Each entry also knows how
to pull the command, paths, URL and content out of that tool's input shape. Unknown tools are
``ToolKind.OTHER`` and require the highest level.
"""

from __future__ import annotations

import functools
import posixpath
import re
import shlex
from typing import Any, Literal

import msgspec

from nexusd.core.model import ToolKind

Tier = Literal["safe", "cautious", "dangerous"]


class ToolInfo(msgspec.Struct, frozen=True):
    name: str  # as the agent spelled it
    canonical: str  # Claude's spelling
    kind: ToolKind
    tier: Tier  # safe / cautious / dangerous, as the Nexus CLI tiers its tools
    known: bool
    writes: bool = False  # an edit tool (its paths are written, not read)


class ToolInput(msgspec.Struct, frozen=True):
    """What a tool's input says it will do, in one shape for every provider."""

    command: str | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    write_bytes: int = 0  # size of the content to be written
    cwd: str | None = None  # a tool-given directory (Gemini dir_path)
    background: bool = False
    problems: tuple[str, ...] = ()  # malformed input
    sliced: bool = False  # a Read of at most MAX_SLICE_LINES lines (offset/limit): its size is not the file's


# A Read that names its slice (Claude Code's and Gemini CLI's offset/limit, in lines) reads at most that many
# lines, each cut at a few thousand characters by the agent: a large file's slice is not a large read.
MAX_SLICE_LINES = 5_000


_K = ToolKind
# canonical name -> kind, writes
_CANONICAL: dict[str, tuple[ToolKind, bool]] = {
    "Bash": (_K.SHELL, False),
    # Claude Code's PowerShell tool (Windows): its command is classified as `pwsh -NoProfile -Command TEXT`
    # would be in Bash, so the same text means the same thing through either tool
    "PowerShell": (_K.SHELL, False),
    "Read": (_K.READ, False),
    "Write": (_K.EDIT, True),
    "Edit": (_K.EDIT, True),
    "MultiEdit": (_K.EDIT, True),
    "NotebookEdit": (_K.EDIT, True),
    "NotebookRead": (_K.READ, False),
    "Glob": (_K.READ, False),
    "Grep": (_K.READ, False),
    "LS": (_K.READ, False),
    "WebFetch": (_K.FETCH, False),
    "WebSearch": (_K.SEARCH, False),
    # a sandboxed command's connection through nexusd's egress proxy (nexusd/daemon/network.py): WebFetch
    # domain rules cover it; input url, host, port, scheme, sandboxed_command, workspace
    "Network": (_K.FETCH, False),
    "Task": (_K.AGENT, False),
    "Agent": (_K.AGENT, False),
    "TodoWrite": (_K.OTHER, False),
    "TodoRead": (_K.OTHER, False),
    "ExitPlanMode": (_K.OTHER, False),  # the plan's approval: a person decides (classify: PLAN_APPROVAL)
    "EnterPlanMode": (_K.OTHER, False),  # narrows what the agent may do
    "AskUserQuestion": (_K.OTHER, False),  # asks the person a question; runs nothing
    # the Nexus CLI's safe example tools
    "get_weather": (_K.OTHER, False),
    "calculate": (_K.OTHER, False),
    "BashOutput": (_K.SHELL, False),
    "KillShell": (_K.SHELL, False),
    "KillBash": (_K.SHELL, False),
    "Delete": (_K.EDIT, True),
    "Move": (_K.EDIT, True),
    "ApplyPatch": (_K.EDIT, True),
}
# aliases of other providers (and the Nexus CLI) -> canonical
_ALIASES: dict[str, str] = {
    # Gemini CLI
    "run_shell_command": "Bash",
    "write_file": "Write",
    "replace": "Edit",
    "read_file": "Read",
    "read_many_files": "Read",
    "glob": "Glob",
    "grep_search": "Grep",
    "search_file_content": "Grep",
    "list_directory": "LS",
    "web_fetch": "WebFetch",
    "google_web_search": "WebSearch",
    "write_todos": "TodoWrite",
    "ask_user": "AskUserQuestion",
    "enter_plan_mode": "EnterPlanMode",
    "exit_plan_mode": "ExitPlanMode",
    # the Nexus CLI
    "list_files": "LS",
    "search_files": "Grep",
    "edit_file": "Edit",
    "create_file": "Write",
    "delete_file": "Delete",
    "move_file": "Move",
    "execute_command": "Bash",
    "execute_bash": "Bash",
    "str_replace_editor": "Edit",
    "str_replace_based_edit_tool": "Edit",
    "view_image": "Read",
    # Codex
    "shell": "Bash",
    "local_shell": "Bash",
    "exec_command": "Bash",
    "apply_patch": "ApplyPatch",
    "update_plan": "TodoWrite",
    "view_image_tool": "Read",
    # Cursor (its preToolUse names; beforeShellExecution is sent as Shell)
    "Shell": "Bash",
    # GitHub Copilot CLI (its hooks reference: bash, view, create, edit, str_replace_editor, grep/rg, glob ...)
    "bash": "Bash",
    "view": "Read",
    "create": "Write",
    "edit": "Edit",
    "grep": "Grep",
    "rg": "Grep",
    "web_search": "WebSearch",
    "task": "Task",
    "update_todo": "TodoWrite",
    # OpenCode (bash, edit, glob, grep and task as above)
    "read": "Read",
    "write": "Write",
    "multiedit": "MultiEdit",
    "list": "LS",
    "webfetch": "WebFetch",
    "websearch": "WebSearch",
    "patch": "ApplyPatch",
    "todowrite": "TodoWrite",
    "todoread": "TodoRead",
    "question": "AskUserQuestion",
}
_SEED_SAFE = frozenset({"read_file", "list_files", "search_files", "view_image", "get_weather", "calculate"})
_SEED_DANGEROUS = frozenset(
    {
        "write_file",
        "execute_command",
        "delete_file",
        "edit_file",
        "create_file",
        "execute_bash",
        "move_file",
        "str_replace_editor",
        "str_replace_based_edit_tool",
    }
)
# Tools whose call is a person's approval (leaving plan mode): never allowed by a mode below full access.
PLAN_APPROVAL = frozenset({"ExitPlanMode"})
# Tools that act on nothing (a question to the person, entering plan mode, the Nexus CLI's safe examples): allowed
# like a read even for a provider without auto-approval.
ACTS_ON_NOTHING = frozenset({"AskUserQuestion", "EnterPlanMode", "get_weather", "calculate"})
_MCP_GEMINI = re.compile(r"^mcp_([A-Za-z0-9\-]+)_(.+)$")

# --------------------------------------------------------------------------- the catalogue's derived facts
# Stated once here and imported everywhere (daemon, sandbox, engine, UIs): never copy these sets.

# Every spelling of a shell command tool (``Bash`` and its aliases): what UIs show as a command and
# what the daemon treats as a shell call when a verdict carries no classification.
SHELL_TOOLS: frozenset[str] = frozenset({"Bash", *(a for a, c in _ALIASES.items() if c == "Bash")})
# The shell tools whose input the sandbox can rewrite to run sandboxed, and the key holding the command.
# Cursor's Shell is here: its hooks cannot take the rewrite, so they deny it instead of running the
# command outside the sandbox. Other spellings (Codex's argv lists) are not wrapped.
SANDBOXED_SHELL_TOOLS: dict[str, str] = {
    "Bash": "command",
    "run_shell_command": "command",
    "bash": "command",
    "Shell": "command",
}
assert SANDBOXED_SHELL_TOOLS.keys() <= SHELL_TOOLS
# Agents whose permission hook cannot hand back a rewritten input (Cursor's hooks, an ACP permission round):
# a call of theirs cannot be wrapped to run sandboxed. Sandbox-first, the default, leaves them gate-only (an
# allow runs as the agent asked); a person's explicit ``[sandbox] enabled = true`` denies what it cannot wrap.
NO_REWRITE_PROVIDERS: frozenset[str] = frozenset({"cursor", "acp"})


def sandbox_first_applies(provider: str, explicitly_enabled: bool) -> bool:
    """Whether the sandbox wraps this provider's shell calls (see ``NO_REWRITE_PROVIDERS``)."""
    return explicitly_enabled or provider not in NO_REWRITE_PROVIDERS


# Input keys that name the one file or directory a file tool acts on (OpenCode spells it filePath).
PATH_KEYS: tuple[str, ...] = (
    "file_path",
    "absolute_path",
    "notebook_path",
    "path",
    "dir_path",
    "directory",
    "filename",
    "file",
    "filePath",
)
_PATH_LIST_KEYS = (*PATH_KEYS, "paths")  # what a file tool's input names, in the order extract reads them
_CONTENT_KEYS = ("content", "new_string", "file_text", "new_source", "new_str", "text")  # what it writes
# Shell redirection operators by what they do to their target file (``<>`` opens it both ways).
WRITE_REDIRECTS: frozenset[str] = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&", "&>|"})
READ_REDIRECTS: frozenset[str] = frozenset({"<", "<&", "<>"})


@functools.lru_cache(maxsize=512)
def tool_info(name: str, provider: str | None = None) -> ToolInfo:
    """Catalog entry for a tool name as some agent spells it. Pure and its answer frozen, so remembered per
    spelling (bounded: an agent may invent names): the classifier, the engine and the daemon each ask it
    for every call."""
    if name.startswith("mcp__"):
        parts = name.split("__")
        known = len(parts) >= 3 and all(parts[1:])
        return ToolInfo(name, name, ToolKind.MCP, "cautious", known)
    canonical = name if name in _CANONICAL else _ALIASES.get(name)
    if canonical is None:
        m = _MCP_GEMINI.match(name)
        if m:
            return ToolInfo(name, f"mcp__{m.group(1)}__{m.group(2)}", ToolKind.MCP, "cautious", True)
        return ToolInfo(name, name, ToolKind.OTHER, "cautious", False)
    kind, writes = _CANONICAL[canonical]
    if name in _SEED_SAFE:
        tier: Tier = "safe"
    elif name in _SEED_DANGEROUS:
        tier = "dangerous"
    elif kind is ToolKind.READ:
        tier = "safe"
    elif kind in (ToolKind.EDIT, ToolKind.SHELL) and canonical not in ("BashOutput",):
        tier = "dangerous"
    else:
        tier = "cautious"
    return ToolInfo(name, canonical, kind, tier, True, writes)


def _strs(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, str)]
    return []


_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$", re.M)
_PATCH_MOVE = re.compile(r"^\*\*\* Move to: (.+?)\s*$", re.M)
_GIT_PATCH = re.compile(r"^(?:\+\+\+|---) (?:[ab]/)?(.+?)\s*$", re.M)


def mcp_paths(inp: Any) -> list[str]:
    """Path arguments of an MCP tool (``path``, ``paths`` lists, ``source``/``destination`` ...): what a
    filesystem server reads or writes. The tool's meaning is unknown, so each is checked both ways."""
    if not isinstance(inp, dict):
        return []
    found: list[str] = []
    for key in (*PATH_KEYS, "paths", "source", "destination", "new_path", "old_path", "target", "files"):
        found.extend(_strs(inp.get(key)))
    return found


def patch_paths(patch: str) -> list[str]:
    """Files an apply_patch body adds, updates, deletes or moves to (Codex's format, or a unified diff)."""
    paths = [m.group(2) for m in _PATCH_FILE.finditer(patch)] + [m.group(1) for m in _PATCH_MOVE.finditer(patch)]
    if not paths:
        paths = [p for p in (m.group(1) for m in _GIT_PATCH.finditer(patch)) if p != "/dev/null"]
    return paths


def extract(info: ToolInfo, tool_input: dict[str, Any]) -> ToolInput:  # noqa: C901 - one branch per tool's input shape
    """Pull the command, paths, URLs and content size out of one tool's input."""
    inp = tool_input if isinstance(tool_input, dict) else {}
    c = info.canonical
    problems: list[str] = []
    if c == "Bash":
        cmd = inp.get("command", inp.get("cmd"))
        command: str | None
        if isinstance(cmd, list):
            argv = [a for a in cmd if isinstance(a, str)]
            if len(argv) != len(cmd):
                problems.append("command list holds non-strings")
            if (
                len(argv) >= 3
                and argv[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh", "dash")
                and argv[1] in ("-c", "-lc", "-ic")
            ):
                command = shlex.join(argv)
            elif argv and argv[0] == "apply_patch" and len(argv) == 2:
                found = tuple(patch_paths(argv[1]))
                return ToolInput(
                    writes=found,
                    write_bytes=len(argv[1].encode()),
                    problems=() if found else ("patch names no file we can see",),
                )
            else:
                command = shlex.join(argv)
        elif isinstance(cmd, str):
            command = cmd
        else:
            command = None
            problems.append("no command in input")
        cwd = inp.get("dir_path") or inp.get("workdir") or inp.get("directory")
        return ToolInput(
            command=command,
            cwd=cwd if isinstance(cwd, str) else None,
            background=bool(inp.get("run_in_background")),
            problems=tuple(problems),
        )
    if c == "PowerShell":
        text = inp.get("command")
        if not isinstance(text, str):
            return ToolInput(problems=("no command in input",))
        return ToolInput(
            command=shlex.join(["pwsh", "-NoProfile", "-Command", text]),
            background=bool(inp.get("run_in_background")),
        )
    if c in ("WebFetch", "WebSearch", "Network"):
        urls = _strs(inp.get("url")) + _strs(inp.get("urls"))
        if c == "WebFetch" and not urls and isinstance(inp.get("prompt"), str):
            from nexusd.core.classify.urls import find_urls

            urls = find_urls(inp["prompt"])
        if c == "WebFetch" and not urls:
            problems.append("no URL in input")
        return ToolInput(urls=tuple(urls), problems=tuple(problems))
    if c == "ApplyPatch":
        body = inp.get("input") or inp.get("patch") or inp.get("patchText") or ""
        if isinstance(inp.get("command"), list) and len(inp["command"]) == 2:
            body = inp["command"][1]
        elif isinstance(inp.get("command"), str) and not body:  # Codex's hooks: the patch text itself
            body = inp["command"]
        body = body if isinstance(body, str) else ""
        found = tuple(patch_paths(body))
        return ToolInput(
            writes=found, write_bytes=len(body.encode()), problems=() if found else ("patch names no file we can see",)
        )
    paths: list[str] = []
    for key in _PATH_LIST_KEYS:  # most are absent: no call for them
        v = inp.get(key)
        if v is not None:
            paths.extend(_strs(v))
    if c == "Move":
        paths.extend(_strs(inp.get("source")) + _strs(inp.get("destination")) + _strs(inp.get("new_path")))
    if (
        c == "Edit"
        and info.name in ("str_replace_editor", "str_replace_based_edit_tool")
        and inp.get("command") == "view"
    ):
        return ToolInput(reads=tuple(paths))
    if c in ("Glob", "Grep", "LS") and not paths:
        paths = ["."]
    if c in ("Glob", "Grep"):
        # a pattern that carries a directory (Glob("../../etc/*")) reads there too
        pattern = inp.get("pattern")
        if c == "Glob" and isinstance(pattern, str) and "/" in pattern:
            # the directory part before the first glob character; a relative one (``**/*.py``,
            # ``../../etc/*``) is relative to the search's own path, not the root
            prefix = re.split(r"[*?\[{]", pattern, maxsplit=1)[0]
            base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
            if pattern.startswith("/"):
                paths.append(base or "/")
            elif base:
                paths.append(posixpath.normpath(posixpath.join(paths[0], base)) if paths else base)
        # Grep(glob=".env") prints the lines of .env: the files its filter names are read too
        if c == "Grep":
            for g in _strs(inp.get("glob")) + _strs(inp.get("include")):
                if g and not g.startswith(("/", "~", "{")):
                    paths.append(paths[0].rstrip("/") + "/" + g)
    size = 0
    for key in _CONTENT_KEYS:
        v = inp.get(key)
        if isinstance(v, str):
            size += len(v) if v.isascii() else len(v.encode("utf-8", "surrogatepass"))
    edits = inp.get("edits")
    for edit in edits if isinstance(edits, list) else ():
        if isinstance(edit, dict) and isinstance(edit.get("new_string"), str):
            size += len(edit["new_string"].encode("utf-8", "surrogatepass"))
    if not paths and info.kind in (ToolKind.READ, ToolKind.EDIT):
        problems.append("no path in input")
    if info.writes:
        return ToolInput(writes=tuple(paths), write_bytes=size, problems=tuple(problems))
    limit = inp.get("limit")
    sliced = c == "Read" and type(limit) is int and 0 < limit <= MAX_SLICE_LINES
    return ToolInput(reads=tuple(paths), problems=tuple(problems), sliced=sliced)
