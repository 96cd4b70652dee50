"""Each mode means what the agent or permission model that named it says, through the real classifier and gate
(docs/POLICY.md's mode table says where each name comes from).

- Claude Code's acceptEdits: reads, file edits, and the common filesystem commands (mkdir, touch, rm,
  rmdir, mv, cp, sed) inside the workspace; any other shell write is asked.
- The Nexus CLI's ACCEPT_EDITS and YOLO ("auto-approve edits, prompt for other dangerous tools": delete_file,
  move_file and execute_bash stay prompted) and Gemini's autoEdit: edit tools only.
- The kill switch covers every mode that reaches danger-full-access.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nexusd.decision.offline import check_offline
from nexusd.protocol import CallInfo
from tests.conftest import short_tmpdir


@pytest.fixture(scope="module")
def world() -> tuple[Path, Path]:
    root = short_tmpdir()
    ws = root / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("x = 1\n")
    (ws / "notes.txt").write_text("n\n")
    cfg = root / "cfg"
    cfg.mkdir()
    return ws, root


def decide(world, tool: str, inp: dict, mode: str, provider: str = "claude", policy: str = "") -> str:
    ws, root = world
    cfg = root / f"cfg-{abs(hash(policy))}"
    cfg.mkdir(exist_ok=True)
    if policy:
        (cfg / "policy.toml").write_text(policy)
    call = CallInfo(provider=provider, session="s", tool=tool, input=inp, cwd=str(ws), mode=mode, workspace=str(ws))
    return check_offline(call, config_dir=cfg, state_dir=root / "state", managed_dir=root / "managed").decision


def bash(world, command: str, mode: str, **kw) -> str:
    return decide(world, "Bash", {"command": command}, mode, **kw)


ACCEPT_EDITS_ALLOWS = [
    "mkdir build",
    "touch src/b.py",
    "rm notes.txt",
    "rmdir src/x",
    "mv src/a.py src/c.py",
    "cp src/a.py src/d.py",
    "sed -i s/x/y/ src/a.py",
    "echo hi > notes.txt",
    "cat src/a.py > src/copy.py",
    "mkdir -p out && cp src/a.py out/",
]
ACCEPT_EDITS_ASKS = [
    "tee src/t.py < notes.txt",
    "chmod +x src/a.py",
    "ln -s src/a.py link",
    "truncate -s0 notes.txt",
    "timeout 5 rm notes.txt",
    "shred notes.txt",
    "mkdir /tmp/outside-ws",
    "npm install",
]


@pytest.mark.parametrize("command", ACCEPT_EDITS_ALLOWS)
def test_claude_accept_edits_allows_edits_and_filesystem_commands(world, command):
    assert bash(world, command, "acceptEdits") == "allow"


@pytest.mark.parametrize("command", ACCEPT_EDITS_ASKS)
def test_claude_accept_edits_asks_other_writers(world, command):
    assert bash(world, command, "acceptEdits") == "ask"


@pytest.mark.parametrize("mode", ["ACCEPT_EDITS", "YOLO"])
@pytest.mark.parametrize("command", ["mkdir build", "rm notes.txt", "echo hi > notes.txt", "sed -i s/x/y/ src/a.py"])
def test_nexus_cli_edit_modes_prompt_for_shell(world, mode, command):
    """The Nexus CLI: ``case "ACCEPT_EDITS": case "YOLO": return tier === "dangerous" && !isEditTool(toolName)``."""
    assert bash(world, command, mode) == "ask"


@pytest.mark.parametrize("mode", ["ACCEPT_EDITS", "YOLO", "acceptEdits"])
def test_edit_tools_are_allowed_by_every_edit_mode(world, mode):
    ws, _ = world
    assert decide(world, "Edit", {"file_path": f"{ws}/src/a.py", "old_string": "x", "new_string": "y"}, mode) == "allow"
    # Write overwrites whole files: Claude's acceptEdits allows it; the Nexus CLI's edit tools exclude write_file
    expected = "allow" if mode == "acceptEdits" else "ask"
    assert decide(world, "Write", {"file_path": f"{ws}/src/new.py", "content": "z"}, mode) == expected


@pytest.mark.parametrize("mode", ["ACCEPT_EDITS", "YOLO"])
@pytest.mark.parametrize(
    "tool,inp",
    [("delete_file", {"path": "WS/notes.txt"}), ("move_file", {"source": "WS/notes.txt", "destination": "WS/n2.txt"})],
)
def test_nexus_cli_restricted_tools_are_prompted(world, mode, tool, inp):
    """The Nexus CLI's RESTRICTED_TOOLS (delete_file, move_file) are not edit tools: prompted in ACCEPT_EDITS."""
    ws, _ = world
    inp = {k: v.replace("WS", str(ws)) for k, v in inp.items()}
    assert decide(world, tool, inp, mode) == "ask"


