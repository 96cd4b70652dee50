"""Everyday agent work, sandbox-first, through the real daemon and the real wrapper (issue 36).

Each task is what an agent would send as a Claude ``Bash`` call: a real ``nexusd`` (its own probe, the
default policy: sandbox-first, no ``[sandbox] enabled`` anywhere) decides it, the agent runs the command
text it gets back (the generated wrapper, real bubblewrap) in a copy of a small project, and the same
command runs bare in a twin copy. Each task passes, or is *asked* for a reason a person would accept (the
task says which and why). The registries are local: a PEP 503 index and an npm registry on the loopback,
reached through nexusd's filtered proxy (``allowed_domains``), since tests have no network.

Each task's time sandboxed and bare is printed at the end of the module and written as JSON to
``$NEXUS_WORKFLOW_REPORT`` (default: ``workflow-times.json`` in pytest's base temporary directory); timings
are reported, never asserted (the machine is shared).
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nexusd import protocol as p
from nexusd.client import Client
from nexusd.sandbox.wrapper import wrapper_words
from tests.conftest import DaemonHandle, short_tmpdir
from tests.person import Person

pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("bwrap", "git", "node", "npm", "make", "gcc")),
    reason="needs bubblewrap, git, node, npm, make and gcc (scripts/bootstrap installs them)",
)
VENV_BIN = str(Path(sys.executable).parent)  # python3, pytest, ruff of the test environment
# A sandbox gives the command its own /tmp: a test environment (a checkout and its .venv) that lies in the
# host's temp directory is not there inside, so the tasks that need its tools cannot find them.
_VENV_HIDDEN = str(Path(VENV_BIN).resolve()).startswith(  # the venv's own directory, not its python's target
    tuple(str(Path(t).resolve()) + "/" for t in {tempfile.gettempdir(), "/tmp", "/var/tmp"})
)
NEEDS_TEST_TOOLS = frozenset({"pytest", "ruff format and check"})
IDENTITY = ("Ada Lovelace", "ada@example.test")
ENV_SECRET = "API_KEY=SECRET-TODO-9f2c"
KEY_SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- TODO-KEY-77"


# ---------------------------------------------------------------------------------- local registries


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def _serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, int]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a, **kw: _Quiet(*a, directory=str(directory), **kw))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, int(srv.server_address[1])


def _pypi(site: Path) -> None:
    """A pure wheel and its PEP 503 page, by hand (pip verifies the sha256 in the link)."""
    name = "nexusdemo-1.0-py3-none-any.whl"
    files = {
        "nexusdemo/__init__.py": "VALUE = 41 + 1\n",
        "nexusdemo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: nexusdemo\nVersion: 1.0\n",
        "nexusdemo-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    import zipfile

    record = "".join(f"{k},,\n" for k in files) + "nexusdemo-1.0.dist-info/RECORD,,\n"
    d = site / "simple" / "nexusdemo"
    d.mkdir(parents=True)
    with zipfile.ZipFile(d / name, "w") as z:
        for k, v in {**files, "nexusdemo-1.0.dist-info/RECORD": record}.items():
            z.writestr(k, v)
    digest = hashlib.sha256((d / name).read_bytes()).hexdigest()
    (d / "index.html").write_text(f'<html><body><a href="{name}#sha256={digest}">{name}</a></body></html>\n')


def _npm_tarball() -> bytes:
    files = {
        "package/package.json": json.dumps({"name": "leftpad-local", "version": "1.0.0", "main": "index.js"}),
        "package/index.js": "module.exports = (s, n, c = ' ') => String(s).padStart(n, c);\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _npm(site: Path, port: int) -> dict[str, str]:
    """A registry npm can ``ci`` from: the tarball and its packument; returns the lock entry."""
    tgz = _npm_tarball()
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
    url = f"http://localhost:{port}/leftpad-local/-/leftpad-local-1.0.0.tgz"
    (site / "leftpad-local" / "-").mkdir(parents=True)
    (site / "leftpad-local" / "-" / "leftpad-local-1.0.0.tgz").write_bytes(tgz)
    packument = {
        "name": "leftpad-local",
        "dist-tags": {"latest": "1.0.0"},
        "versions": {
            "1.0.0": {
                "name": "leftpad-local",
                "version": "1.0.0",
                "dist": {"tarball": url, "integrity": integrity, "shasum": hashlib.sha1(tgz).hexdigest()},
            }
        },
    }
    (site / "leftpad-local" / "index.html").write_text(json.dumps(packument))
    return {"version": "1.0.0", "resolved": url, "integrity": integrity}


# ---------------------------------------------------------------------------------- the project


def _git(ws: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ws, env=env, check=True, capture_output=True, text=True, timeout=60
    ).stdout


def _template(root: Path, env: dict[str, str], npm_port: int) -> Path:
    """A small project in git: Python with tests, a node package with a lock file, C with a Makefile,
    a TODO in several places, and secrets (.env, a nested .env.production) beside a template."""
    ws = root / "template"
    (ws / "src").mkdir(parents=True)
    (ws / "tests").mkdir()
    (ws / "test").mkdir()
    (ws / "scripts").mkdir()
    (ws / "src" / "app.py").write_text(
        "# TODO: rename old_name\n\n\ndef old_name(x):\n    return x*2\n\n\ndef add(a,b):\n    return a+b\n"
    )
    (ws / "src" / "__init__.py").write_text("")
    (ws / "tests" / "test_app.py").write_text(
        "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parents[1]))\n"
        "from src.app import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (ws / "tests" / "test_unit.py").write_text(
        "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        self.assertEqual(1 + 1, 2)\n"
    )
    (ws / "test" / "math.test.mjs").write_text(
        "import test from 'node:test';\nimport assert from 'node:assert';\n"
        "test('adds', () => { assert.strictEqual(1 + 2, 3); });\n"
    )
    lock_entry = _npm(root / "npm-site", npm_port)
    pkg = {
        "name": "demo",
        "version": "1.0.0",
        "private": True,
        "scripts": {"test": "node --test"},
        "dependencies": {"leftpad-local": "1.0.0"},
    }
    (ws / "package.json").write_text(json.dumps(pkg, indent=2) + "\n")
    lock = {
        "name": "demo",
        "version": "1.0.0",
        "lockfileVersion": 3,
        "requires": True,
        "packages": {
            "": {"name": "demo", "version": "1.0.0", "dependencies": {"leftpad-local": "1.0.0"}},
            "node_modules/leftpad-local": lock_entry,
        },
    }
    (ws / "package-lock.json").write_text(json.dumps(lock, indent=2) + "\n")
    (ws / "hello.c").write_text('#include <stdio.h>\nint main(void) { puts("hello, sandbox"); return 0; }\n')
    (ws / "Makefile").write_text(
        "CFLAGS ?= -O2 -Wall\nall: hello\n\nhello: hello.c\n\t$(CC) $(CFLAGS) -o $@ $<\n\n"
        "check: hello\n\t./hello | grep -q sandbox\n\nclean:\n\trm -f hello\n"
    )
    (ws / "scripts" / "gen.py").write_text(
        "import pathlib\nout = pathlib.Path('build')\nout.mkdir(exist_ok=True)\n"
        "(out / 'version.txt').write_text('1.0.0\\n')\nprint('generated', out / 'version.txt')\n"
    )
    (ws / "data.json").write_text('{"b": 1, "a": [1, 2, {"c": null}]}')
    (ws / "README.md").write_text("# demo\n\nTODO: write docs\n")
    (ws / ".gitignore").write_text("node_modules/\n.venv/\nhello\nbuild/\n.env\n__pycache__/\n.pytest_cache/\n")
    (ws / ".env").write_text(ENV_SECRET + "\n")
    (ws / ".env.example").write_text("API_KEY=\n")
    _git(ws, env, "init", "-q", "-b", "main")
    _git(ws, env, "add", "-A")
    _git(ws, env, "commit", "-qm", "initial")
    return ws


# ---------------------------------------------------------------------------------- the world


@dataclass
class Row:
    task: str
    outcome: str  # pass | asked
    sandboxed_s: float | None
    bare_s: float | None
    note: str = ""


@dataclass
class Rig:
    root: Path
    daemon: DaemonHandle
    env: dict[str, str]  # the agent's environment (its HOME is the user's home)
    template: Path
    pypi_port: int
    npm_port: int
    rows: list[Row] = field(default_factory=list)
    n: int = 0

    def twins(self) -> tuple[Path, Path]:
        self.n += 1
        out = []
        for kind in ("sb", "bare"):
            d = self.root / f"{kind}{self.n}"
            shutil.copytree(self.template, d, symlinks=True)
            out.append(d)
        return out[0], out[1]

    def decide(self, command: str, ws: Path, **extra: object) -> p.Decision:
        call = p.CallInfo(
            provider="claude",
            session="s-workflows",
            tool="Bash",
            cwd=str(ws),
            workspace=str(ws),
            input={"command": command, "description": "workflow task", **extra},
        )
        with Client(socket_path=str(self.daemon.socket), role="agent", name="hook", timeout=120) as c:
            return c.request(call)

    def run(self, text: str, ws: Path, timeout: float = 240) -> tuple[subprocess.CompletedProcess[str], float]:
        t = time.perf_counter()
        r = subprocess.run(
            ["/bin/bash", "-c", text], cwd=ws, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        return r, time.perf_counter() - t


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    # /var/tmp, not /tmp: the sandbox has its own /tmp, and the home must be the one the sandbox sees
    root = Path(tempfile.mkdtemp(prefix="nxwf", dir="/var/tmp"))
    home = root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(KEY_SECRET + "\n")
    (home / ".gitconfig").write_text(
        f"[user]\n\tname = {IDENTITY[0]}\n\temail = {IDENTITY[1]}\n[init]\n\tdefaultBranch = main\n"
        "[alias]\n\tst = status --short\n"
    )
    (root / "pypi").mkdir()
    _pypi(root / "pypi")
    (root / "npm-site").mkdir()
    pypi, pypi_port = _serve(root / "pypi")
    npm, npm_port = _serve(root / "npm-site")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "GIT_", "npm_", "PIP_"))}
    env.update(HOME=str(home), PATH=f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin", LC_ALL="C.UTF-8")
    template = _template(root, env, npm_port)
    run = short_tmpdir() / "run"
    cfg, state, managed = root / "config", root / "state", root / "managed"
    for d in (cfg, state, managed):
        d.mkdir()
    # The default policy (sandbox-first) plus the two local registries the user allowed. Nothing else.
    (cfg / "policy.toml").write_text(
        f'[sandbox.network]\nallowed_domains = ["localhost:{pypi_port}", "localhost:{npm_port}"]\n'
    )
    denv = {
        **env,
        "NEXUS_SOCKET": str(run / "nexusd.sock"),
        "NEXUS_CONFIG_DIR": str(cfg),
        "NEXUS_STATE_DIR": str(state),
        "NEXUS_MANAGED_DIR": str(managed),
        "PYTHONUNBUFFERED": "1",
        "PATH": os.environ["PATH"],
    }
    h = DaemonHandle(root, run / "nexusd.sock", cfg, state, managed, denv, ["--log-level", "info"], gate_only=False)
    h.start(timeout=30)
    rig = Rig(root, h, env, template, pypi_port, npm_port)
    try:
        yield rig
    finally:
        h.stop()
        pypi.shutdown()
        npm.shutdown()
        _report(rig, tmp_path_factory.getbasetemp() / "workflow-times.json")
        shutil.rmtree(root, ignore_errors=True)


def _report(rig: Rig, default: Path) -> None:
    if not rig.rows:
        return
    lines = [f"{'task':<28} {'outcome':<7} {'sandboxed':>10} {'bare':>8} {'extra':>8}"]
    for r in rig.rows:
        sb = f"{r.sandboxed_s * 1000:.0f} ms" if r.sandboxed_s is not None else "-"
        bare = f"{r.bare_s * 1000:.0f} ms" if r.bare_s is not None else "-"
        extra = f"{(r.sandboxed_s - r.bare_s) * 1000:+.0f}" if r.sandboxed_s and r.bare_s else ""
        lines.append(f"{r.task:<28} {r.outcome:<7} {sb:>10} {bare:>8} {extra:>8}  {r.note}")
    text = "\n".join(lines)
    target = Path(os.environ.get("NEXUS_WORKFLOW_REPORT") or default)
    target.write_text(json.dumps([r.__dict__ for r in rig.rows], indent=2) + "\n")
    sys.__stdout__.write(f"\nworkflow tasks, sandboxed vs bare (one run; {target}):\n{text}\n")


# ---------------------------------------------------------------------------------- the tasks


Check = Callable[[Path, subprocess.CompletedProcess[str]], None]


@dataclass(frozen=True)
class Task:
    name: str
    command: str
    check: Check
    setup: Callable[[Path], None] | None = None


def _modify(ws: Path) -> None:
    (ws / "src" / "app.py").write_text((ws / "src" / "app.py").read_text() + "\n\ndef sub(a, b):\n    return a - b\n")


def _ok(*needles: str) -> Check:
    def check(ws: Path, r: subprocess.CompletedProcess[str]) -> None:
        assert r.returncode == 0, r.stdout + r.stderr
        for n in needles:
            assert n in r.stdout, (n, r.stdout, r.stderr)

    return check


def _committed(ws: Path, r: subprocess.CompletedProcess[str]) -> None:
    assert r.returncode == 0, r.stdout + r.stderr
    who = subprocess.run(
        ["git", "log", "-1", "--format=%an <%ae>|%s"], cwd=ws, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert who == f"{IDENTITY[0]} <{IDENTITY[1]}>|fix: add sub", who  # the user's identity, from ~/.gitconfig


def _stash(ws: Path, r: subprocess.CompletedProcess[str]) -> None:
    assert r.returncode == 0, r.stdout + r.stderr
    assert "def sub" in (ws / "src" / "app.py").read_text() and "stash@{0}" in r.stdout


def _grep(ws: Path, r: subprocess.CompletedProcess[str]) -> None:
    assert r.returncode == 0, r.stdout + r.stderr  # a masked .env does not turn grep -r into exit 2
    assert "./src/app.py:1:# TODO" in r.stdout and "README.md" in r.stdout


def _sed(ws: Path, r: subprocess.CompletedProcess[str]) -> None:
    assert r.returncode == 0, r.stdout + r.stderr
    assert "old_name" not in (ws / "src" / "app.py").read_text() and r.stdout.strip() == "2"


def _built(name: str, want: str) -> Check:
    def check(ws: Path, r: subprocess.CompletedProcess[str]) -> None:
        assert r.returncode == 0, r.stdout + r.stderr
        assert (ws / name).exists() and want in r.stdout, r.stdout

    return check


def _formatted(ws: Path, r: subprocess.CompletedProcess[str]) -> None:
    assert r.returncode == 0, r.stdout + r.stderr
    assert "return x * 2" in (ws / "src" / "app.py").read_text()


def _json_pretty(ws: Path, r: subprocess.CompletedProcess[str]) -> None:
    assert r.returncode == 0, r.stdout + r.stderr
    assert (ws / "data.json").read_text().startswith('{\n    "a": [')


def _pip(rig_ports: dict[str, int]) -> str:
    return (
        "python3 -m venv .venv && .venv/bin/pip install -q --disable-pip-version-check --no-cache-dir "
        f"--index-url http://localhost:{rig_ports['pypi']}/simple/ nexusdemo && "
        ".venv/bin/python -c 'import nexusdemo; print(\"value\", nexusdemo.VALUE)'"
    )


def _npm_ci(rig_ports: dict[str, int]) -> str:
    return (
        f"npm ci --no-audit --no-fund --registry http://localhost:{rig_ports['npm']}/ && "
        "node -e \"console.log('[' + require('leftpad-local')('x', 3, '.') + ']')\""
    )


TASKS: list[Task] = [
    Task("git status", "git status --short && git st", _ok()),
    Task("git diff", "git diff --stat", _ok("src/app.py"), _modify),
    Task("git log", "git log --oneline -n 5", _ok("initial")),
    Task(
        "git commit (identity)",
        "git add -A && git commit -qm 'fix: add sub' && git log -1 --oneline",
        _committed,
        _modify,
    ),
    Task("git branch and switch", "git switch -q -c feature/x && git branch --show-current", _ok("feature/x")),
    Task("git stash and pop", "git stash -q && git stash list && git stash pop -q", _stash, _modify),
    Task("git show and blame", "git show --stat HEAD && git blame -s src/app.py | head -3", _ok("initial")),
    Task("git grep", "git grep -n TODO", _ok("src/app.py:1:")),
    Task("git config (user's)", "git config user.name && git config user.email", _ok(*IDENTITY)),
    Task("grep -rn (masked .env)", "grep -rn TODO . --exclude-dir=.git", _grep),
    Task("find", "find . -name '*.py' -not -path './.git/*' | sort", _ok("./src/app.py", "./tests/test_app.py")),
    Task("sed -i", "sed -i 's/old_name/new_name/g' src/app.py && grep -c new_name src/app.py", _sed),
    Task("ls and wc", "ls -la && wc -l src/*.py", _ok("Makefile", "total")),
    Task("python venv", "python3 -m venv .venv && .venv/bin/python -c 'import sys; print(sys.prefix)'", _ok(".venv")),
    Task("pip install (local index)", "PIP", _ok("value 42")),
    Task("pytest", "python3 -m pytest -q -p no:cacheprovider tests/test_app.py", _ok("1 passed")),
    Task("unittest", "python3 -m unittest discover -s tests -p 'test_unit.py' 2>&1", _ok("OK")),
    Task("node --test", "node --test 2>&1", _ok("pass 1")),
    Task("npm ci (local registry)", "NPM", _ok("[..x]")),
    Task("npm test", "npm test 2>&1", _ok("pass 1")),
    Task("make", "make && ./hello", _built("hello", "hello, sandbox")),
    Task("make check", "make -s check && echo checked", _ok("checked")),
    Task("C build (gcc)", "gcc -O2 -Wall -o hello hello.c && ./hello", _built("hello", "hello, sandbox")),
    Task("ruff format and check", "ruff format src && ruff check --select E,F src", _formatted),
    Task("json.tool format", "python3 -m json.tool --sort-keys data.json > d.tmp && mv d.tmp data.json", _json_pretty),
    Task("tar an archive", "tar czf dist.tgz src && tar tzf dist.tgz | sort", _ok("src/app.py")),
    Task("generate into build/", "python3 scripts/gen.py && cat build/version.txt", _ok("1.0.0")),
]


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_everyday_task_runs_sandboxed_without_asking(rig: Rig, task: Task) -> None:
    if task.name in NEEDS_TEST_TOOLS and _VENV_HIDDEN:
        pytest.skip(f"the test environment lies in the host's temp directory ({VENV_BIN}), which a sandbox replaces")
    ports = {"pypi": rig.pypi_port, "npm": rig.npm_port}
    command = {"PIP": _pip(ports), "NPM": _npm_ci(ports)}.get(task.command, task.command)
    sb, bare = rig.twins()
    if task.setup is not None:
        task.setup(sb)
        task.setup(bare)
    d = rig.decide(command, sb)
    assert d.decision == "allow", f"{task.name}: {d.decision} ({d.source}): {d.reason}"
    assert d.updated_input is not None and wrapper_words(str(d.updated_input["command"])) is not None, d
    r, took = rig.run(str(d.updated_input["command"]), sb)
    task.check(sb, r)
    assert ENV_SECRET not in r.stdout + r.stderr and KEY_SECRET not in r.stdout + r.stderr
    rb, bare_took = rig.run(command, bare)
    task.check(bare, rb)  # the task itself is sound: it passes bare too
    rig.rows.append(Row(task.name, "pass", took, bare_took))


def test_at_least_25_everyday_tasks() -> None:
    assert len(TASKS) >= 25


# ---------------------------------------------------------------------------------- asked, with a reason


def test_a_domain_not_allowed_is_asked_and_with_no_one_to_ask_refused(rig: Rig) -> None:
    """Asked, a reason a person would accept: the host is not on the allowed list. Nobody is at a UI
    here, so the proxy refuses at once (403) and the command fails, saying so."""
    sb, _ = rig.twins()
    other = rig.npm_port + 1 if rig.npm_port + 1 != rig.pypi_port else rig.npm_port + 2
    d = rig.decide(f"curl -sS -f -m 20 http://localhost:{other}/", sb)
    assert d.decision == "allow" and d.updated_input is not None, d  # the command runs, sandboxed
    r, took = rig.run(str(d.updated_input["command"]), sb)
    assert r.returncode != 0 and "403" in r.stderr, r.stderr
    assert '"dangerouslyDisableSandbox": true' in r.stderr  # the way out, in Claude's terms
    rig.rows.append(Row("curl a domain not allowed", "asked", took, None, "network ask: host not allowed"))


def test_a_push_outside_the_workspace_fails_inside_then_the_escape_is_asked_and_runs_outside(rig: Rig) -> None:
    """The escape, end to end: ``git push`` to a remote outside the workspace cannot write there from the
    sandbox; the agent is told so and how to ask; its second call (``dangerouslyDisableSandbox``) is
    asked with what the sandbox would have contained, and only the person's allow runs it outside."""
    sb, _ = rig.twins()
    remote = rig.root / f"remote{rig.n}.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True, env=rig.env)
    _git(sb, rig.env, "remote", "add", "origin", str(remote))
    d = rig.decide("git push -q origin main", sb)
    assert d.decision == "allow" and d.updated_input is not None, d
    r, took = rig.run(str(d.updated_input["command"]), sb)
    assert r.returncode != 0 and "Read-only file system" in r.stderr, r.stderr
    assert "nexusd's sandbox" in r.stderr and '"dangerouslyDisableSandbox": true' in r.stderr
    # no one at a UI: the escape is not allowed by the mode that allowed the sandboxed call
    d2 = rig.decide("git push -q origin main", sb, dangerouslyDisableSandbox=True)
    assert d2.decision == "deny" and "OUTSIDE the sandbox" in d2.reason, d2
    person = Person(rig.daemon.socket, "allow")
    try:
        d3 = rig.decide("git push -q origin main", sb, dangerouslyDisableSandbox=True)
    finally:
        person.close()
    assert d3.decision == "allow" and d3.updated_input is None, d3  # runs as the agent wrote it: outside
    assert len(person.seen) == 1
    shown = person.seen[0].verdict.reason
    assert "OUTSIDE the sandbox" in shown and "the agent says: workflow task" in shown, shown
    assert "network: git push" in shown, shown
    r2, bare_took = rig.run("git push -q origin main", sb)
    assert r2.returncode == 0, r2.stderr
    assert subprocess.run(["git", "rev-parse", "main"], cwd=remote, capture_output=True).returncode == 0
    rig.rows.append(Row("git push (escape)", "asked", took, bare_took, "escape: writes outside the workspace"))


