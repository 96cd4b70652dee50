"""``nexus-hook opencode``: what nexusd's OpenCode plugin sends (``tool.execute.before``'s input, its
``output.args`` and the plugin's directory/worktree), mapped into the canonical call; the real OpenCode
runs the plugin end to end in tests/e2e/test_e2e_opencode.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from nexus_clients import agent_settings, opencode
from nexus_clients.claude import HookInputError
from nexus_clients.wire_lean import LeanDecision

from nexusd.protocol import CallInfo
from tests.clients.test_hook import HOOK, no_daemon_env, run_hook
from tests.conftest import DaemonHandle

POLICY = """
[permissions]
deny = ["Bash(rm *)", "Read(**/.env)"]
allow = ["Bash(git status)", "Edit", "Write"]
"""


def before(tool: str, args: Any, directory: str = "/work/proj", worktree: str = "/work/proj") -> dict[str, Any]:
    return {
        "hook_event_name": "tool.execute.before",
        "tool": tool,
        "sessionID": "ses_1",
        "callID": "call_1",
        "args": args,
        "directory": directory,
        "worktree": worktree,
    }


def decision(kind: str, **kw: Any) -> LeanDecision:
    return LeanDecision({"decision": kind, "reason": kw.pop("reason", "because"), "source": "rule", **kw})


def test_mapping() -> None:
    call = opencode.call_fields_from_hook(
        before("read", {"filePath": "src/a.ts"}), env={}, agent_pid=4, fallback_cwd="/"
    )
    assert call == {
        "provider": "opencode",
        "session": "ses_1",
        "tool": "read",
        "input": {"filePath": "/work/proj/src/a.ts"},
        "cwd": "/work/proj",
        "agent_request_id": "call_1",
        "agent_pid": 4,
        "workspace": "/work/proj",
    }
    bash = opencode.call_fields_from_hook(
        before("bash", {"command": "ls", "workdir": "sub"}), env={}, agent_pid=None, fallback_cwd="/"
    )
    assert bash["cwd"] == "/work/proj/sub"
    # OpenCode outside a git repository reports worktree "/": the workspace is the directory, not the root
    loose = opencode.call_fields_from_hook(
        before("bash", {"command": "ls"}, worktree="/"), env={}, agent_pid=None, fallback_cwd="/"
    )
    assert loose["workspace"] == "/work/proj"


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {},
        before("", {}),
        before("bash", [1]),
        before("bash", {}, directory="rel"),
        before("bash", {}) | {"hook_event_name": "tool.execute.after"},
        before("bash", {}) | {"sessionID": 5},
    ],
)
def test_malformed_input_is_refused(bad: Any) -> None:
    with pytest.raises(HookInputError):
        opencode.call_fields_from_hook(bad, env={}, agent_pid=None, fallback_cwd="/")


def test_answers_and_ask_is_a_deny() -> None:
    assert opencode.answer(decision("allow")) == {"decision": "allow", "reason": "nexusd: because."}
    assert opencode.answer(decision("allow", updated_input={"command": "x"}))["args"] == {"command": "x"}
    assert opencode.answer(decision("ask"))["decision"] == "deny"
    assert opencode.answer(decision("deny", message="no"))["reason"].endswith("Message from the user: no")


def out(proc: Any) -> dict[str, Any]:
    return json.loads(proc.stdout)


def test_rules_hold_for_opencodes_tool_names(daemon_factory: Any) -> None:
    daemon: DaemonHandle = daemon_factory(policy=POLICY)
    proc = run_hook(["opencode"], before("bash", {"command": "rm -rf x"}), daemon.env)
    assert proc.returncode == 0 and out(proc)["decision"] == "deny" and "Bash(rm *)" in out(proc)["reason"]
    assert out(run_hook(["opencode"], before("bash", {"command": "git status"}), daemon.env))["decision"] == "allow"
    edit = before("edit", {"filePath": "/work/proj/a.ts", "oldString": "a", "newString": "b"})
    assert out(run_hook(["opencode"], edit, daemon.env))["decision"] == "allow"
    secret = before("read", {"filePath": "/work/proj/.env"})
    assert out(run_hook(["opencode"], secret, daemon.env))["decision"] == "deny"


@pytest.mark.parametrize(
    "path",
    [
        "opencode.json",
        "opencode.jsonc",
        ".opencode/plugins/x.js",
        "~/.config/opencode/plugins/x.js",
        "~/.config/opencode/opencode.json",
    ],
)
def test_opencodes_config_and_plugins_are_protected(daemon_factory: Any, path: str) -> None:
    daemon: DaemonHandle = daemon_factory(policy=POLICY)
    ok = before("write", {"filePath": "/work/proj/notes.md", "content": "x"})
    assert out(run_hook(["opencode"], ok, daemon.env))["decision"] == "allow"
    bad = before("write", {"filePath": path, "content": "export const X = async () => ({})"})
    assert out(run_hook(["opencode"], bad, daemon.env))["decision"] == "deny", path


def test_failures_exit_2_with_a_deny() -> None:
    down = run_hook(["opencode"], before("bash", {"command": "ls"}), no_daemon_env())
    assert down.returncode == 2 and "not reachable" in out(down)["reason"]
    bad = run_hook(["opencode"], b"{", no_daemon_env())
    assert bad.returncode == 2 and out(bad)["decision"] == "deny"


@pytest.mark.skipif(shutil.which("node") is None, reason="node runs the plugin module outside OpenCode")
@pytest.mark.parametrize("case", ["deny", "missing", "garbage"])
def test_the_plugin_throws_unless_the_hook_allows(tmp_path: Path, case: str) -> None:
    """The shipped plugin under node (OpenCode's Bun runs the same ESM): every non-allow throws."""
    if case == "missing":
        argv = [str(tmp_path / "nope")]
    elif case == "garbage":
        script = tmp_path / "garbage.sh"
        script.write_text('#!/bin/sh\necho \'{"decision": "allow"\'\n')
        script.chmod(0o755)
        argv = [str(script)]
    else:
        argv = [*HOOK, "opencode", "--timeout", "10", "--socket", str(tmp_path / "absent.sock")]
    plugin = tmp_path / "nexusd.mjs"
    plugin.write_text(agent_settings.opencode_plugin_text(argv, 10))
    driver = tmp_path / "drive.mjs"
    driver.write_text(
        f"import {{ NexusdGate }} from {json.dumps(str(plugin))};\n"
        "const hooks = await NexusdGate({ directory: '/work/proj', worktree: '/work/proj' });\n"
        "try { await hooks['tool.execute.before']({ tool: 'bash', sessionID: 's', callID: 'c' },"
        " { args: { command: 'ls' } }); console.log('RAN'); }\n"
        "catch (e) { console.log('BLOCKED ' + e.message); }\n"
    )
    proc = subprocess.run(["node", str(driver)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout.startswith("BLOCKED"), proc.stdout + proc.stderr
    assert "nexusd denied this tool call" in proc.stdout


def test_every_new_adapter_builds_a_valid_call_info() -> None:
    """The lean wire dicts are exactly what the protocol's decoder accepts (msgspec checks every field)."""
    from nexus_clients import copilot, cursor

    shell = {
        "hook_event_name": "beforeShellExecution",
        "conversation_id": "c",
        "workspace_roots": ["/w"],
        "command": "ls",
        "cwd": "/w",
    }
    pre = {"sessionId": "s", "timestamp": 1, "cwd": "/w", "toolName": "bash", "toolArgs": {"command": "ls"}}
    for mod, payload in ((cursor, shell), (copilot, pre), (opencode, before("bash", {"command": "ls"}))):
        call = CallInfo(**mod.call_fields_from_hook(payload, env={}, agent_pid=1, fallback_cwd="/"))
        assert call.provider == mod.PROVIDER and call.input["command"] == "ls"


def test_only_opencodes_own_agents_are_modes() -> None:
    """build and plan are OpenCode's modes; a user's agent named like a permissive mode is not one."""
    for agent, mode in (
        ("build", "build"),
        ("plan", "plan"),
        ("yolo", None),
        ("bypassPermissions", None),
        ("general", None),
        (None, None),
        (3, None),
    ):
        call = opencode.call_fields_from_hook(
            before("bash", {"command": "ls"}) | {"agent": agent}, env={}, agent_pid=None, fallback_cwd="/"
        )
        assert call.get("mode") == mode, agent
    from nexusd.core.policy.modes import resolve

    assert resolve("build").name == "default" and resolve("plan").name == "plan"  # type: ignore[union-attr]
