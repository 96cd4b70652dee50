"""The tool catalog: every provider's names, kinds, tiers and input shapes."""

from __future__ import annotations

import pytest

from nexusd.core.model import ToolKind
from nexusd.core.tools import extract, patch_paths, tool_info

K = ToolKind


@pytest.mark.parametrize(
    ("name", "canonical", "kind", "tier"),
    [
        ("Bash", "Bash", K.SHELL, "dangerous"),
        ("Read", "Read", K.READ, "safe"),
        ("Write", "Write", K.EDIT, "dangerous"),
        ("Edit", "Edit", K.EDIT, "dangerous"),
        ("MultiEdit", "MultiEdit", K.EDIT, "dangerous"),
        ("NotebookEdit", "NotebookEdit", K.EDIT, "dangerous"),
        ("Glob", "Glob", K.READ, "safe"),
        ("Grep", "Grep", K.READ, "safe"),
        ("LS", "LS", K.READ, "safe"),
        ("WebFetch", "WebFetch", K.FETCH, "cautious"),
        ("WebSearch", "WebSearch", K.SEARCH, "cautious"),
        ("Task", "Task", K.AGENT, "cautious"),
        ("TodoWrite", "TodoWrite", K.OTHER, "cautious"),
        ("mcp__github__create_issue", "mcp__github__create_issue", K.MCP, "cautious"),
        ("run_shell_command", "Bash", K.SHELL, "dangerous"),
        ("write_file", "Write", K.EDIT, "dangerous"),
        ("replace", "Edit", K.EDIT, "dangerous"),
        ("read_file", "Read", K.READ, "safe"),
        ("read_many_files", "Read", K.READ, "safe"),
        ("glob", "Glob", K.READ, "safe"),
        ("grep_search", "Grep", K.READ, "safe"),
        ("list_directory", "LS", K.READ, "safe"),
        ("web_fetch", "WebFetch", K.FETCH, "cautious"),
        ("google_web_search", "WebSearch", K.SEARCH, "cautious"),
        ("mcp_github_create_issue", "mcp__github__create_issue", K.MCP, "cautious"),
        ("list_files", "LS", K.READ, "safe"),
        ("search_files", "Grep", K.READ, "safe"),
        ("edit_file", "Edit", K.EDIT, "dangerous"),
        ("create_file", "Write", K.EDIT, "dangerous"),
        ("delete_file", "Delete", K.EDIT, "dangerous"),
        ("move_file", "Move", K.EDIT, "dangerous"),
        ("execute_command", "Bash", K.SHELL, "dangerous"),
        ("execute_bash", "Bash", K.SHELL, "dangerous"),
        ("str_replace_editor", "Edit", K.EDIT, "dangerous"),
        ("str_replace_based_edit_tool", "Edit", K.EDIT, "dangerous"),
        ("view_image", "Read", K.READ, "safe"),
        ("shell", "Bash", K.SHELL, "dangerous"),
        ("apply_patch", "ApplyPatch", K.EDIT, "dangerous"),
    ],
)
def test_catalog(name: str, canonical: str, kind: ToolKind, tier: str) -> None:
    info = tool_info(name)
    assert (info.canonical, info.kind, info.tier, info.known) == (canonical, kind, tier, True)


def test_unknown_tool() -> None:
    info = tool_info("frobnicate")
    assert info.kind is K.OTHER and not info.known


def test_codex_shell_argv_is_quoted_back_into_a_script() -> None:
    ti = extract(tool_info("shell"), {"command": ["git", "commit", "-m", "a; rm -rf /"]})
    assert ti.command == "git commit -m 'a; rm -rf /'"
    ti = extract(tool_info("shell"), {"command": ["bash", "-lc", "ls && curl x"]})
    assert ti.command == "bash -lc 'ls && curl x'"


def test_input_shapes() -> None:
    assert extract(tool_info("Read"), {"file_path": "/a"}).reads == ("/a",)
    assert extract(tool_info("read_file"), {"absolute_path": "/a"}).reads == ("/a",)
    assert extract(tool_info("read_many_files"), {"paths": ["a", "b"]}).reads == ("a", "b")
    assert extract(tool_info("NotebookEdit"), {"notebook_path": "n.ipynb"}).writes == ("n.ipynb",)
    assert extract(tool_info("Grep"), {"pattern": "x"}).reads == (".",)
    assert extract(tool_info("Glob"), {"pattern": "../../etc/*"}).reads == (".", "../../etc")
    assert extract(tool_info("move_file"), {"source": "a", "destination": "b"}).writes == ("a", "b")
    assert extract(tool_info("str_replace_editor"), {"command": "view", "path": "a"}).reads == ("a",)
    assert extract(tool_info("str_replace_editor"), {"command": "create", "path": "a", "file_text": "x"}).writes == (
        "a",
    )
    assert extract(tool_info("web_fetch"), {"prompt": "summarise https://a.io/x and http://b.io"}).urls == (
        "https://a.io/x",
        "http://b.io",
    )
    assert extract(tool_info("Write"), {"file_path": "a", "content": "é"}).write_bytes == 2
    assert extract(tool_info("Read"), {}).problems


def test_apply_patch_paths() -> None:
    patch = (
        "*** Begin Patch\n*** Add File: a.py\n+x\n*** Update File: b.py\n*** Move to: c.py\n@@\n-x\n+y\n"
        "*** Delete File: .git/hooks/pre-commit\n*** End Patch\n"
    )
    assert patch_paths(patch) == ["a.py", "b.py", ".git/hooks/pre-commit", "c.py"]
    assert extract(tool_info("apply_patch"), {"input": patch}).writes[-1] == "c.py"


@pytest.mark.parametrize(
    ("inp", "reads"),
    [
        ({"pattern": "**/*.py"}, (".",)),  # was read as reading "/"
        ({"pattern": "src/**/*.ts", "path": "/ws"}, ("/ws", "/ws/src")),
        ({"pattern": "/etc/*.conf"}, (".", "/etc")),
        ({"pattern": "../../etc/*"}, (".", "../../etc")),
    ],
)
def test_glob_pattern_directory_is_relative_to_its_path(inp, reads) -> None:
    assert extract(tool_info("Glob"), inp).reads == reads


def test_mcp_path_arguments_are_checked_both_ways(tmp_path) -> None:
    """A filesystem MCP server's read_multiple_files / write_file bypassed Read/Edit deny rules."""
    from nexusd.core.classify import classify
    from nexusd.core.model import Context, Flag
    from nexusd.policy.filesystem import DecisionFileSystem
    from nexusd.protocol import CallInfo

    ws = str(tmp_path)
    ctx = Context(cwd=ws, workspace_roots=(ws,), home="/home/u")
    cls = classify(
        CallInfo("claude", "s", "mcp__fs__read_multiple_files", {"paths": [f"{ws}/a.txt", "/home/u/.ssh/id_rsa"]}, ws),
        ctx,
        DecisionFileSystem(),
    )
    assert "/home/u/.ssh/id_rsa" in cls.reads and Flag.OUTSIDE_WORKSPACE in cls.flags
    cls = classify(
        CallInfo("claude", "s", "mcp__fs__write_file", {"path": f"{ws}/.git/hooks/pre-commit"}, ws),
        ctx,
        DecisionFileSystem(),
    )
    assert Flag.PROTECTED_PATH in cls.flags