def test_a_persons_allow_of_an_ordinary_ask_still_runs_sandboxed(rig: Rig) -> None:
    """Only an escape leaves the sandbox: a call asked for another reason (here a safety check) and
    allowed by a person comes back wrapped."""
    sb, _ = rig.twins()
    person = Person(rig.daemon.socket, "allow")
    try:
        d = rig.decide("rm -rf ~/.cache/nothing-here", sb)
    finally:
        person.close()
    if not person.seen:
        pytest.skip(f"not asked in this policy ({d.decision}: {d.reason})")
    assert d.decision == "allow" and d.updated_input is not None, d
    assert wrapper_words(str(d.updated_input["command"])) is not None


@pytest.mark.parametrize(
    "extra",
    [
        {"dangerouslyDisableSandbox": True},
        {"sandbox_permissions": "require_escalated", "justification": "needs the host"},
        {"command_prefix": "# nexus: outside-sandbox\n"},
        {"command_prefix": "  #NEXUS:OUTSIDE-SANDBOX\n"},
    ],
    ids=["claude", "codex", "marker", "marker-spelling"],
)
def test_an_escape_is_never_allowed_by_a_rule_or_a_mode(rig: Rig, extra: dict[str, object]) -> None:
    """Not by the mode that allows the sandboxed form, and not by an allow rule naming the command."""
    sb, _ = rig.twins()
    prefix = str(extra.pop("command_prefix", ""))
    for command in ("git status --short", "ls", "ls"):  # the same call again: no remembered allow either
        d = rig.decide(prefix + command, sb, **extra)
        assert d.decision == "deny" and "OUTSIDE the sandbox" in d.reason, (command, d)
    plain = rig.decide("ls", sb, dangerouslyDisableSandbox=False)
    assert plain.decision == "allow" and plain.updated_input is not None  # false is no request


