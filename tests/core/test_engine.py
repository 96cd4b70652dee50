"""The decision order, one row per case (polkit style), over hand-built classifications.

Classification is an argument of the engine, so these rows pin the engine alone; the integration
with the real classifier is in tests/policy/test_gate.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "policy"))

from policy_factories import CTX, DFA, HOME, RO, WS, WW, call, edit, fetch, policy, read, session, shell, tool

from nexusd.core.engine import ClassifierAnswer, HookAnswer, evaluate
from nexusd.core.model import Flag, Redirect, ToolKind
from nexusd.core.policy.policy import ClassifierSpec, HookSpec, Policy, ProviderSettings
from nexusd.core.policy.rules import parse_rule

NOPOL = Policy()


def decide(cls, pol=NOPOL, mode=None, provider="claude", **kw):
    ev = evaluate(call(provider=provider), pol, session(mode, provider), cls, CTX, **kw)
    assert ev.verdict is not None, ev
    return ev.verdict


# ---------------------------------------------------------------- mode x tool kind (no rules)
# (mode, classification, expected decision)
MODE_ROWS = [
    # default: reads in the workspace allowed, everything else asked
    ("default", read(f"{WS}/a.py"), "allow"),
    ("default", read("/etc/hosts"), "ask"),
    ("default", edit(f"{WS}/a.py"), "ask"),
    ("default", shell("ls -la", req=RO), "allow"),
    ("default", shell("rm x", req=WW, writes=[f"{WS}/x"]), "ask"),
    ("default", shell("curl x", req=DFA), "ask"),
    ("default", fetch("example.com"), "ask"),
    ("default", tool("mcp__gh__list", ToolKind.MCP), "ask"),
    ("default", tool("Task", ToolKind.AGENT), "ask"),
    ("default", tool("Frobnicate", ToolKind.OTHER, flags=[Flag.UNKNOWN_TOOL]), "ask"),
    ("default", tool("Grep", ToolKind.READ, RO), "allow"),
    ("manual", edit(f"{WS}/a.py"), "ask"),
    # acceptEdits and its spellings
    ("acceptEdits", edit(f"{WS}/a.py"), "allow"),
    ("acceptEdits", edit("/etc/passwd"), "ask"),
    ("acceptEdits", shell("mkdir build", req=WW), "allow"),
    ("acceptEdits", shell("curl x", req=DFA), "ask"),
    ("ACCEPT_EDITS", edit(f"{WS}/a.py"), "allow"),
    ("YOLO", edit(f"{WS}/a.py"), "allow"),
    ("YOLO", shell("curl x", req=DFA), "ask"),
    ("autoEdit", edit(f"{WS}/a.py"), "allow"),
    ("auto_edit", edit(f"{WS}/a.py"), "allow"),
    ("workspace-write", edit(f"{WS}/a.py"), "allow"),
    ("workspace-write", shell("curl x", req=DFA), "ask"),
    # plan: reads only, writes and commands denied instead of asked
    ("plan", read(f"{WS}/a.py"), "allow"),
    ("plan", edit(f"{WS}/a.py"), "deny"),
    ("plan", shell("rm x", req=WW), "deny"),
    ("plan", fetch("example.com"), "ask"),
    ("PLAN", edit(f"{WS}/a.py"), "deny"),
    # dontAsk: what would be asked is denied
    ("dontAsk", read(f"{WS}/a.py"), "allow"),
    ("dontAsk", edit(f"{WS}/a.py"), "deny"),
    ("dontAsk", fetch("example.com"), "deny"),
    # bypass and its spellings: everything but safety
    ("bypassPermissions", shell("curl x", req=DFA), "allow"),
    ("bypassPermissions", edit("/etc/passwd"), "allow"),
    ("BYPASS_PERMISSIONS", tool("mcp__gh__x", ToolKind.MCP), "allow"),
    ("yolo", shell("curl x", req=DFA), "allow"),
    ("danger-full-access", shell("curl x", req=DFA), "allow"),
    ("allow", shell("curl x", req=DFA), "allow"),
    # five-tier read-only: anything above is denied; prompt asks
    ("read-only", read(f"{WS}/a"), "allow"),
    ("read-only", edit(f"{WS}/a"), "deny"),
    ("prompt", edit(f"{WS}/a"), "ask"),
    ("prompt", read(f"{WS}/a"), "allow"),
    # Nexus CLI's CAUTIOUS: shell always asked, safe reads allowed
    ("CAUTIOUS", shell("ls", req=RO), "ask"),
    ("CAUTIOUS", read(f"{WS}/a"), "allow"),
    ("DEFAULT", shell("ls", req=RO), "ask"),  # the Nexus CLI prompts for every cautious/dangerous tool
    # unknown mode: default
    ("weird-mode", edit(f"{WS}/a"), "ask"),
    ("weird-mode", read(f"{WS}/a"), "allow"),
    # auto without a classifier: acceptEdits, then ask
    ("auto", edit(f"{WS}/a"), "allow"),
    ("auto", shell("curl x", req=DFA), "ask"),
]


@pytest.mark.parametrize(("mode", "cls", "expected"), MODE_ROWS, ids=[f"{m}-{c.tool}-{e}" for m, c, e in MODE_ROWS])
def test_mode_by_kind(mode, cls, expected):
    v = decide(cls, mode=mode)
    assert v.decision == expected, v
    assert v.trace[0].step == "mode"
    assert v.requirement == cls.requirement.label


# ---------------------------------------------------------------- safety: every mode, bypass included
SAFETY_ROWS = [
    (Flag.PROTECTED_PATH, edit(f"{WS}/.git/hooks/pre-commit", flags=[Flag.PROTECTED_PATH])),
    (Flag.CATASTROPHIC, shell("rm -rf /", req=DFA, flags=[Flag.CATASTROPHIC])),
    (Flag.UNPARSEABLE, shell("ls", flags=[Flag.UNPARSEABLE])),
    (Flag.DYNAMIC, shell("echo", flags=[Flag.DYNAMIC])),
]
ALL_MODES = [
    "default",
    "acceptEdits",
    "auto",
    "bypassPermissions",
    "yolo",
    "BYPASS_PERMISSIONS",
    "allow",
    "danger-full-access",
    "workspace-write",
    "prompt",
    "CAUTIOUS",
]


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize(("flag", "cls"), SAFETY_ROWS, ids=[str(f) for f, _ in SAFETY_ROWS])
def test_safety_needs_a_person_in_every_mode(mode, flag, cls):
    pol = policy(allow=["Bash", "Edit", "Bash(rm *)"])
    v = decide(cls, pol, mode=mode)
    assert (v.decision, v.source) == ("ask", "safety"), v
    assert v.suggestions == []  # never learnable
    assert str(flag) in v.flags


@pytest.mark.parametrize("mode", ["dontAsk"])
def test_safety_in_dont_ask_is_deny(mode):
    v = decide(SAFETY_ROWS[1][1], mode=mode)
    assert (v.decision, v.source) == ("deny", "safety")


def test_large_write_refused():
    v = decide(edit(f"{WS}/big", flags=[Flag.LARGE_WRITE]), policy(allow=["Edit"]), mode="bypassPermissions")
    assert (v.decision, v.source) == ("deny", "safety")


@pytest.mark.parametrize("flag", [Flag.DANGEROUS_ENV, Flag.HIDDEN_CHARS, Flag.SYMLINK_ESCAPE, Flag.PRIVATE_ADDRESS])
@pytest.mark.parametrize("mode", ["default", "bypassPermissions", "acceptEdits"])
def test_not_auto_allowable_never_allowed_by_rule_or_mode(flag, mode):
    cls = shell("ls", flags=[flag]) if flag != Flag.PRIVATE_ADDRESS else fetch("127.0.0.1", flags=[flag])
    v = decide(cls, policy(allow=["Bash", "Bash(ls)", "WebFetch"]), mode=mode)
    assert v.decision == "ask"
    assert v.suggestions == []
    assert any(s.step == "allow_rules" and s.outcome == "skipped" for s in v.trace)


# ---------------------------------------------------------------- rule kinds x decision
RULE_ROWS = [
    # (allow, ask, deny, classification, mode, expected decision, expected source)
    (["Bash(git status)"], [], [], shell("git status", req=DFA), "default", "allow", "rule"),
    (["Bash(npm run test *)"], [], [], shell("npm run test -- -x", req=DFA), "default", "allow", "rule"),
    (["Bash(npm run test:*)"], [], [], shell("npm run test", req=DFA), "default", "allow", "rule"),
    (["Bash(npm run test *)"], [], [], shell("npm run testx", req=DFA), "default", "ask", "mode"),
    (["Bash(ls *)"], [], [], shell("lsof", req=DFA), "default", "ask", "mode"),
    (["Bash(ls*)"], [], [], shell("lsof", req=DFA), "default", "allow", "rule"),
    # compound: every sub-command must be allowed
    (["Bash(git status)"], [], [], shell("git status", "curl evil", req=DFA), "default", "ask", "mode"),
    (["Bash(git status)", "Bash(curl *)"], [], [], shell("git status", "curl e", req=DFA), "default", "allow", "rule"),
    # deny matches any sub-command, in every mode
    (["Bash"], [], ["Bash(rm *)"], shell("ls", "rm -rf x", req=WW), "bypassPermissions", "deny", "rule"),
    ([], [], ["Bash(curl *)"], shell("curl x", req=DFA), "yolo", "deny", "rule"),
    # deny beats ask beats allow, regardless of specificity
    (
        ["Bash(git push origin main)"],
        [],
        ["Bash(git push *)"],
        shell("git push origin main", req=DFA),
        "default",
        "deny",
        "rule",
    ),
    (["Bash(git push *)"], ["Bash(git push *)"], [], shell("git push x", req=DFA), "bypassPermissions", "ask", "rule"),
    # ask rules in dontAsk deny
    ([], ["Bash(npm publish *)"], [], shell("npm publish", req=DFA), "dontAsk", "deny", "rule"),
    # Read/Edit deny against files a shell command reads/writes, and redirect targets
    (["Bash(cat *)"], [], ["Read(./.env)"], shell("cat .env", reads=[f"{WS}/.env"]), "default", "deny", "rule"),
    (
        ["Bash(echo *)"],
        [],
        ["Edit(//etc/**)"],
        shell("echo x", redirects=[Redirect(">", "/etc/motd")]),
        "default",
        "deny",
        "rule",
    ),
    (
        ["Bash(sort *)"],
        [],
        ["Read(**/secret*)"],
        shell("sort", redirects=[Redirect("<", "conf/secret.txt")]),
        "default",
        "deny",
        "rule",
    ),
    # Read/Edit allow
    (["Read(//etc/hosts)"], [], [], read("/etc/hosts"), "default", "allow", "rule"),
    (["Edit(/src/**)"], [], [], edit(f"{WS}/src/a.py"), "default", "allow", "rule"),
    (["Edit(/src/**)"], [], [], edit(f"{WS}/lib/a.py"), "default", "ask", "mode"),
    (["Read(~/notes/**)"], [], [], read(f"{HOME}/notes/a.md"), "default", "allow", "rule"),
    # a shell allow rule does not carry files outside the workspace
    (["Bash(cat *)"], [], [], shell("cat /etc/shadow", reads=["/etc/shadow"]), "default", "ask", "mode"),
    (
        ["Bash(cat *)", "Read(//etc/hosts)"],
        [],
        [],
        shell("cat /etc/hosts", reads=["/etc/hosts"]),
        "default",
        "allow",
        "rule",
    ),
    (
        ["Bash(cp *)"],
        [],
        [],
        shell("cp a /tmp/b", req=WW, reads=[f"{WS}/a"], writes=["/tmp/b"]),
        "default",
        "ask",
        "mode",
    ),
    # WebFetch domains
    (["WebFetch(domain:example.com)"], [], [], fetch("example.com"), "default", "allow", "rule"),
    (["WebFetch(domain:example.com)"], [], [], fetch("www.example.com"), "default", "ask", "mode"),
    (["WebFetch(domain:*.example.com)"], [], [], fetch("docs.example.com"), "default", "allow", "rule"),
    (["WebFetch(domain:*.example.com)"], [], [], fetch("example.com.evil.io"), "default", "ask", "mode"),
    ([], [], ["WebFetch(domain:evil.io)"], fetch("evil.io"), "bypassPermissions", "deny", "rule"),
    (["WebFetch"], [], [], fetch("any.org"), "default", "allow", "rule"),
    # MCP
    (["mcp__gh"], [], [], tool("mcp__gh__list_issues", ToolKind.MCP), "default", "allow", "rule"),
    (["mcp__gh__*"], [], [], tool("mcp__gh__list_issues", ToolKind.MCP), "default", "allow", "rule"),
    (["mcp__gh__list_issues"], [], [], tool("mcp__gh__create", ToolKind.MCP), "default", "ask", "mode"),
    (["mcp__gh"], [], [], tool("mcp__ghx__list", ToolKind.MCP), "default", "ask", "mode"),
    ([], [], ["mcp__gh__delete_repo"], tool("mcp__gh__delete_repo", ToolKind.MCP), "bypassPermissions", "deny", "rule"),
    # other tools
    (["WebSearch"], [], [], tool("WebSearch", ToolKind.SEARCH), "default", "allow", "rule"),
    (["Task"], [], [], tool("Task", ToolKind.AGENT), "default", "allow", "rule"),
    (["Agent"], [], [], tool("Task", ToolKind.AGENT), "default", "allow", "rule"),
    (["Task"], [], [], tool("Agent", ToolKind.AGENT), "default", "allow", "rule"),
    (["Read"], [], [], tool("WebSearch", ToolKind.SEARCH), "default", "ask", "mode"),
    # a rule in another provider's spelling covers the kind
    (["run_shell_command(git status)"], [], [], shell("git status", req=DFA), "default", "allow", "rule"),
]


@pytest.mark.parametrize(("allow", "ask", "deny", "cls", "mode", "decision", "source"), RULE_ROWS)
def test_rules(allow, ask, deny, cls, mode, decision, source):
    v = decide(cls, policy(allow, ask, deny), mode=mode)
    assert (v.decision, v.source) == (decision, source), v
    if source == "rule":
        assert v.rule and v.rule_origin and ":" in v.rule_origin


def test_trace_order_and_rule_origin():
    v = decide(shell("git status", req=DFA), policy(allow=["Bash(git status)"]))
    assert [s.step for s in v.trace] == ["mode", "deny_rules", "hooks", "ask_rules", "safety", "allow_rules"]
    assert v.rule == "Bash(git status)"
    assert v.rule_origin == f"{WS}/policy.toml:1"
    assert v.details is not None and v.details.commands == [["git", "status"]]


def test_final_deny_trace():
    v = decide(edit(f"{WS}/a"), mode="read-only")
    assert (v.decision, v.source) == ("deny", "default")
    assert v.trace[-1].step == "final"


# ---------------------------------------------------------------- symlinks: deny on link or target, allow needs both


def _link_eval(rule_kind, rule, file_path, canonical):
    cls = read(canonical)
    pol = policy(**{rule_kind: [rule]})
    c = call("Read", file_path=file_path)
    ev = evaluate(c, pol, session(), cls, CTX)
    return ev.verdict


def test_symlink_deny_fires_on_link_name():
    v = _link_eval("deny", "Read(./link.txt)", f"{WS}/link.txt", "/etc/passwd")
    assert v.decision == "deny"


def test_symlink_deny_fires_on_target():
    v = _link_eval("deny", "Read(//etc/passwd)", f"{WS}/link.txt", "/etc/passwd")
    assert v.decision == "deny"


def test_symlink_allow_needs_both():
    v = _link_eval("allow", "Read(./link.txt)", f"{WS}/link.txt", "/etc/passwd")
    assert v.decision == "ask"
    v = _link_eval("allow", "Read(**)", f"{WS}/docs/link.txt", f"{WS}/docs/real.txt")
    assert v.decision == "allow"


# ---------------------------------------------------------------- hooks


def _hook(on_error="deny"):
    return HookSpec(command=("/bin/hook",), on_error=on_error)


@pytest.mark.parametrize(
    ("answer", "mode", "expected", "source"),
    [
        ("deny", "bypassPermissions", "deny", "hook"),
        ("ask", "bypassPermissions", "ask", "hook"),
        ("ask", "dontAsk", "deny", "hook"),
        ("allow", "default", "ask", "mode"),  # allow continues: the mode still asks for an edit
        ("allow", "acceptEdits", "allow", "mode"),
    ],
)
def test_hook_answers(answer, mode, expected, source):
    pol = Policy(hooks=(_hook(),))
    cls = edit(f"{WS}/a")
    first = evaluate(call(), pol, session(mode), cls, CTX)
    assert first.need == "hooks" and first.verdict is None
    v = evaluate(call(), pol, session(mode), cls, CTX, hooks=[HookAnswer(_hook(), answer)]).verdict
    assert (v.decision, v.source) == (expected, source)


def test_deny_rule_runs_before_hooks():
    pol = Policy(hooks=(_hook(),), rules=(parse_rule("Edit", "deny"),))
    ev = evaluate(call(), pol, session(), edit(f"{WS}/a"), CTX)
    assert ev.verdict is not None and ev.verdict.decision == "deny"


def test_hook_ask_beats_allow_rule():
    pol = Policy(hooks=(_hook(),), rules=(parse_rule("Edit", "allow"),))
    v = evaluate(call(), pol, session(), edit(f"{WS}/a"), CTX, hooks=[HookAnswer(_hook(), "ask")]).verdict
    assert v.decision == "ask"


def test_hook_tool_filter():
    h = HookSpec(command=("/bin/h",), tools=(parse_rule("Bash", "allow"),))
    ev = evaluate(call(), Policy(hooks=(h,)), session(), edit(f"{WS}/a"), CTX)
    assert ev.verdict is not None  # not a shell call: the hook does not apply
    assert any(s.step == "hooks" and s.outcome == "skipped" for s in ev.verdict.trace)


def test_check_skips_hooks_and_says_so():
    ev = evaluate(call(), Policy(hooks=(_hook(),)), session(), edit(f"{WS}/a"), CTX, dry_run=True)
    assert ev.verdict is not None
    assert any(s.step == "hooks" and s.outcome == "skipped" for s in ev.verdict.trace)


# ---------------------------------------------------------------- auto mode's classifier

CLS = ClassifierSpec(command=("/bin/classify",), max_denials=3)


def _auto(answer=None, denials=0, spec=CLS):
    s = session("auto", classifier_denials=denials)
    return evaluate(call(), Policy(classifier=spec), s, shell("curl x", req=DFA), CTX, classifier=answer)


def test_classifier_needed_then_allow_deny():
    assert _auto().need == "classifier"
    ev = _auto(ClassifierAnswer("allow", "fine"))
    assert (ev.verdict.decision, ev.verdict.source, ev.classifier_outcome) == ("allow", "classifier", "allow")
    ev = _auto(ClassifierAnswer("deny", "exfil"))
    assert (ev.verdict.decision, ev.verdict.source, ev.classifier_outcome) == ("deny", "classifier", "deny")


def test_classifier_fail_closed_and_fail_open():
    assert _auto(ClassifierAnswer("error", "timeout")).verdict.decision == "deny"
    spec = ClassifierSpec(command=("/bin/c",), on_error="ask")
    assert _auto(ClassifierAnswer("error", "timeout"), spec=spec).verdict.decision == "ask"


def test_classifier_after_n_denials_falls_back_to_a_person():
    ev = _auto(denials=3)
    assert ev.verdict is not None and ev.verdict.decision == "ask"
    assert any(s.step == "classifier" and "consecutive" in s.detail for s in ev.verdict.trace)


def test_classifier_not_asked_for_edits_in_workspace():
    ev = evaluate(call(), Policy(classifier=CLS), session("auto"), edit(f"{WS}/a"), CTX)
    assert ev.verdict is not None and ev.verdict.decision == "allow"


def test_classifier_never_sees_safety_calls():
    ev = evaluate(call(), Policy(classifier=CLS), session("auto"), SAFETY_ROWS[1][1], CTX)
    assert ev.verdict is not None and ev.verdict.source == "safety"


# ---------------------------------------------------------------- providers, managed limits, kill switch


def test_gemini_has_no_auto_approval_by_default():
    for mode in ("yolo", "autoEdit", "default"):
        v = decide(edit(f"{WS}/a"), mode=mode, provider="gemini")
        assert v.decision == "ask", mode
    assert decide(read(f"{WS}/a"), mode="default", provider="gemini").decision == "allow"  # a safe tool
    assert decide(shell("ls"), mode="yolo", provider="gemini").decision == "ask"
    pol = policy(allow=["Bash(ls)"])
    assert decide(shell("ls"), pol, mode="default", provider="gemini").decision == "allow"  # explicit rules apply


def test_gemini_auto_approval_turned_on():
    pol = Policy(providers={"gemini": ProviderSettings(auto_approval=True)})
    assert decide(edit(f"{WS}/a"), pol, mode="autoEdit", provider="gemini").decision == "allow"


def test_provider_allowed_modes():
    pol = Policy(providers={"claude": ProviderSettings(allowed_modes=frozenset({"default", "plan"}))})
    v = decide(shell("curl x", req=DFA), pol, mode="bypassPermissions")
    assert v.decision == "ask"
    assert "not permitted" in v.trace[0].detail


def test_managed_allowed_modes_cap_person_override():
    pol = Policy(allowed_modes=frozenset({"default", "accept_edits"}))
    s = session("default", override_mode="bypassPermissions")
    v = evaluate(call(), pol, s, shell("curl x", req=DFA), CTX).verdict
    assert v.decision == "ask"


def test_person_override_beats_agent_mode():
    s = session("default", override_mode="acceptEdits")
    assert evaluate(call(), NOPOL, s, edit(f"{WS}/a"), CTX).verdict.decision == "allow"


def test_disable_bypass_kill_switch():
    pol = Policy(disable_bypass=True, disable_bypass_origin="/etc/nexus/policy.toml:3")
    for mode in (
        "bypassPermissions",
        "BYPASS_PERMISSIONS",
        "yolo",
        "allow",
        "danger-full-access",
        "DANGER_FULL_ACCESS",
        "danger_full_access",
        "bypass",
    ):
        v = decide(shell("curl x", req=DFA), pol, mode=mode)
        assert v.decision == "ask", mode
        assert "disable_bypass" in v.trace[0].detail


def test_policy_default_mode():
    pol = Policy(default_mode="acceptEdits")
    assert decide(edit(f"{WS}/a"), pol).decision == "allow"


# ---------------------------------------------------------------- trust


def _project_policy(trust):
    rules = (
        parse_rule("Bash(make)", "allow", layer="project", origin=f"{WS}/.nexus/policy.toml:2", project=True),
        parse_rule("Bash(curl *)", "deny", layer="project", origin=f"{WS}/.nexus/policy.toml:3", project=True),
    )
    return Policy(rules=rules, trust=trust, workspace=WS)


def test_project_allow_only_when_trusted():
    assert decide(shell("make", req=DFA), _project_policy("trusted")).decision == "allow"
    v = decide(shell("make", req=DFA), _project_policy("untrusted"))
    assert v.decision == "ask" and any(s.step == "trust" for s in v.trace)


def test_project_deny_applies_untrusted():
    assert decide(shell("curl x", req=DFA), _project_policy("untrusted")).decision == "deny"
    assert decide(shell("curl x", req=DFA), _project_policy("unknown")).decision == "deny"


def test_unknown_workspace_asks_to_trust():
    v = decide(read(f"{WS}/a"), _project_policy("unknown"))
    assert v.decision == "ask" and "untrusted_workspace" in v.flags
    assert v.suggestions[0] == f"Trust({WS})"


# ---------------------------------------------------------------- session rules, suggestions


def test_session_rules():
    s = session(allow_rules=("Bash(make test)",), deny_rules=("Bash(curl *)",))
    assert evaluate(call(), NOPOL, s, shell("make test", req=DFA), CTX).verdict.decision == "allow"
    v = evaluate(call(), NOPOL, s, shell("curl x", req=DFA), CTX).verdict
    assert (v.decision, v.rule_origin) == ("deny", "session:s1")


def test_session_allow_never_overrides_safety():
    s = session("bypassPermissions", allow_rules=("Bash",))
    assert evaluate(call(), NOPOL, s, SAFETY_ROWS[1][1], CTX).verdict.decision == "ask"


def test_suggestions_only_for_uncovered_sub_commands():
    v = decide(shell("git status", "npm run test -- -k x", req=DFA), policy(allow=["Bash(git status)"]))
    assert v.decision == "ask"
    assert v.suggestions == ["Bash(npm run test *)"]


# ---------------------------------------------------------------- properties

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.conftest import examples  # noqa: E402

_WORDS = ["git", "status", "push", "npm", "run", "test", "ls", "-la", "rm", "curl", "x", "main"]
_rule_text = st.one_of(
    st.lists(st.sampled_from([*_WORDS, "*"]), min_size=1, max_size=3).map(lambda w: "Bash(" + " ".join(w) + ")"),
    st.sampled_from(
        [
            "Bash",
            "Edit",
            "Read",
            "Edit(/src/**)",
            "Read(./.env)",
            "Read(//etc/**)",
            "WebFetch",
            "WebFetch(domain:example.com)",
            "mcp__gh",
            "Edit(**/*.py)",
        ]
    ),
)
_cmd = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join)
_cls = st.one_of(
    st.lists(_cmd, min_size=1, max_size=3).map(lambda cs: shell(*cs, req=DFA)),
    st.sampled_from(
        [
            edit(f"{WS}/src/a.py"),
            edit("/etc/x"),
            read(f"{WS}/.env"),
            read("/etc/hosts"),
            fetch("example.com"),
            tool("mcp__gh__x", ToolKind.MCP),
        ]
    ),
)
_mode = st.sampled_from(["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions", "auto", "yolo"])


@settings(max_examples=examples(300), deadline=None)
@given(
    allow=st.lists(_rule_text, max_size=4),
    ask=st.lists(_rule_text, max_size=2),
    deny=st.lists(_rule_text, max_size=3),
    extra=_rule_text,
    cls=_cls,
    mode=_mode,
)
def test_adding_a_deny_rule_never_turns_a_deny_into_an_allow(allow, ask, deny, extra, cls, mode):
    before = decide(cls, policy(allow, ask, deny), mode=mode)
    after = decide(cls, policy(allow, ask, [*deny, extra]), mode=mode)
    if before.decision == "deny":
        assert after.decision == "deny"
    if before.decision != "allow":
        assert after.decision != "allow"


@settings(max_examples=examples(300), deadline=None)
@given(
    allow=st.lists(_rule_text, max_size=5),
    ask=st.lists(_rule_text, max_size=3),
    deny=st.lists(_rule_text, max_size=3),
    cls=_cls,
    mode=_mode,
    data=st.data(),
)
def test_rule_order_never_changes_a_verdict(allow, ask, deny, cls, mode, data):
    a = decide(cls, policy(allow, ask, deny), mode=mode)
    perm = [data.draw(st.permutations(x)) for x in (allow, ask, deny)]
    b = decide(cls, policy(*perm), mode=mode)
    assert (a.decision, a.source) == (b.decision, b.source)


# ---------------------------------------------------------------- auto mode sets aside broad allow rules

CODE_BLANKETS = [
    ("Bash(python:*)", "python -c 'import os'"),
    ("Bash(python3 *)", "python3 x.py"),
    ("Bash(node *)", "node -e 1"),
    ("Bash(bash:*)", "bash -c id"),
    ("Bash(sh *)", "sh x.sh"),
    ("Bash(npx *)", "npx cowsay"),
    ("Bash(sudo:*)", "sudo id"),
    ("Bash(npm run *)", "npm run anything"),
    ("Bash(eval *)", "eval x"),
    ("Bash(ssh:*)", "ssh host id"),
    ("Bash(sh)", "sh"),
]


@pytest.mark.parametrize(("rule", "command"), CODE_BLANKETS)
@pytest.mark.parametrize("mode", ["default", "acceptEdits", "auto", "dontAsk"])
def test_rules_that_would_run_any_code_never_allow_by_themselves(rule, command, mode):
    """Seed 002 (Claude Code's DANGEROUS_BASH_PATTERNS): Bash(python:*) would let the model run any Python it
    writes, so such a rule is set aside in every mode, named in the trace and the reason."""
    cls = shell(command, req=DFA)
    ev = evaluate(call(), policy(allow=[rule]), session(mode), cls, CTX)
    assert ev.verdict is not None and ev.verdict.decision != "allow", ev.verdict
    assert any(s.step == "allow_rules" and s.outcome == "set aside" and rule in s.detail for s in ev.verdict.trace)
    if mode != "dontAsk":
        assert rule in ev.verdict.reason


def test_auto_mode_sets_aside_broad_allow_rules() -> None:
    """Claude Code's auto mode strips every rule that lets any program run while a classifier decides; other
    modes keep a person's own Bash(*) (it names no interpreter: only the loader warns)."""
    rule, cls = "Bash(*)", shell("make", req=DFA)
    pol = policy(allow=[rule])
    assert decide(cls, pol, mode="default").decision == "allow"
    ev = evaluate(call(), pol, session("auto"), cls, CTX)  # auto without a reviewer: a person
    assert ev.verdict is not None and ev.verdict.decision == "ask", ev.verdict
    assert any(s.step == "allow_rules" and s.outcome == "stripped" and rule in s.detail for s in ev.verdict.trace)
    assert rule in ev.verdict.reason
    pol_cls = Policy(rules=pol.rules, classifier=CLS)
    assert evaluate(call(), pol_cls, session("auto"), cls, CTX).need == "classifier"  # the reviewer decides


@pytest.mark.parametrize("rule", ["Bash(npm test:*)", "Bash(git status)", "Bash(pytest *)"])
def test_auto_mode_keeps_narrow_allow_rules(rule):
    cmd = rule[5:-1].replace(":*", "").replace(" *", "")
    ev = evaluate(call(), policy(allow=[rule]), session("auto"), shell(cmd, req=DFA), CTX)
    assert ev.verdict is not None and ev.verdict.decision == "allow" and ev.verdict.source == "rule"


@pytest.mark.parametrize(
    ("tool_name", "cls", "tier"),
    [
        ("Read", read(f"{WS}/a.py"), "safe"),
        ("Bash", shell("ls"), "dangerous"),
        ("Edit", edit(f"{WS}/a.py"), "dangerous"),
        ("mcp__gh__list", tool("mcp__gh__list", ToolKind.MCP), "cautious"),
        ("Frobnicate", tool("Frobnicate", ToolKind.OTHER, flags=[Flag.UNKNOWN_TOOL]), "cautious"),
    ],
)
def test_every_verdict_carries_the_tools_tier(tool_name, cls, tier):
    v = evaluate(call(tool_name), NOPOL, session(), cls, CTX).verdict
    assert v is not None and v.tier == tier


# ---------------------------------------------------------------- answers kept per policy, decisions unchanged


def test_session_rules_parsed_once_per_policy_decide_every_call_alike():
    """Session rules and grants are parsed once per policy (Policy.derived); every call still sees each one,
    its own origin, and the trace line of one that does not parse."""
    pol = policy(allow=["Bash(echo *)"])
    s = session("default", allow_rules=("Bash(ls *)", "bad((rule"), grant_rules=(("deny", "Bash(rm *)", "g1"),))
    for _ in range(3):
        ls = evaluate(call(), pol, s, shell("ls -la", req=RO), CTX).verdict
        assert ls is not None and ls.decision == "allow" and ls.rule_origin == "session:s1"
        assert any(t.outcome == "error" and "bad((rule" in t.detail for t in ls.trace)
        rm = evaluate(call(), pol, s, shell("rm x", req=WW), CTX).verdict
        assert rm is not None and rm.decision == "deny" and rm.rule_origin == "grant:g1"
    # the same text as another session's rule keeps that session's origin
    other = session("default", allow_rules=("Bash(ls *)",))
    other.id = "s2"
    v = evaluate(call(), pol, other, shell("ls -la", req=RO), CTX).verdict
    assert v is not None and v.rule_origin == "session:s2"


def test_auto_mode_sets_aside_broad_rules_on_every_call():
    """The split of the policy's allow rules is kept per policy; the trace names it on every call, and a
    session's own broad rule is set aside too."""
    pol = policy(allow=["Bash(python:*)", "Bash(echo *)", "Bash(git *)"])
    for _ in range(2):
        v = evaluate(call(), pol, session("auto"), shell("python x.py", req=DFA), CTX, dry_run=True).verdict
        assert v is not None and v.decision != "allow"
        assert any(t.outcome == "set aside" and "Bash(python:*)" in t.detail for t in v.trace)
        g = evaluate(call(), pol, session("auto"), shell("git push", req=DFA), CTX, dry_run=True).verdict
        assert g is not None and g.decision != "allow"
        assert any(t.outcome == "stripped" and "Bash(git *)" in t.detail for t in g.trace)
        e = evaluate(call(), pol, session("auto"), shell("echo hi", req=RO), CTX, dry_run=True).verdict
        assert e is not None and e.decision == "allow" and e.rule == "Bash(echo *)"
    own = session("auto", allow_rules=("Bash(node *)",))
    v = evaluate(call(), pol, own, shell("node x.js", req=DFA), CTX, dry_run=True).verdict
    assert v is not None and v.decision != "allow"
    assert any(t.outcome == "set aside" and "Bash(node *)" in t.detail for t in v.trace)
