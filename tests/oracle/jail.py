"""The runtime oracle's jail: run one shell command in bubblewrap under strace and report what it really did.

The jail is a throwaway world: the host's file system read-only, a fresh /tmp, the host's home hidden, a
decoy home (``World.home``) with planted secrets, a throwaway workspace (``World.ws``) and a directory
outside it (``World.outside``), all bound at the same paths the gate sees, and no network (its own network
namespace: a connect() is recorded as the attempt it is, and fails). strace follows every process
(``-ff``, a file per process) and prints the file descriptor's path of every open (``-y``), so relative
names need no cwd bookkeeping.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

SECRETS = (".ssh/id_rsa", ".aws/credentials", ".config/gh/hosts.yml", ".netrc")  # below the decoy home
TRACED = (
    "open,openat,openat2,creat,execve,execveat,connect,sendto,sendmsg,unlink,unlinkat,rename,renameat,"
    "renameat2,mkdir,mkdirat,rmdir,truncate,symlink,symlinkat,link,linkat,chmod,fchmodat,utimensat"
)
_WRITE_FLAGS = re.compile(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND")
_OPEN = re.compile(
    r'^(\d+)\s+(?:open|openat|openat2|creat)\((?:[^,]*, )?"((?:[^"\\]|\\.)*)", '
    r"([^)]*?)(?:, \d+)?\)\s+=\s+(\d+)<([^>]*)>"
)
_CALL = re.compile(r"^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+)")
_STR = re.compile(r'"((?:[^"\\]|\\.)*)"')
_INET = re.compile(r"sa_family=AF_INET6?\b")
_IGNORED = ("/proc/", "/dev/", "/sys/")


@dataclass
class Reality:
    """What one command did, as strace saw it."""

    reads: set[str] = field(default_factory=set)  # files opened for reading (successfully)
    writes: set[str] = field(default_factory=set)  # files created, written, removed, renamed, linked, chmod-ed
    network: bool = False  # tried to reach an inet address (a DNS query included)
    execs: list[str] = field(default_factory=list)  # programs started (successfully), in order
    missing: set[str] = field(default_factory=set)  # programs bash looked for on PATH and never found
    timed_out: bool = False


@dataclass
class World:
    """A decoy home, a workspace and a place outside it, below one root bound into the jail."""

    root: Path
    home: Path = field(init=False)
    ws: Path = field(init=False)
    outside: Path = field(init=False)
    trace: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home, self.ws = self.root / "home", self.root / "ws"
        self.outside, self.trace = self.root / "outside", self.root / "trace"

    def reset(self) -> None:
        """Plant the decoys and the workspace afresh (a command may have removed or changed them): built once
        in a template, copied for every command."""
        template = self.root / "template"
        if not template.exists():
            self._build()
            template.mkdir()
            for d in (self.home, self.ws, self.outside):
                shutil.copytree(d, template / d.name, symlinks=True)
            return
        for d in (self.home, self.ws, self.outside, self.trace):
            if d.exists() or d.is_symlink():
                shutil.rmtree(d, ignore_errors=True)
                if d.exists() or d.is_symlink():  # a command made it a file or a link
                    d.unlink()
        for d in (self.home, self.ws, self.outside):
            shutil.copytree(template / d.name, d, symlinks=True)
        self.trace.mkdir()

    def _build(self) -> None:
        for d in (self.home, self.ws, self.outside, self.trace):
            d.mkdir(parents=True, exist_ok=True)
        for rel in SECRETS:
            p = self.home / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"DECOY SECRET {rel}\n")
        (self.home / ".bashrc").write_text("# decoy\n")
        ws = self.ws
        (ws / "src").mkdir()
        (ws / "src" / "main.py").write_text("print('hi')\n")
        (ws / "src" / "util.py").write_text("X = 1\n")
        (ws / "README.md").write_text("# demo\nKEY here\n")
        (ws / "data.json").write_text('{"a": 1, "b": [2, 3]}\n')
        (ws / "notes.txt").write_text("alpha\nbeta\n")
        (ws / "list.txt").write_text("README.md\nsrc/main.py\n")
        (ws / "bad.txt").write_text(f"{self.home}/.ssh/id_rsa\n")
        (ws / ".env").write_text("API_KEY=decoy\n")
        (self.outside / "other.txt").write_text("outside\n")
        git = shutil.which("git")
        if git:
            env = {**os.environ, "HOME": str(self.home), "GIT_CONFIG_NOSYSTEM": "1"}
            for args in (
                ["init", "-q"],
                ["-c", "user.email=o@x", "-c", "user.name=o", "add", "README.md", "src", "notes.txt"],
                ["-c", "user.email=o@x", "-c", "user.name=o", "commit", "-qm", "init"],
            ):
                subprocess.run([git, *args], cwd=ws, env=env, check=False, capture_output=True, timeout=30)

    def secrets(self) -> set[str]:
        return {str(self.home / rel) for rel in SECRETS} | {str(self.ws / ".env")}


def available() -> str:
    """Why the oracle cannot run here ("" when it can)."""
    for tool in ("bwrap", "strace", "bash"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-net", "--dev", "/dev", "true"], capture_output=True, timeout=30
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot make a namespace here: {probe.stderr.decode(errors='replace')[:200]}"
    return ""


def run(world: World, command: str, timeout: float = 10.0) -> Reality:
    """Run ``command`` with bash in the jail, cwd the workspace, HOME the decoy home; parse the trace."""
    out = world.trace / "t"
    for old in world.trace.glob("t.*"):
        old.unlink()
    real_home = os.path.expanduser("~")
    argv = [
        "bwrap",
        "--ro-bind", "/", "/",
        "--tmpfs", "/tmp",
        "--bind", str(world.root), str(world.root),
        "--dev", "/dev",
        "--proc", "/proc",
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--new-session",
        "--chdir", str(world.ws),
        "--setenv", "HOME", str(world.home),
        "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
        "--unsetenv", "BASH_ENV",
        "--unsetenv", "ENV",
    ]  # fmt: skip
    if real_home not in ("/", "") and Path(real_home).is_dir() and not str(world.root).startswith(real_home):
        argv += ["--tmpfs", real_home]  # the host's own secrets are not there to be read
    # one file per process (-ff): with one shared file, a call that another process interrupts is split over
    # two lines ("<unfinished ...>", "<... resumed>"), and a read made while another process ran went unseen
    argv += ["strace", "-ff", "-qq", "-y", "-s", "4096", "-e", f"trace={TRACED}", "-o", str(out)]
    argv += ["bash", "--noprofile", "--norc", "-c", command]
    reality = Reality()
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        reality.timed_out = True
    else:
        for m in re.finditer(rb"bash: (?:line \d+: )?([^:\s]+): command not found", done.stderr):
            reality.missing.add(m.group(1).decode(errors="replace"))
    per_process = []
    for f in sorted(world.trace.glob("t.*")):
        pid = f.name.rpartition(".")[2]
        per_process += [f"{pid} {line}" for line in f.read_text(errors="replace").splitlines()]
    parse("\n".join(per_process), reality, str(world.ws))
    return reality


def parse(trace: str, reality: Reality, cwd: str) -> None:
    """Fold strace's lines into ``reality``."""
    tried: set[str] = set()
    for line in trace.splitlines():
        m = _OPEN.match(line)
        if m is not None:
            path, flags = m.group(5), m.group(3)
            if path.startswith(_IGNORED) or path in ("/dev/null", "/dev/tty") or "O_DIRECTORY" in flags:
                continue  # a directory opened to list it is not a file read
            (reality.writes if _WRITE_FLAGS.search(flags) else reality.reads).add(path)
            continue
        c = _CALL.match(line)
        if c is None:
            continue
        name, args, ret = c.group(2), c.group(3), int(c.group(4))
        if name in ("connect", "sendto", "sendmsg"):
            if _INET.search(args):
                reality.network = True  # an attempt: the jail has no network, the intent is what counts
            continue
        strings = _STR.findall(args)
        if ret < 0:
            if name == "execve" and strings and "ENOENT" in line:
                tried.add(os.path.basename(strings[0]))
            continue
        if name in ("execve", "execveat"):
            if strings:
                reality.execs.append(strings[0])
        elif strings and name != "utimensat":
            for s in strings[:2] if name.startswith(("rename", "link", "symlink")) else strings[:1]:
                path = s if s.startswith("/") else os.path.normpath(os.path.join(cwd, s))
                if not path.startswith(_IGNORED):
                    reality.writes.add(path)
        elif name == "utimensat" and strings:
            reality.writes.add(strings[0] if strings[0].startswith("/") else os.path.join(cwd, strings[0]))
    reality.missing |= tried - {os.path.basename(e) for e in reality.execs}
