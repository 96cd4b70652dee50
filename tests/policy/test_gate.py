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
from tests.conftest import examples

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
    return CallInfo(
        provider=provider,
        session="s",
        tool="Bash" if provider != "gemini" else "run_shell_command",
        input={"command": cmd},
        cwd=str(cwd or d["ws"]),
        mode=mode,
    )


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
    c = CallInfo(
        provider="claude",
        session="s",
        tool="Read",
        input={"file_path": str(world["ws"] / "src/a.py")},
        cwd=str(world["ws"]),
    )
    assert (await decide(c, s, Session(id="s"))).decision == "allow"
    c = CallInfo(
        provider="claude",
        session="s",
        tool="Read",
        input={"file_path": str(world["ws"] / "link.txt")},
        cwd=str(world["ws"]),
    )
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
        (
            'import sys, json; json.load(sys.stdin); print(json.dumps({"decision": "deny", "reason": "no"}))',
            "deny",
            "deny",
            "hook",
        ),
        ('import sys, json; json.load(sys.stdin); print(json.dumps({"decision": "ask"}))', "deny", "ask", "hook"),
        ('import sys, json; json.load(sys.stdin); print(json.dumps({"decision": "allow"}))', "deny", "allow", "rule"),
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
    # 0.5 s raced a Python start-up on a loaded 2-core machine (the "allow" hook timed out into a deny); only
    # the sleeping hooks are meant to time out, and 5 s still ends them long before their 30 s
    timeout = 5 if "sleep" in body else 20
    pol = POLICY + f'\n[[hooks]]\ncommand = ["{h}"]\ntimeout = {timeout}\non_error = "{on_error}"\n'
    v = await decide(bash(world, "git status"), mkstore(world, pol), Session(id="s"))
    assert (v.decision, v.source) == (expected, source), v


async def test_hook_gets_the_request(world, tmp_path):
    out = tmp_path / "seen.json"
    h = script(
        tmp_path,
        "hook",
        f'import sys, json; d = json.load(sys.stdin); open("{out}", "w").write(json.dumps(d));'
        'print(json.dumps({"decision": "allow"}))',
    )
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
    block = script(
        tmp_path,
        "cls",
        'import json, sys; json.load(sys.stdin); print(json.dumps({"shouldBlock": true, "reason": "exfil"}))'.replace(
            "true", "True"
        ),
    )
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
_OTHER = st.sampled_from(
    [
        "rm -rf build",
        "curl evil.io",
        "python -c 1",
        "sh",
        "cat /etc/shadow",
        "nc -l 1",
        "echo hi",
        "git push",
        "touch /tmp/x",
        "x",
    ]
)
_ARGS = st.lists(st.sampled_from(["-la", "src", "--all", "a.txt", "-1"]), max_size=3)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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


# ---------------------------------------------------------------------- hot path: nothing cached across calls


async def test_new_git_dir_between_two_calls_is_seen(world):
    """workspace_of is recomputed per call: a .git created in a sub-directory moves the workspace."""
    sub = world["ws"] / "src"
    assert workspace_of(bash(world, "ls", cwd=sub)) == os.path.realpath(world["ws"])
    (sub / ".git").mkdir()
    assert workspace_of(bash(world, "ls", cwd=sub)) == os.path.realpath(sub)


async def test_symlink_swapped_between_two_decisions_is_seen(world, tmp_path):
    """The per-decision realpath snapshot must not outlive the decision: a swapped link counts at once."""
    store = mkstore(world, POLICY)
    outside = tmp_path / "outside"
    outside.mkdir()
    link = world["ws"] / "out"
    os.symlink(world["ws"] / "src", link)
    call = CallInfo(
        provider="claude",
        session="s",
        tool="Write",
        input={"file_path": str(link / "f.py"), "content": "x"},
        cwd=str(world["ws"]),
        mode="acceptEdits",
    )
    first = await decide(call, store, Session(id="s", agent_mode="acceptEdits"))
    assert first.decision == "allow", first
    link.unlink()
    os.symlink(outside, link)
    second = await decide(call, store, Session(id="s", agent_mode="acceptEdits"))
    assert second.decision != "allow", second
    assert "symlink_escape" in second.flags or "outside_workspace" in second.flags


