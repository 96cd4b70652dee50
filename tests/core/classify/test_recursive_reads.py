"""A recursive reader (grep -r, rg, ag) of a directory reads every file below it: Read deny rules for any of
those files apply, and credential locations below it are reads outside the workspace (a workspace that is
the home directory included). Real classifier and engine over a real temporary file system."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "policy"))

from policy_factories import policy, session

from nexusd.core.classify import classify
from nexusd.core.engine import evaluate
from nexusd.core.model import Context, Flag
from nexusd.core.policy.rules import compile_path
from nexusd.policy.filesystem import DecisionFileSystem
from nexusd.protocol import CallInfo

ALLOWS = ["Bash(grep *)", "Bash(egrep *)", "Bash(rg *)", "Bash(ag *)", "Read(./**)"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    for d in (w / "secrets", w / "src", w / "conf"):
        d.mkdir(parents=True)
    (w / "secrets" / "key.pem").write_text("K")
    (w / ".env").write_text("E")
    (w / "conf" / ".env").write_text("E")
    (w / "src" / "a.py").write_text("x")
    return w


def decide(ws: Path, command: str, deny: list[str], mode: str = "default", home: Path | None = None) -> str:
    home = home or ws.parent / "home"
    ctx = Context(cwd=str(ws), workspace_roots=(str(ws),), home=str(home))
    c = CallInfo("claude", "s1", "Bash", {"command": command}, str(ws))
    cls = classify(c, ctx, DecisionFileSystem())
    return evaluate(c, policy(deny=deny, allow=ALLOWS, root=str(ws)), session(mode), cls, ctx).verdict.decision


WHOLE_TREE = [
    "grep -r KEY .",
    "grep -rn KEY",
    "grep -nr KEY",
    "grep -R KEY .",
    "egrep -R KEY .",
    "grep KEY -r .",
    "grep --recursive KEY .",
    "grep --dereference-recursive KEY",
    "grep -d recurse KEY .",
    "grep --directories=recurse KEY .",
    "grep --directories recurse KEY .",
    "rg KEY",
    "rg -l KEY .",
    "rg -n KEY ./",
    "ag KEY",
    "cd src && grep -r KEY ..",
    "grep -ril key .",
    "git grep KEY",
    "git grep -n KEY -- .",
    "git -C . grep KEY",
]


@pytest.mark.parametrize("command", WHOLE_TREE)
@pytest.mark.parametrize(
    "deny",
    [
        "Read(./secrets/**)",
        "Read(./.env)",
        "Read(./secrets/key.pem)",
        "Read(**/.env)",
        "Read(.env)",
        "Read(./secrets/*.pem)",
        "Read(./conf/.env)",
    ],
)
@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions"])
def test_a_recursive_search_of_a_folder_with_a_denied_file_is_denied(ws, command, deny, mode):
    assert decide(ws, command, [deny], mode) == "deny", (command, deny, mode)


@pytest.mark.parametrize(
    "command,deny",
    [
        ("grep -r KEY src", "Read(./secrets/**)"),  # a sibling folder: nothing denied below src
        ("rg KEY src", "Read(./.env)"),  # ./.env is not below src
        ("grep -r KEY conf", "Read(./secrets/*.pem)"),
        ("grep KEY src/a.py", "Read(**/.env)"),  # not recursive
        ("grep KEY .env.example src/a.py", "Read(./.env)"),
        ("rg --files", "Read(./.env)"),  # lists names, as ls does
        ("grep -r KEY src", "Read(~/.ssh/**)"),
        ("git grep KEY -- src", "Read(./secrets/**)"),
    ],
)
def test_a_recursive_search_elsewhere_stays_allowed(ws, command, deny):
    assert decide(ws, command, [deny]) == "allow", (command, deny)


@pytest.mark.parametrize(
    "command", ["grep -r PRIVATE .", "rg PRIVATE", "grep -rl BEGIN ~", "rg -uu KEY .", "grep -R token .config"]
)
def test_credentials_below_a_recursive_read_need_a_person_when_the_workspace_is_home(tmp_path, command):
    home = tmp_path / "home"
    for d in (home / ".ssh", home / ".config" / "gh", home / "proj"):
        d.mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("KEY")
    (home / ".config" / "gh" / "hosts.yml").write_text("token")
    ctx = Context(cwd=str(home), workspace_roots=(str(home),), home=str(home))
    c = CallInfo("claude", "s1", "Bash", {"command": command}, str(home))
    cls = classify(c, ctx, DecisionFileSystem())
    assert Flag.OUTSIDE_WORKSPACE in cls.flags, (command, cls.reads)
    assert any(p.startswith((f"{home}/.ssh", f"{home}/.config/gh")) for p in cls.reads)
    for mode in ("default", "acceptEdits", "auto"):
        v = evaluate(c, policy(allow=["Bash(grep *)", "Bash(rg *)"], root=str(home)), session(mode), cls, ctx).verdict
        assert v.decision != "allow", (command, mode, v.reason)


def test_recursive_reads_are_recorded(ws):
    ctx = Context(cwd=str(ws), workspace_roots=(str(ws),), home=str(ws.parent / "home"))
    cls = classify(
        CallInfo("claude", "s", "Bash", {"command": "grep -r x src conf; rg y; grep z src"}, str(ws)),
        ctx,
        DecisionFileSystem(),
    )
    assert cls.recursive_reads == (f"{ws}/src", f"{ws}/conf", str(ws))


@pytest.mark.parametrize(
    "spec,directory,expect",
    [
        ("./secrets/**", "/w", True),
        ("./secrets/**", "/w/secrets", True),
        ("./secrets/**", "/w/secrets/a", True),
        ("./secrets/**", "/w/src", False),
        ("./.env", "/w", True),
        ("./.env", "/w/src", False),
        (".env", "/w/src/deep", True),
        ("**/.env", "/w/src", True),
        ("./a/*/key", "/w/a/b", True),
        ("./a/*/key", "/w/c", False),
        ("./a/b/c.txt", "/w/a", True),
        ("./a/x/**", "/w/a/y", False),
        ("//etc/**", "/", True),
        ("//etc/**", "/w", False),
        ("~/.ssh/**", "/home/u", True),
        ("~/.ssh/**", "/home", True),
        ("~/.ssh/**", "/w", False),
        ("./**", "/w/src", True),
    ],
)
def test_may_match_below(spec, directory, expect):
    assert compile_path(spec, "/w").may_match_below(directory, "/w", "/home/u") is expect


# ---- names handed on at run time: find | xargs READER, find -exec READER, anything | xargs READER
@pytest.mark.parametrize(
    "command",
    [
        "find . -type f | xargs cat",
        "find . -type f -print0 | xargs -0 cat",
        "find -type f | xargs grep KEY",
        "find . -type f -exec cat {} +",
        "find . -type f -exec cat {} \\;",
        "find -L . -type f -execdir head {} \\;",
        "git ls-files | xargs cat",
        "ls -R | xargs cat",
        "cat list.txt | xargs grep KEY",
        "xargs cat < list.txt",
        "find . -type f | xargs -I{} cat {}",
        "find . | xargs -n1 mystery-reader",
        "find . -type f | sudo xargs cat",
        "sudo find . -type f -exec cat {} +",
        "find secrets | timeout 5 xargs cat",
        "nice find . -exec head {} \\;",
    ],
)
@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions"])
def test_files_handed_on_at_run_time_meet_the_deny_rules_below(ws, command, mode):
    allow_all = ["Bash(find *)", "Bash(xargs *)", "Bash(cat *)", "Bash(git ls-files *)", "Bash(ls *)"]
    home = ws.parent / "home"
    ctx = Context(cwd=str(ws), workspace_roots=(str(ws),), home=str(home))
    c = CallInfo("claude", "s1", "Bash", {"command": command}, str(ws))
    cls = classify(c, ctx, DecisionFileSystem())
    pol = policy(deny=["Read(./secrets/**)"], allow=[*ALLOWS, *allow_all], root=str(ws))
    assert evaluate(c, pol, session(mode), cls, ctx).verdict.decision == "deny", (command, mode)


@pytest.mark.parametrize(
    "command",
    [
        "find src -name '*.py' | xargs wc -l",
        "find src -type f -exec wc -l {} +",
        "find src conf | xargs cat",
        "ls | xargs -n1 echo",
        "find . -name '*.sh' -exec sh -c 'echo $1' sh {} \\;",
        "sudo find src -exec cat {} +",
        "find src -type f | nice xargs cat",
    ],
)
def test_files_handed_on_from_elsewhere_are_not_denied(ws, command):
    ctx = Context(cwd=str(ws), workspace_roots=(str(ws),), home=str(ws.parent / "home"))
    c = CallInfo("claude", "s1", "Bash", {"command": command}, str(ws))
    cls = classify(c, ctx, DecisionFileSystem())
    pol = policy(
        deny=["Read(./secrets/**)"], allow=["Bash(find *)", "Bash(xargs *)", "Bash(cat *)", "Bash(wc *)"], root=str(ws)
    )
    assert evaluate(c, pol, session("default"), cls, ctx).verdict.decision != "deny", command


def test_xargs_fed_by_something_else_is_never_allowed_by_a_mode(ws):
    # (git ls-files | xargs cat reads workspace files only: read-only since issue 35, see test_list_feeds.py)
    for command in ("cat list.txt | xargs grep KEY", "find . | xargs mystery-reader", "mystery | xargs cat"):
        for mode in ("default", "acceptEdits", "auto"):
            assert decide(ws, command, [], mode=mode) != "allow", (command, mode)


@pytest.mark.parametrize(
    "command",
    [
        "ls | xargs rm",
        "find . -name '*.o' | xargs rm -f",
        "find . -exec chmod 644 {} +",
        "find . -type d | xargs touch",
    ],
)
def test_writers_handed_names_are_not_reads(ws, command):
    ctx = Context(cwd=str(ws), workspace_roots=(str(ws),), home=str(ws.parent / "home"))
    cls = classify(CallInfo("claude", "s", "Bash", {"command": command}, str(ws)), ctx, DecisionFileSystem())
    assert cls.recursive_reads == (), command


@pytest.mark.parametrize(
    "command",
    [
        "cat secrets/*",
        "head -n1 secrets/*",
        "grep KEY secrets/*.pem",
        "tail secrets/k*",
        "cat ./secrets/?ey.pem",
        "wc -c secrets/[k]*",
        "cat */key.pem",
    ],
)
@pytest.mark.parametrize("deny", ["Read(./secrets/**)", "Read(./secrets/key.pem)", "Read(**/*.pem)"])
def test_a_glob_over_a_folder_reads_the_files_it_matches(ws, command, deny):
    assert decide(ws, command, [deny]) == "deny", (command, deny)


# ---- copies and archives of a folder take every file below it where other rules may let it be read
@pytest.mark.parametrize(
    "command",
    [
        "cp -r . backup",
        "cp -a . backup",
        "cp -R ./ backup",
        "cp --recursive . b",
        "cp -rv . b",
        "tar czf out.tgz .",
        "tar -cf out.tar ./",
        "tar --create --file=out.tar .",
        "zip -r out.zip .",
        "zip -qr out.zip .",
        "rsync -a . backup/",
        "rsync -av ./ backup/",
        "rsync --recursive . backup/",
    ],
)
def test_copying_or_archiving_a_folder_with_a_denied_file_is_denied(ws, command):
    for deny in ("Read(./secrets/**)", "Read(./.env)"):
        assert decide(ws, command, [deny], mode="acceptEdits") == "deny", (command, deny)


@pytest.mark.parametrize(
    "command",
    [
        "cp -r src backup",
        "tar czf out.tgz src",
        "zip -r out.zip src",
        "rsync -a src/ backup/",
        "cp src/a.py b.py",
        "zip out.zip .",
        "tar --no-recursion -cf out.tar .",
    ],
)
def test_copying_elsewhere_is_not_denied(ws, command):
    assert decide(ws, command, ["Read(./secrets/**)", "Read(./.env)"], mode="acceptEdits") != "deny", command
