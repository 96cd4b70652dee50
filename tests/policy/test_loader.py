"""Policy files: strict parsing with file:line errors, and the merge of layers."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexusd.policy.loader import merge, parse_claude_settings, parse_policy

P = Path("/cfg/policy.toml")


def test_full_file():
    text = """
[permissions]
allow = ["Bash(git status)",
  { rule = "Bash(npm run test *)", match = ["npm run test -- -x"], not_match = ["npm run build"] }]
ask = ["Bash(git push *)"]
deny = ["Read(./.env)"]
default_mode = "acceptEdits"
additional_directories = ["../shared", "~/lib"]
allowed_modes = ["default", "acceptEdits", "plan"]
disable_bypass = true

[providers.gemini]
auto_approval = true
allowed_modes = ["default"]
prompt_timeout = 20

[[hooks]]
command = ["/usr/bin/check", "--fast"]
tools = ["Bash"]
timeout = 2
on_error = "ask"

[classifier]
command = "/usr/bin/classify --json"
max_denials = 2

[sandbox]
enabled = true
"""
    la = parse_policy(text, P, layer="user", home="/home/u")
    assert la.errors == []
    assert [r.text for r in la.rules] == [
        "Read(./.env)",
        "Bash(git push *)",
        "Bash(git status)",
        "Bash(npm run test *)",
    ]
    assert la.rules[0].origin == "/cfg/policy.toml:6"
    assert la.rules[2].origin == "/cfg/policy.toml:3"
    assert la.additional_directories == ["/shared", "/home/u/lib"]
    assert la.allowed_modes == frozenset({"default", "accept_edits", "plan"})
    assert la.disable_bypass == "/cfg/policy.toml:10"
    assert la.providers["gemini"].auto_approval is True
    assert la.hooks[0].command == ("/usr/bin/check", "--fast") and la.hooks[0].on_error == "ask"
    assert la.classifier.command == ("/usr/bin/classify", "--json") and la.classifier.max_denials == 2
    pol = merge([la])
    assert pol.sandbox_layers == (({"enabled": True}, str(P), False, False),)
    assert pol.disable_bypass and not pol.builtin


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[permissions]\nallw = []\n", "policy.toml:2: unknown key permissions.allw"),
        ("[permisions]\n", "policy.toml:1: unknown key 'permisions'"),
        ("[permissions]\nallow = [\n  'Bash(ls',\n]\n", "policy.toml:3"),
        ("[permissions]\ndeny = ['Read([x)']\n", "unbalanced"),
        ("[permissions]\ndefault_mode = 'turbo'\n", "unknown default_mode"),
        ("[permissions]\nallow = 'Bash'\n", "must be a list"),
        ("[permissions]\nallow = [{rule = 'Bash(npm *)', not_match = ['npm run x']}]\n", "should not match"),
        ("[providers.claude]\nauto_aproval = true\n", "unknown key providers.claude.auto_aproval"),
        ("[[hooks]]\ncommand = ''\n", "hooks.command is empty"),
        ("[[hooks]]\ncommand = 'x'\non_error = 'maybe'\n", "on_error"),
        ("[[hooks]]\ncommand = 'x'\ntools = ['Bash(ls)']\n", "not specifiers"),
        ("[classifier]\ncommand = 'x'\non_error = 'allow'\n", "fail closed"),
        ("[sandbox]\nbogus = 1\n", "unknown key"),
        ("not toml = = \n", "invalid TOML"),
    ],
)
def test_errors_name_file_and_line(text, needle):
    la = parse_policy(text, P, layer="user")
    assert la.errors, text
    assert any(needle in e for e in la.errors), la.errors
    assert all(e.startswith("/cfg/policy.toml") for e in la.errors)


def test_broad_allow_rule_warns():
    la = parse_policy("[permissions]\nallow = ['Bash(python *)', 'Bash(git status)']\n", P, layer="user")
    assert not la.errors
    assert len(la.warnings) == 1 and "python" in la.warnings[0]


def test_claude_settings():
    text = (
        '{"permissions": {"allow": ["Bash(npm run lint)"], "deny": ["Read(./secrets/**)"], '
        '"defaultMode": "acceptEdits"}, "disableBypassPermissionsMode": "disable"}'
    )
    la = parse_claude_settings(text, Path("/p/.claude/settings.json"), layer="claude-project", project=True)
    assert not la.errors
    assert {r.text for r in la.rules} == {"Bash(npm run lint)", "Read(./secrets/**)"}
    assert la.default_mode == "acceptEdits" and la.disable_bypass
    assert all(r.project for r in la.rules)


def test_project_settings_only_restrict_when_untrusted():
    user = parse_policy("[permissions]\ndefault_mode = 'default'\n", P, layer="user")
    proj = parse_policy(
        "[permissions]\nallow = ['Bash(make)']\ndefault_mode = 'bypassPermissions'\n"
        "additional_directories = ['/']\n[[hooks]]\ncommand = 'evil'\n[sandbox]\nenabled = false\n",
        Path("/w/.nexus/policy.toml"),
        layer="project",
        project=True,
    )
    untrusted = merge([user, proj], workspace="/w", trust="untrusted")
    assert untrusted.default_mode == "default"
    assert untrusted.hooks == () and untrusted.additional_directories == () and untrusted.sandbox_layers == ()
    assert any(r.text == "Bash(make)" and r.project for r in untrusted.rules)  # kept, flagged; engine ignores
    trusted = merge([user, proj], workspace="/w", trust="trusted")
    assert trusted.default_mode == "bypassPermissions" and len(trusted.hooks) == 1


def test_managed_scalars_are_final():
    m = parse_policy(
        "[permissions]\ndefault_mode = 'plan'\nallowed_modes = ['default', 'plan']\n",
        Path("/etc/nexus/policy.toml"),
        layer="managed",
        managed=True,
    )
    u = parse_policy(
        "[permissions]\ndefault_mode = 'acceptEdits'\nallowed_modes = ['default', 'acceptEdits']\n", P, layer="user"
    )
    pol = merge([m, u])
    assert pol.default_mode == "plan"
    assert pol.allowed_modes == frozenset({"default"})  # intersection


def test_slash_anchor_of_project_file_is_the_workspace():
    la = parse_policy(
        "[permissions]\ndeny = ['Edit(/src/**)']\n", Path("/w/.nexus/policy.toml"), layer="project", project=True
    )
    assert la.rules[0].matches_path("/w/src/a", "/w", "/h")
