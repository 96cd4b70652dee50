"""The narrowest useful "always" rules, and the refusal of blanket ones."""

from __future__ import annotations

import pytest
from policy_factories import DFA, WS, edit, fetch, read, shell, tool

from nexusd.core.model import Flag, ToolKind
from nexusd.core.policy.suggest import blanket_reason, suggest


@pytest.mark.parametrize(
    ("cmds", "expected"),
    [
        (["npm run test -- -x"], ["Bash(npm run test *)"]),
        (["npm run test"], ["Bash(npm run test)"]),
        (["git log --oneline"], ["Bash(git log *)"]),
        (["git status"], ["Bash(git status)"]),
        (["git push origin main"], ["Bash(git push origin main)"]),
        (["ls -la"], ["Bash(ls *)"]),
        (["rm -rf build"], ["Bash(rm -rf build)"]),
        (["python manage.py test"], ["Bash(python manage.py test)"]),
        (["npx prettier --write ."], ["Bash(npx prettier --write .)"]),
        (["bash -c 'x'"], ["Bash(bash -c x)"]),
        (["./run.sh a"], ["Bash(./run.sh a)"]),
        (["cargo test --all", "cargo build"], ["Bash(cargo test *)", "Bash(cargo build)"]),
        (["a", "b", "c", "d", "e", "f"], []),  # more than 5: refuse "always"
    ],
)
def test_shell_suggestions(cmds, expected):
    assert suggest(shell(*cmds, req=DFA), (WS,)) == expected


def test_other_suggestions():
    assert suggest(edit(f"{WS}/src/a.py"), (WS,)) == [f"Edit(/{WS}/src/a.py)"]
    assert suggest(read(f"{WS}/src/a.py"), (WS,)) == [f"Read(/{WS}/src/**)"]
    assert suggest(read("/etc/hosts"), (WS,)) == ["Read(//etc/hosts)"]
    assert suggest(fetch("docs.rs"), (WS,)) == ["WebFetch(domain:docs.rs)"]
    assert suggest(tool("mcp__gh__list", ToolKind.MCP), (WS,)) == ["mcp__gh__list"]


def test_no_suggestions_for_flagged_calls():
    assert suggest(shell("ls", flags=[Flag.DYNAMIC]), (WS,)) == []
    assert suggest(shell("rm -rf /", flags=[Flag.CATASTROPHIC]), (WS,)) == []


@pytest.mark.parametrize(
    "rule",
    ["Bash", "Bash(*)", "Bash(python *)", "Bash(python3:*)", "Bash(python3.12 *)", "Bash(node *)", "Bash(npx *)",
     "Bash(bunx *)", "Bash(npm run *)", "Bash(yarn run:*)", "Bash(pnpm run *)", "Bash(bun run *)", "Bash(bash *)",
     "Bash(sh *)", "Bash(zsh *)", "Bash(eval *)", "Bash(exec *)", "Bash(env *)", "Bash(xargs *)", "Bash(sudo *)",
     "Bash(ssh *)", "Bash(git *)", "Bash(git:*)", "Bash(npm *)", "Bash(/usr/bin/python3 *)", "Bash(py* *)",
     "Bash(* --version)", "Bash(uv run *)", "Edit", "Write", "Edit(//**)", "Edit(~/**)", "Read(//**)"],
)
def test_blanket(rule):
    assert blanket_reason(rule)


@pytest.mark.parametrize(
    "rule",
    ["Bash(npm run test *)", "Bash(git status)", "Bash(git log *)", "Bash(python manage.py test)", "Bash(ls *)",
     "Edit(/src/**)", "Read", "Read(~/notes/**)", "WebFetch(domain:x.org)", "mcp__gh"],
)
def test_not_blanket(rule):
    assert blanket_reason(rule) is None