def test_masked_files_read_as_empty_and_home_secrets_stay_hidden(rig: Rig) -> None:
    sb, _ = rig.twins()
    d = rig.decide("cat .env; echo rc=$?; cat ~/.ssh/id_ed25519; stat -c %F .env; cat ~/.gitconfig | head -2", sb)
    assert d.decision == "allow" and d.updated_input is not None
    r, _ = rig.run(str(d.updated_input["command"]), sb)
    out = r.stdout + r.stderr
    assert "rc=0" in out and "regular empty file" in out and ENV_SECRET not in out and KEY_SECRET not in out
    assert IDENTITY[0] in out  # non-secret configuration is where tools look
    assert (sb / ".env").read_text() == ENV_SECRET + "\n"


# ---------------------------------------------------------------------------------- the wrapper's cost


def test_wrapper_cost_against_bare_bubblewrap(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The agent's wrapper running ``true`` (default policy: isolated network) against bare bubblewrap
    running ``true``, medians in one run; printed, never asserted (the machine is shared)."""
    import statistics

    from nexusd.policy.store import PolicyStore
    from nexusd.sandbox.plan import _state_dir, plan_command, workspace_dir
    from nexusd.sandbox.probe import probe
    from nexusd.sandbox.wrapper import RUN_DIR, agent_command

    root = Path(tempfile.mkdtemp(prefix="nxwc", dir="/var/tmp"))
    try:
        (root / "ws").mkdir()
        store = PolicyStore(config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "m")
        store.load()
        found = probe()
        ws = str(root / "ws")
        plan = plan_command("true", ws, store, found, workspace=ws)
        assert plan.allowed and plan.backend == "bwrap", plan.reason
        text = agent_command(plan, "true", workspace_dir(_state_dir(store), os.path.realpath(ws)) / RUN_DIR)
        bare = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        bare += ["--unshare-all", "--die-with-parent", "true"]

        def median(argv: list[str]) -> float:
            runs = []
            for _ in range(15):
                t = time.perf_counter()
                subprocess.run(argv, check=True, cwd=ws, timeout=60)
                runs.append(time.perf_counter() - t)
            return statistics.median(runs) * 1000

        b, w = median(bare), median(["/bin/bash", "-c", text])
        sys.__stdout__.write(f"\nwrapper `true` {w:.1f} ms vs bare bubblewrap {b:.1f} ms: {w - b:+.1f} ms\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_home_config_in_a_workspace_that_holds_the_state_directory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """An agent working in the home itself: the sandbox HOME (under the state directory) lies inside the
    workspace, so the ~/.gitconfig mount point must exist before the decision or it looks planted."""
    from nexusd.policy.store import PolicyStore
    from nexusd.sandbox.plan import plan_command
    from nexusd.sandbox.probe import probe
    from nexusd.sandbox.runner import execute

    root = Path(tempfile.mkdtemp(prefix="nxwh", dir="/var/tmp"))
    try:
        home = root / "home"
        (home / ".local" / "state").mkdir(parents=True)
        (home / ".gitconfig").write_text(f"[user]\n\tname = {IDENTITY[0]}\n")
        store = PolicyStore(
            config_dir=home / ".config" / "nexus",
            state_dir=home / ".local" / "state" / "nexus",
            managed_dir=root / "m",
            home=str(home),
        )
        store.load()
        found = probe()
        old = os.environ.get("HOME")
        os.environ["HOME"] = str(home)
        try:
            for _ in range(2):
                plan = plan_command("git config user.name", str(home), store, found, workspace=str(home))
                assert plan.allowed, plan.reason
                with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
                    rc = execute(plan, stdout=out, err=err)  # type: ignore[arg-type]
                    out.seek(0)
                    err.seek(0)
                    text, errors = out.read().decode(), err.read()
                assert rc == 0 and text.strip() == IDENTITY[0], (text, errors)
                assert "planted" not in errors, errors
        finally:
            if old is None:
                os.environ.pop("HOME", None)
            else:
                os.environ["HOME"] = old
    finally:
        shutil.rmtree(root, ignore_errors=True)
