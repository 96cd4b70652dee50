"""Path attacks (issue "Close the gate" classes 8, 9 and 12; "part 2" class 6), several spellings each,
through the real classifier over a real temporary file system."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexusd.core.classify import classify
from nexusd.core.model import Classification, Context, Flag, Requirement
from nexusd.policy.filesystem import DecisionFileSystem
from nexusd.protocol import CallInfo


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    ws = tmp_path / "ws"
    for d in (home / ".ssh", home / ".aws", ws / "src", ws / "sub" / ".git" / "hooks"):
        d.mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("KEY")
    (home / ".aws" / "credentials").write_text("AWS")
    (ws / "src" / "a.py").write_text("x")
    return home, ws


def bash(world, command: str, *, ws: Path | None = None) -> Classification:
    home, default_ws = world
    w = ws or default_ws
    ctx = Context(cwd=str(w), workspace_roots=(str(w),), home=str(home))
    return classify(CallInfo("claude", "s", "Bash", {"command": command}, str(w)), ctx, DecisionFileSystem())


def tool(world, name: str, inp: dict) -> Classification:
    home, ws = world
    ctx = Context(cwd=str(ws), workspace_roots=(str(ws),), home=str(home))
    return classify(CallInfo("claude", "s", name, inp, str(ws)), ctx, DecisionFileSystem())


# ---- class 9 / part 2 class 6: protected names, written anywhere
@pytest.mark.parametrize(
    "target",
    [
        ".mcp.json",
        ".cursor/rules/x.mdc",
        ".npmrc",
        ".yarnrc.yml",
        ".pre-commit-config.yaml",
        ".gitmodules",
        ".gitattributes",
        ".devcontainer/devcontainer.json",
        ".cargo/config.toml",
        ".mvn/wrapper/maven-wrapper.properties",
        "gradlew",
        "gradle/wrapper/gradle-wrapper.properties",
        "opencode.json",
        ".opencode/x",
        "sub/.git/hooks/pre-commit",
        "pkg/.claude/settings.json",
        ".Git/hooks/x",
        "nested/deeper/.vscode/tasks.json",
        ".ripgreprc",
        ".claude.json",
    ],
)
@pytest.mark.parametrize(
    "how",
    [
        "echo x > {t}",
        "cp /dev/null {t}",
        "tee {t} < /dev/null",
        "touch {t}",
        "sed -i s/a/b/ {t}",
        "mystery-tool --out={t}",
    ],
)
def test_protected_names_need_a_person(world, target, how):
    cls = bash(world, how.format(t=target))
    assert Flag.PROTECTED_PATH in cls.flags, (how.format(t=target), cls.notes)


@pytest.mark.parametrize(
    "target",
    [
        "~/.claude.json",
        "~/.codex/config.toml",
        "~/.copilot/config.json",
        "~/.config/opencode/opencode.json",
        "~/.config/systemd/user/x.service",
        "~/.config/autostart/x.desktop",
        "~/.local/bin/git",
        "~/Library/LaunchAgents/x.plist",
    ],
)
def test_agent_and_autostart_config_in_home_is_protected(world, target):
    assert Flag.PROTECTED_PATH in bash(world, f"echo x > {target}").flags
    assert (
        Flag.PROTECTED_PATH
        in tool(world, "Write", {"file_path": target.replace("~", str(world[0])), "content": "x"}).flags
    )


def test_the_installed_gate_is_protected(world):
    """An agent that rewrites nexus-hook, its interpreter or a .pth file in its site-packages rewrites the gate."""
    from nexusd.policy.gate import installed_paths

    home, ws = world
    ctx = Context(cwd=str(ws), workspace_roots=(str(ws),), home=str(home), protected_dirs=installed_paths())
    for target in installed_paths()[:3]:
        cls = classify(
            CallInfo("claude", "s", "Bash", {"command": f"echo x > {target}/evil.pth"}, str(ws)),
            ctx,
            DecisionFileSystem(),
        )
        assert Flag.PROTECTED_PATH in cls.flags, target


# ---- credentials are never "inside the workspace", even when the workspace is the home directory
@pytest.mark.parametrize(
    "command",
    [
        "cat ~/.ssh/id_ed25519",
        "cat .ssh/id_ed25519",
        "head -1 .aws/credentials",
        "grep -r KEY .ssh",
        "base64 .ssh/id_ed25519",
        "cp .ssh/id_ed25519 /tmp/k",
    ],
)
def test_credentials_in_a_home_workspace_are_not_readable_by_mode(world, command):
    home, _ = world
    cls = bash(world, command, ws=home)
    assert Flag.OUTSIDE_WORKSPACE in cls.flags, (command, cls.reads)


def test_ordinary_home_workspace_files_stay_inside(world):
    home, _ = world
    (home / "notes.md").write_text("n")
    assert Flag.OUTSIDE_WORKSPACE not in bash(world, "cat notes.md", ws=home).flags


# ---- class 8: /proc and /dev/fd reach elsewhere
@pytest.mark.parametrize(
    "path",
    [
        "/proc/self/environ",
        "/proc/self/root/etc/shadow",
        "/proc/1/cwd/x",
        "/proc/thread-self/root/etc/passwd",
        "/dev/fd/3",
        "/proc/12345/mem",
    ],
)
@pytest.mark.parametrize("verb", ["cat {p}", "cp {p} out.txt", "echo x > {p}"])
def test_proc_paths_that_reach_elsewhere_are_unresolvable(world, path, verb):
    cls = bash(world, verb.format(p=path))
    assert Flag.DYNAMIC in cls.flags and cls.requirement is Requirement.DANGER_FULL_ACCESS


def test_plain_proc_facts_stay_readable(world):
    cls = bash(world, "cat /proc/cpuinfo")
    assert Flag.DYNAMIC not in cls.flags


# ---- class 8: symlinks created earlier in the same command
@pytest.mark.parametrize(
    "command",
    [
        "ln -s ~/.ssh k; cat k/id_ed25519",
        "ln -sf ~/.ssh k && cat k/id_ed25519",
        "ln --symbolic ~/.ssh k; grep KEY k/id_ed25519",
        "mkdir d && ln -s ~/.ssh d/k && cat d/k/id_ed25519",
        "ln -s ../home/.ssh k; cat k/id_ed25519",
    ],
)
def test_paths_under_a_link_made_in_the_command_are_its_target(world, command):
    home, _ = world
    cls = bash(world, command)
    assert str(home / ".ssh" / "id_ed25519") in cls.reads, (command, cls.reads)


def test_a_link_to_an_unknown_target_makes_paths_under_it_unknown(world):
    cls = bash(world, "ln -s $T k; cat k/x")
    assert Flag.DYNAMIC in cls.flags


def test_a_write_through_a_new_link_lands_outside(world):
    cls = bash(world, "ln -s /etc y && echo x > y/cron.d")
    assert "/etc/cron.d" in cls.writes and Flag.OUTSIDE_WORKSPACE in cls.flags


# ---- class 8: a chain of cd's never drops the real directory
@pytest.mark.parametrize("n", [8, 9, 12])
def test_a_long_cd_chain_makes_relative_paths_unknown(world, n):
    chain = "; ".join(["cd /etc", *(f"cd nope{i}" for i in range(n))])
    cls = bash(world, f"{chain}; cat passwd")
    assert cls.requirement is Requirement.DANGER_FULL_ACCESS


def test_a_short_cd_chain_still_sees_every_candidate(world):
    cls = bash(world, "cd /etc; cat passwd")
    assert "/etc/passwd" in cls.reads and Flag.OUTSIDE_WORKSPACE in cls.flags


# ---- class 12: Glob patterns are relative to their search path
@pytest.mark.parametrize("pattern", ["**/*.py", "src/**/*.py", "*.md"])
def test_relative_glob_patterns_read_inside(world, pattern):
    cls = tool(world, "Glob", {"pattern": pattern})
    assert Flag.OUTSIDE_WORKSPACE not in cls.flags, cls.reads


@pytest.mark.parametrize("pattern", ["../../**/*", "/etc/*.conf", "~/.ssh/*"])
def test_glob_patterns_that_leave_are_seen(world, pattern):
    if pattern.startswith("~"):
        pattern = str(world[0]) + pattern[1:]
    cls = tool(world, "Glob", {"pattern": pattern})
    assert Flag.OUTSIDE_WORKSPACE in cls.flags, cls.reads


def test_paths_lists_and_mcp_arguments_are_each_checked(world):
    home, ws = world
    cls = tool(world, "read_many_files", {"paths": [f"{ws}/src/a.py", f"{home}/.ssh/id_ed25519"]})
    assert f"{home}/.ssh/id_ed25519" in cls.reads
    cls = tool(world, "mcp__fs__move_file", {"source": f"{ws}/src/a.py", "destination": f"{ws}/.git/hooks/x"})
    assert Flag.PROTECTED_PATH in cls.flags
