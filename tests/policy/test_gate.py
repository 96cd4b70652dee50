"""The gate with the real classifier, real hook and classifier subprocesses, and the real file system."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexusd.core.model import Session
from nexusd.policy.gate import decide, workspace_of
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo

pytestmark = pytest.mark.anyio


@pytest.fixture
def world(tmp_path: Path):
    d = {k: tmp_path / k for k in ("cfg", "state", "managed", "ws", "home")}
    for p in d.values():
        p.mkdir()
    (d["ws"] / ".git").mkdir()
    (d["ws"] / "src").mkdir()
    (d["ws"] / "src" / "a.py").write_text("x\n")
    (d["ws"] / ".env").write_text("SECRET=1\n")
    os.symlink("/etc/hostname", d["ws"] / "link.txt")
    return d


def mkstore(d, policy: str = "") -> PolicyStore:
    if policy:
        (d["cfg"] / "policy.toml").write_text(policy)
    s = PolicyStore(config_dir=d["cfg"], state_dir=d["state"], managed_dir=d["managed"], home=str(d["home"]))
    assert s.load() == []
    return s


def bash(d, cmd, provider="claude", mode=None, cwd=None):
    return CallInfo(provider=provider, session="s", tool="Bash" if provider != "gemini" else "run_shell_command",
                    input={"command": cmd}, cwd=str(cwd or d["ws"]), mode=mode)


def script(tmp: Path, name: str, body: str) -> str:
    p = tmp / name
    p.write_text(f"#!{sys.executable}\n{body}")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


POLICY = """
[permissions]
allow = ["Bash(git status)", "Bash(npm run test *)", "Bash(ls *)"]
ask = ["Bash(git push *)"]
deny = ["Read(./.env)", "Bash(curl *)", "Read(//etc/hostname)"]
"""


@pytest.mark.parametrize(
    ("cmd", "decision", "source"),
    [
        ("git status", "allow", "rule"),
        ("npm run test -- -k x", "allow", "rule"),
        ("git status && curl evil.io", "deny", "rule"),
        ("git status; git push origin main", "ask", "rule"),
        ("cat .env", "deny", "rule"),
        ("sort < .env", "deny", "rule"),
        ("cat link.txt", "deny", "rule"),  # the link's target matches a deny rule
        ("ls -la", "allow", "rule"),
        ("ls $(curl x)", "deny", "rule"),  # deny rules still see what parsed
        ("ls $(whoami)", "ask", "safety"),
        ("timeout 5 curl x", "deny", "rule"),  # wrappers peeled
        ("bash -c 'curl x'", "deny", "rule"),
        ("git status > /etc/x", "ask", "mode"),  # a rule allows the command, not a write outside the workspace
        ("npm run test; python -c 'import os'", "ask", "mode"),
        ("rm -rf /", "ask", "safety"),
    ],
)
async def test_real_classifier(world, cmd, decision, source):
    v = await decide(bash(world, cmd), mkstore(world, POLICY), Session(id="s"))
    assert (v.decision, v.source) == (decision, source), v


async def test_read_tool_and_symlink(world):
    s = mkstore(world, POLICY)
    c = CallInfo(provider="claude", session="s", tool="Read", input={"file_path": str(world["ws"] / "src/a.py")},
                 cwd=str(world["ws"]))
    assert (await decide(c, s, Session(id="s"))).decision == "allow"
    c = CallInfo(provider="claude", session="s", tool="Read", input={"file_path": str(world["ws"] / "link.txt")},
                 cwd=str(world["ws"]))
    assert (await decide(c, s, Session(id="s"))).decision == "deny"


async def test_gemini_rule_spelling_and_no_auto_approval(world):
    s = mkstore(world, POLICY)
    v = await decide(bash(world, "git status", provider="gemini", mode="yolo"), s, Session(id="s", provider="gemini"))
    assert v.decision == "allow" and v.source == "rule"
    v = await decide(bash(world, "make", provider="gemini"), s, Session(id="s", provider="gemini", agent_mode="yolo"))
    assert v.decision == "ask"


async def test_workspace_is_the_git_root(world):
    assert workspace_of(bash(world, "ls", cwd=world["ws"] / "src")) == os.path.realpath(world["ws"])


@pytest.mark.parametrize(
    ("body", "on_error", "expected", "source"),
    [
        ('import sys, json; json.load(sys.stdin); print(json.dumps({"decision": "deny", "reason": "no"}))', "deny",
         "deny", "hook"),
        ('import sys, json; json.load(sys.stdin); print(json.dumps({"decision": "ask"}))', "deny", "ask", "hook"),
        ('import sys, json; json.load(sys.stdin); print(json.dumps({"decision": "allow"}))', "deny", "allow",
         "rule"),
        ("import sys; sys.exit(1)", "deny", "deny", "hook"),
        ("import sys; sys.exit(1)", "allow", "allow", "rule"),
        ("import sys; sys.stderr.write('blocked'); sys.exit(2)", "allow", "deny", "hook"),
        ("print('not json')", "deny", "deny", "hook"),
        ("import time; time.sleep(30)", "deny", "deny", "hook"),
        ("import time; time.sleep(30)", "ask", "ask", "hook"),
    ],
)
async def test_hooks(world, tmp_path, body, on_error, expected, source):
    h = script(tmp_path, "hook", body)
    pol = POLICY + f'\n[[hooks]]\ncommand = ["{h}"]\ntimeout = 0.5\non_error = "{on_error}"\n'
    v = await decide(bash(world, "git status"), mkstore(world, pol), Session(id="s"))
    assert (v.decision, v.source) == (expected, source), v


async def test_hook_gets_the_request(world, tmp_path):
    out = tmp_path / "seen.json"
    h = script(tmp_path, "hook", f'import sys, json; d = json.load(sys.stdin); open("{out}", "w").write(json.dumps(d));'
                                 'print(json.dumps({"decision": "allow"}))')
    pol = POLICY + f'\n[[hooks]]\ncommand = ["{h}"]\n'
    await decide(bash(world, "git status"), mkstore(world, pol), Session(id="s"))
    import json

    seen = json.loads(out.read_text())
    assert seen["call"]["input"]["command"] == "git status"
    assert seen["details"]["commands"] == [["git", "status"]]


async def test_hook_not_run_in_a_check(world, tmp_path):
    out = tmp_path / "ran"
    h = script(tmp_path, "hook", f'open("{out}", "w").write("x"); print("{{}}")')
    pol = POLICY + f'\n[[hooks]]\ncommand = ["{h}"]\n'
    await decide(bash(world, "git status"), mkstore(world, pol), Session(id="s"), dry_run=True)
    assert not out.exists()


async def test_auto_mode_classifier(world, tmp_path):
    block = script(tmp_path, "cls", 'import json, sys; json.load(sys.stdin); print(json.dumps({"shouldBlock": true,'
                                    ' "reason": "exfil"}))'.replace("true", "True"))
    pol = f'[classifier]\ncommand = ["{block}"]\nmax_denials = 2\n'
    s = mkstore(world, pol)
    sess = Session(id="s", agent_mode="auto")
    v1 = await decide(bash(world, "curl x"), s, sess)
    v2 = await decide(bash(world, "curl x"), s, sess)
    assert [v1.decision, v2.decision] == ["deny", "deny"] and v1.source == "classifier"
    assert sess.classifier_denials == 2
    v3 = await decide(bash(world, "curl x"), s, sess)
    assert (v3.decision, v3.source) == ("ask", "mode")  # after N denials, a person
    allow = script(tmp_path, "cls2", 'print(\'{"decision": "allow"}\')')
    (world["cfg"] / "policy.toml").write_text(f'[classifier]\ncommand = ["{allow}"]\n')
    os.utime(world["cfg"] / "policy.toml", ns=(5, 5))
    s.load()
    sess.classifier_denials = 0
    assert (await decide(bash(world, "curl x"), s, sess)).decision == "allow"
    assert (await decide(bash(world, "rm -rf /"), s, sess)).source == "safety"  # never to the classifier


async def test_classifier_fail_closed(world, tmp_path):
    broken = script(tmp_path, "cls", "import sys; sys.exit(3)")
    s = mkstore(world, f'[classifier]\ncommand = ["{broken}"]\n')
    v = await decide(bash(world, "curl x"), s, Session(id="s", agent_mode="auto"))
    assert (v.decision, v.source) == ("deny", "classifier")


async def test_trust_prompt_for_a_project_policy(world):
    (world["ws"] / ".nexus").mkdir()
    (world["ws"] / ".nexus" / "policy.toml").write_text("[permissions]\nallow = ['Bash(make)']\n")
    s = mkstore(world)
    v = await decide(bash(world, "make"), s, Session(id="s"))
    assert v.decision == "ask" and "untrusted_workspace" in v.flags
    assert v.suggestions[0] == f"Trust({os.path.realpath(world['ws'])})"
    s.learn("allow", [v.suggestions[0]])
    assert (await decide(bash(world, "make"), s, Session(id="s"))).decision == "allow"


async def test_error_is_deny(world):
    s = mkstore(world)
    s.policy_for = None  # type: ignore[assignment]  # any internal failure
    v = await decide(bash(world, "ls"), s, Session(id="s"))
    assert (v.decision, v.source) == ("deny", "error")


# issue 3's property: `X *` joined with any other command through any separator, substitution or redirect
_SEPARATORS = ["; ", " && ", " || ", " | ", " |& ", " & ", "\n", " $(", " `", " > ", " >> ", " < ", " <(", " >("]
_OTHER = st.sampled_from(["rm -rf build", "curl evil.io", "python -c 1", "sh", "cat /etc/shadow", "nc -l 1",
                          "echo hi", "git push", "touch /tmp/x", "x"])
_ARGS = st.lists(st.sampled_from(["-la", "src", "--all", "a.txt", "-1"]), max_size=3)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=_ARGS, sep=st.sampled_from(_SEPARATORS), other=_OTHER, first=st.booleans())
async def test_prefix_rule_never_allows_a_joined_command(world, args, sep, other, first):
    s = mkstore(world, '[permissions]\nallow = ["Bash(ls *)"]\n')
    allowed = " ".join(["ls", *args])
    closing = ")" if sep.strip() in ("$(", "<(", ">(") else "`" if sep.strip() == "`" else ""
    cmd = f"{allowed}{sep}{other}{closing}" if first else f"{other}{sep}{allowed}{closing}"
    v = await decide(bash(world, cmd), s, Session(id="s", agent_mode="dontAsk"))
    if v.decision == "allow":
        # only when what was joined is itself harmless enough for the mode (not by the rule alone)
        assert v.source != "rule" or all(c[0] == "ls" for c in v.details.commands), (cmd, v)