@pytest.mark.parametrize("mode", ["autoEdit", "auto_edit"])
def test_gemini_auto_edit_approves_edits_only(world, mode):
    ws, _ = world
    pol = "[providers.gemini]\nauto_approval = true\n"
    assert (
        decide(
            world,
            "replace",
            {"file_path": f"{ws}/src/a.py", "old_string": "x", "new_string": "y"},
            mode,
            provider="gemini",
            policy=pol,
        )
        == "allow"
    )
    assert decide(world, "run_shell_command", {"command": "mkdir build"}, mode, provider="gemini", policy=pol) == "ask"


@pytest.mark.parametrize(
    "mode", ["bypassPermissions", "danger-full-access", "DANGER_FULL_ACCESS", "allow", "yolo", "BYPASS_PERMISSIONS"]
)
def test_kill_switch_covers_every_full_access_mode(world, mode):
    pol = "[permissions]\ndisable_bypass = true\n"
    assert bash(world, "npm install", mode) == "allow"
    assert bash(world, "npm install", mode, policy=pol) == "ask"


@pytest.mark.parametrize("command", ["ls", "git status", "cat src/a.py"])
def test_gemini_ask_names_the_setting_and_how_to_change_it(world, command):
    """Issue "first hour": Gemini asked for `ls` with "Bash needs read-only; mode default asks", hiding the cause."""
    ws, root = world
    call = CallInfo(
        provider="gemini",
        session="s",
        tool="run_shell_command",
        input={"command": command},
        cwd=str(ws),
        workspace=str(ws),
    )
    v = check_offline(call, config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "managed")
    assert v.decision == "ask"
    assert "[providers.gemini] auto_approval = false" in v.reason and "auto_approval = true" in v.reason
    assert "allow rule" in v.reason
    pol = "[providers.gemini]\nauto_approval = true\n"
    assert bash_provider(world, command, "gemini", pol) == "allow"


def bash_provider(world, command: str, provider: str, policy: str) -> str:
    return decide(world, "run_shell_command", {"command": command}, "default", provider=provider, policy=policy)


MODES_THAT_ASK = ["default", "acceptEdits", "plan", "auto", "ACCEPT_EDITS", "CAUTIOUS"]


@pytest.mark.parametrize("tool", ["ExitPlanMode", "exit_plan_mode"])
@pytest.mark.parametrize("mode", MODES_THAT_ASK)
def test_leaving_plan_mode_is_a_persons_approval(world, tool, mode):
    """ExitPlanMode was classified read-only and auto-allowed: it is the plan's approval (issue 14, class 11)."""
    provider = "gemini" if tool == "exit_plan_mode" else "claude"
    assert decide(world, tool, {"plan": "1. do x"}, mode, provider=provider) == "ask"
    assert decide(world, tool, {"plan": "1. do x"}, "dontAsk", provider=provider) == "deny"


@pytest.mark.parametrize(
    ("tool", "provider"),
    [("AskUserQuestion", "claude"), ("EnterPlanMode", "claude"), ("ask_user", "gemini"), ("enter_plan_mode", "gemini")],
)
@pytest.mark.parametrize("mode", ["default", "plan", "dontAsk", "acceptEdits"])
def test_asking_the_user_and_entering_plan_mode_need_no_approval(world, tool, provider, mode):
    """They were unknown tools and denied: an agent could not even ask its user a question."""
    inp = {"questions": [{"question": "Which database?", "options": ["a", "b"]}]} if "ask" in tool.lower() else {}
    assert decide(world, tool, inp, mode, provider=provider) == "allow"


