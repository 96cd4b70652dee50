"""macOS: the Seatbelt profile generated from the same plan, checked as text (sandbox-exec cannot run here).

Two kinds of checks. Golden files (``tests/sandbox/golden/*.sb``, reviewed by hand; regenerate with
``NEXUS_UPDATE_GOLDEN=1``) pin the exact text for fixed plans. And for every escape-corpus scenario the
profile built from that scenario's real plan is *evaluated* by ``decide`` below: a small model of the
profile language's documented file and network semantics (``(deny default)``, the last matching rule
wins, ``subpath``/``literal``/``regex`` filters). It is a model, not Seatbelt: the real check is the escape
corpus on a Mac (docs/SANDBOX.md).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec
import pytest

from nexusd.protocol import SandboxPlanReply
from nexusd.sandbox.bwrap import MountSpec
from nexusd.sandbox.plan import plan_command
from nexusd.sandbox.seatbelt import SANDBOX_EXEC, build_profile, sbpl_string
from tests.sandbox.conftest import World, wrapper_script

GOLDEN = Path(__file__).parent / "golden"

# --------------------------------------------------------------------------- a model of the profile language

_RULE = re.compile(r"^\((allow|deny) ([a-z*\- ]+?)((?: \((?:subpath|literal|regex) [^()]*\))*)\)$")
_FILTER = re.compile(r'\((subpath|literal|regex) ("(?:[^"\\]|\\.)*"|#"[^"]*")\)')


def rules(profile: str) -> list[tuple[str, set[str], list[tuple[str, str]]]]:
    """(action, operations, filters) of every one-line rule; multi-line forms (mach-lookup) are skipped."""
    out = []
    for line in profile.splitlines():
        m = _RULE.match(line)
        if not m:
            continue
        filters = [(k, v[2:-1] if v.startswith("#") else msgspec.json.decode(v)) for k, v in _FILTER.findall(m[3])]
        out.append((m[1], set(m[2].split()), filters))
    return out


def _covers(op: str, ops: set[str]) -> bool:
    return any(o == op or (o.endswith("*") and op.startswith(o[:-1])) for o in ops)


def _matches(filters: list[tuple[str, str]], path: str) -> bool:
    if not filters:
        return True
    for kind, value in filters:
        if kind == "subpath" and (path == value or path.startswith(value.rstrip("/") + "/")):
            return True
        if kind == "literal" and path == value:
            return True
        if kind == "regex" and re.search(value, path):
            return True
    return False


def decide(profile: str, op: str, path: str) -> str:
    verdict = "deny"  # (deny default)
    for action, ops, filters in rules(profile):
        if _covers(op, ops) and _matches(filters, path):
            verdict = action
    return verdict


def can_read(profile: str, path: str) -> bool:
    return decide(profile, "file-read-data", path) == "allow"


def can_write(profile: str, path: str) -> bool:
    return decide(profile, "file-write-data", path) == "allow"


def test_the_model_itself() -> None:
    p = (
        '(allow file-read*)\n(allow file-read* file-write* (subpath "/w"))\n'
        '(deny file-write* (subpath "/w/.git/hooks"))\n'
    )
    assert can_write(p, "/w/a") and not can_write(p, "/w/.git/hooks/x") and not can_write(p, "/etc/x")
    assert can_read(p, "/etc/passwd") and not can_write(p, "/wx")


# --------------------------------------------------------------------------- profiles of the real plans


def _profile(world: World, command: str = "true", cwd: Path | None = None) -> tuple[str, SandboxPlanReply]:
    probe = msgspec.structs.replace(world.probe, platform="macos", backend="seatbelt")
    plan = plan_command(command, str(cwd or world.ws), world.store(), probe, workspace=str(world.ws))
    assert plan.allowed and plan.backend == "seatbelt", plan.reason
    assert plan.argv[:2] == [SANDBOX_EXEC, "-p"]
    assert plan.argv[-3:] == [plan.argv[-3], "-c", command]  # the command stays last, untouched
    return plan.argv[2], plan


@pytest.fixture
def mac(world: World) -> World:
    if world.via != "runner":
        pytest.skip("profile text: one run is enough")
    return world


def test_writes_only_in_the_workspace_and_allow_write(mac: World) -> None:
    w = mac
    p, _ = _profile(w)
    assert can_write(p, str(w.ws / "src/a.py")) and not can_write(p, str(w.outside / "pwned"))
    assert not can_write(p, "/etc/nexus-pwned") and not can_write(p, "/tmp/x") and can_read(p, "/etc/passwd")
    w.sandbox = {"filesystem": {"allow_write": [str(w.outside)]}}
    p, _ = _profile(w)
    assert can_write(p, str(w.outside / "pwned"))


def test_protected_paths_are_read_only_and_cannot_be_renamed_away(mac: World) -> None:
    w = mac
    (w.ws / ".git" / "hooks").mkdir(parents=True)
    (w.ws / ".git" / "config").write_text("[core]\n")
    (w.ws / "sub" / ".vscode").mkdir(parents=True)
    w.sandbox = {"filesystem": {"allow_write": ["~/"]}}
    p, _ = _profile(w)
    for path in (".git/hooks/pre-commit", ".git/config", "sub/.vscode/tasks.json"):
        assert not can_write(p, str(w.ws / path)), path
    assert not can_write(p, str(w.home / ".bashrc")) and can_write(p, str(w.home / "notes.txt"))
    for parent in (w.ws / ".git", w.ws / "sub", w.ws):
        assert decide(p, "file-write-unlink", str(parent)) == "deny", parent
    assert decide(p, "file-write-unlink", str(w.ws / "src")) == "allow"


def test_masks_reveals_and_deny_write(mac: World) -> None:
    w = mac
    (w.outside / "secret.txt").write_text("x")
    (w.outside / "keys").mkdir()
    (w.outside / "keys" / "pub").write_text("x")
    (w.ws / "vendor").mkdir()
    (w.ws / ".env").write_text("x")
    w.sandbox = {
        "filesystem": {
            "deny_read": [f"{w.outside}/secret.txt", f"{w.outside}/keys"],
            "allow_read": [f"{w.outside}/keys/pub"],
            "deny_write": [f"{w.ws}/vendor"],
        }
    }
    p, _ = _profile(w)
    assert not can_read(p, str(w.outside / "secret.txt")) and not can_read(p, str(w.outside / "keys/id"))
    assert can_read(p, str(w.outside / "keys/pub")) and not can_write(p, str(w.outside / "keys/pub"))
    assert not can_write(p, str(w.ws / "vendor/lib.py")) and can_read(p, str(w.ws / "vendor/lib.py"))
    assert not can_read(p, str(w.ws / ".env"))  # built-in secret mask


def test_daemon_dirs_are_hidden_and_own_home_tmp_writable(mac: World) -> None:
    w = mac
    p, plan = _profile(w)
    for d in ("cfg/policy.toml", "state/audit.jsonl", "managed/policy.toml", "run/nexusd.sock"):
        assert not can_read(p, str(w.root / d)) and not can_write(p, str(w.root / d)), d
    env = dict(a.split("=", 1) for a in plan.argv if a.startswith(("HOME=", "TMPDIR=")))
    assert env["HOME"].startswith(str(w.root / "state")) and can_write(p, env["HOME"] + "/x")
    assert can_write(p, env["TMPDIR"] + "/x") and "NEXUS_SOCKET" in plan.argv  # `env -u NEXUS_SOCKET`


def test_network_and_unix_sockets(mac: World) -> None:
    w = mac
    p, _ = _profile(w)
    assert "network" not in " ".join(ops for _, o, _ in rules(p) for ops in o)
    assert "(allow network" not in p and "socket-domain AF_UNIX" not in p
    assert '(remote ip "localhost:8123")' in build_profile(MountSpec(cwd="/w"), proxy_port=8123)
    w.sandbox = {"network_isolation": False, "network": {"allow_all_unix_sockets": True}}
    p, plan = _profile(w)
    assert "(allow network*)" in p and "(allow system-socket (socket-domain AF_UNIX))" in p
    assert plan.unix_sockets == "open"


def test_bare_repo_files_and_cwd(mac: World) -> None:
    w = mac
    sub = w.ws / "sub"
    sub.mkdir()
    (sub / "config").write_text("legit")
    p, plan = _profile(w, cwd=sub)
    assert not can_write(p, str(sub / "config")) and can_write(p, str(sub / "other"))
    assert str(sub / "HEAD") in plan.scrub  # missing ones are scrubbed after, as with bwrap
    i = plan.argv.index("/bin/sh")
    assert plan.argv[i + 1 : i + 4] == ["-c", 'cd "$0" || exit 126; exec "$@"', str(sub)]


def test_strings_are_escaped() -> None:
    odd = '/w/a "quoted" \\ back\nline'
    p = build_profile(MountSpec(cwd="/w", writable=(odd,)))
    assert f"(subpath {sbpl_string(odd)})" in p and can_write(p, odd + "/x")
    assert len([ln for ln in p.splitlines() if "quoted" in ln]) == 1  # one line: the newline is escaped


# --------------------------------------------------------------------------- golden files

SPECS = {
    "workspace": MountSpec(
        cwd="/Users/u/proj",
        writable=("/Users/u/proj",),
        protected_ro=("/Users/u/proj/.git/hooks", "/Users/u/proj/.git/config", "/Users/u/.zshrc"),
        protected_masked=("/Users/u/Library/Application Support/nexus",),
        masked=("/Users/u/.ssh",),
        own=("/Users/u/.local/state/nexus/sandbox/ab/home", "/Users/u/.local/state/nexus/sandbox/ab/tmp"),
        env=(("HOME", "/Users/u/.local/state/nexus/sandbox/ab/home"),),
    ),
    "masks": MountSpec(
        cwd="/w",
        writable=("/w", "/Users/u/.cache/pip"),
        read_only=("/w/vendor",),
        masked=("/Users/u/keys", "/w/.env"),
        revealed=("/Users/u/keys/pub",),
    ),
    "network": MountSpec(cwd="/w", writable=("/w",), network=True),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_golden_profiles(name: str) -> None:
    text = build_profile(SPECS[name], proxy_port=3128 if name == "masks" else None)
    path = GOLDEN / f"seatbelt_{name}.sb"
    if os.environ.get("NEXUS_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs: review the change, then NEXUS_UPDATE_GOLDEN=1"


def test_argv_is_shell_safe_in_the_wrapper(mac: World) -> None:
    """The agent's wrapper quotes every word: the profile (many lines, quotes) survives intact."""
    from nexusd.sandbox.wrapper import agent_command

    w = mac
    _, plan = _profile(w, command="echo hi")
    text = agent_command(plan, "echo hi", w.root / "state" / "run")
    body = Path(wrapper_script(text)).read_text()
    assert "/usr/bin/sandbox-exec -p '(version 1)" in body