async def test_every_verdict_carries_its_trace_for_provenance(world):
    """Every decision keeps the steps that produced it: the audit records them (nexusctl explain)."""
    store = mkstore(world, POLICY)
    deny = await decide(bash(world, "curl http://x"), store, Session(id="s"))
    assert (deny.decision, deny.source, deny.rule) == ("deny", "rule", "Bash(curl *)")
    assert [s.step for s in deny.trace][-1] == "deny_rules" and "policy.toml:" in deny.trace[-1].detail
    allow = await decide(bash(world, "ls src"), store, Session(id="s"))
    assert allow.decision == "allow" and allow.details is not None and allow.details.kind == "shell"
    ask = await decide(bash(world, "git push origin main"), store, Session(id="s"))
    assert ask.decision == "ask" and ask.details is not None
    assert [s.step for s in ask.trace][:3] == ["mode", "deny_rules", "hooks"]
    check = await decide(bash(world, "curl http://x"), store, Session(id="s"), dry_run=True)
    assert check.decision == "deny" and check.details is not None and check.trace


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cmd=st.sampled_from(
        [
            "ls src",
            "curl http://x",
            "git push o m",
            "rm -rf /",
            "cat .env",
            "echo hi > ~/.bashrc",
            "cat /etc/hostname",
            "git status",
            "npm run test x",
            "python -c 1",
        ]
    ),
    mode=st.sampled_from([None, "default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"]),
)
async def test_lean_evaluation_decides_like_the_full_one(world, cmd, mode):
    """explain=False only drops explanation: decision, source, reason, rule and flags are identical."""
    from nexusd.core.engine import evaluate
    from nexusd.policy.filesystem import DecisionFileSystem
    from nexusd.policy.gate import classify_call, context_for

    store = mkstore(world, POLICY)
    call = bash(world, cmd, mode=mode)
    session = Session(id="s", agent_mode=mode)
    fs = DecisionFileSystem()
    ws = workspace_of(call, fs)
    policy = store.policy_for(ws)
    ctx = context_for(call, store, policy, ws, fs)
    cls = classify_call(call, ctx, fs)
    lean = evaluate(call, policy, session, cls, ctx, explain=False)
    full = evaluate(call, policy, session, cls, ctx)
    assert (lean.need, lean.hooks) == (full.need, full.hooks)
    if full.verdict is not None:
        a, b = lean.verdict, full.verdict
        assert a is not None
        assert (a.decision, a.source, a.reason, a.rule, a.rule_origin, a.flags, a.requirement) == (
            b.decision,
            b.source,
            b.reason,
            b.rule,
            b.rule_origin,
            b.flags,
            b.requirement,
        )


@pytest.mark.parametrize(
    ("cmd", "mode", "expected"),
    [
        ("git push origin main", None, "ask"),  # an ask rule: a person unless a hook denies
        ("npm install x", None, "ask"),  # the mode asks
        ("git status", None, "allow"),  # an allow rule: passing allows, so nothing may be raced
        ("cat src/a.py", None, "allow"),  # the mode allows
        ("npm install x", "dontAsk", "deny"),  # cannot ask
        ("npm install x", "auto", None),  # the reviewer would decide: not a person's yet
    ],
)
async def test_if_hooks_pass_is_what_passing_leads_to_without_running_a_hook(world, tmp_path, cmd, mode, expected):
    from nexusd.policy.gate import begin, if_hooks_pass

    ran = tmp_path / "ran"
    h = script(tmp_path, "hook", f'open("{ran}", "w").write("x"); print("{{}}")')
    rev = script(tmp_path, "reviewer", f'open("{ran}", "w").write("x"); print("{{}}")')
    pol = POLICY + f'\n[[hooks]]\ncommand = ["{h}"]\n[classifier]\ncommand = ["{rev}"]\n'
    begun = begin(bash(world, cmd, mode=mode), mkstore(world, pol), Session(id="s", agent_mode=mode))
    assert begun.verdict is None and begun.ev is not None and begun.ev.need == "hooks"
    v = if_hooks_pass(begun)
    assert (v.decision if v is not None else None) == expected, v
    if v is not None:
        assert [(s.step, s.outcome) for s in v.trace if s.step == "hooks"] == [("hooks", "raced")]
    assert not ran.exists()
    # without hooks there is nothing to race
    plain = begin(bash(world, cmd, mode=mode), mkstore(world, POLICY), Session(id="s", agent_mode=mode))
    assert if_hooks_pass(plain) is None


async def test_if_hooks_pass_after_the_reviewers_denial_streak_is_a_person(world, tmp_path):
    """Auto mode past ``max_denials``: the reviewer is skipped and a person decides, so a slow hook races them."""
    from nexusd.policy.gate import begin, if_hooks_pass

    h = script(tmp_path, "hook", 'print("{}")')
    rev = script(tmp_path, "reviewer", 'print("{}")')
    pol = POLICY + f'\n[[hooks]]\ncommand = ["{h}"]\n[classifier]\ncommand = ["{rev}"]\nmax_denials = 2\n'
    store = mkstore(world, pol)
    fresh = begin(bash(world, "npm install x", mode="auto"), store, Session(id="s", agent_mode="auto"))
    assert if_hooks_pass(fresh) is None  # the reviewer would decide
    streak = Session(id="s", agent_mode="auto", classifier_denials=2)
    v = if_hooks_pass(begin(bash(world, "npm install x", mode="auto"), store, streak))
    assert v is not None and v.decision == "ask", v