@pytest.mark.parametrize("tool", ["get_weather", "calculate"])
def test_nexus_cli_safe_tools_are_allowed(world, tool):
    """The Nexus CLI lists get_weather and calculate as safe; they were asked as unknown tools."""
    assert decide(world, tool, {"x": 1}, "default") == "allow"


# --------------------------------------------------------------------------- the Nexus CLI's tiers (seed 004)
# getToolTier: read_file, list_files, search_files (and view_image) are safe; write_file, execute_command,
# delete_file, edit_file, create_file dangerous; anything else (execute_bash included) cautious. DEFAULT
# prompts for cautious and dangerous; ACCEPT_EDITS and YOLO for dangerous tools that are not EDIT_TOOLS
# (str_replace_editor, str_replace_based_edit_tool, edit_file, create_file), and the seed's own test
# expects execute_bash prompted there too.


@pytest.mark.parametrize("mode", ["DEFAULT", "ACCEPT_EDITS", "YOLO", "CAUTIOUS"])
@pytest.mark.parametrize("tool", ["execute_bash", "execute_command"])
@pytest.mark.parametrize("command", ["ls", "pwd", "git status", "cat notes.txt"])
def test_nexus_cli_modes_prompt_for_every_shell_tool_whatever_the_command(world, mode, tool, command):
    assert decide(world, tool, {"command": command}, mode, provider="nexus") == "ask"


@pytest.mark.parametrize("mode", ["ACCEPT_EDITS", "YOLO"])
def test_nexus_cli_edit_modes_approve_its_edit_tools_but_not_write_file(world, mode):
    ws, _ = world
    f = f"{ws}/src/a.py"
    assert decide(world, "edit_file", {"path": f, "old_string": "x", "new_string": "y"}, mode) == "allow"
    assert decide(world, "create_file", {"path": f"{ws}/src/n.py", "content": "z"}, mode) == "allow"
    assert decide(world, "str_replace_editor", {"path": f, "old_str": "x", "new_str": "y"}, mode) == "allow"
    assert decide(world, "write_file", {"path": f"{ws}/src/w.py", "content": "z"}, mode) == "ask"
    assert decide(world, "edit_file", {"path": "/etc/hosts", "old_string": "a", "new_string": "b"}, mode) == "ask"


@pytest.mark.parametrize("mode", ["DEFAULT", "ACCEPT_EDITS", "YOLO"])
def test_nexus_cli_safe_tools_are_approved_even_outside_the_workspace(world, mode, tmp_path):
    """The seed's own test: DEFAULT auto-approves ``read_file /tmp/test.txt``."""
    (tmp_path / "test.txt").write_text("t\n")
    assert decide(world, "read_file", {"path": str(tmp_path / "test.txt")}, mode) == "allow"
    assert decide(world, "list_files", {"path": str(tmp_path)}, mode) == "allow"


@pytest.mark.parametrize("mode", ["DEFAULT", "ACCEPT_EDITS", "YOLO"])
@pytest.mark.parametrize("secret", ["~/.ssh/id_rsa", "~/.aws/credentials", "~/.bashrc", "/proc/self/environ"])
def test_nexus_cli_safe_tools_never_read_secrets_or_protected_files_by_mode(world, mode, secret):
    assert decide(world, "read_file", {"path": secret}, mode) != "allow"


def test_cautious_reads_only_inside_the_workspace_and_asks_every_other_tool(world, tmp_path):
    ws, _ = world
    assert decide(world, "read_file", {"path": f"{ws}/notes.txt"}, "CAUTIOUS") == "allow"
    assert decide(world, "read_file", {"path": str(tmp_path)}, "CAUTIOUS") == "ask"
    assert decide(world, "WebFetch", {"url": "https://example.com/", "prompt": "x"}, "CAUTIOUS") == "ask"
