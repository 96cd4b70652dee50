"""Install, remove and inspect nexusd as a user service, one printed step at a time.

An install is a list of steps (write a file, run a service-manager command) planned up front so that
``--dry-run`` prints exactly what a real run does. Files are written atomically and always before the
service manager is told; when the manager cannot be reached (no user session bus, no launchd), the
step says so and the files are left correct, with the commands to finish by hand.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from nexusd.atomicfile import write_atomic
from nexusd.service import launchd, systemd

Out = Callable[[str], None]
COMMAND_TIMEOUT = 60.0


@dataclass(frozen=True)
class WriteFile:
    path: Path
    content: str
    mode: int = 0o644

    def describe(self) -> str:
        return f"write {self.path}"


@dataclass(frozen=True)
class MakeDir:
    path: Path
    mode: int = 0o700

    def describe(self) -> str:
        return f"create directory {self.path} (mode {self.mode:04o})"


@dataclass(frozen=True)
class RemoveFile:
    path: Path

    def describe(self) -> str:
        return f"remove {self.path}"


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    tolerate: bool = False  # a failure here is expected at times (e.g. unloading a job that is not loaded)

    def describe(self) -> str:
        return " ".join(self.argv)


Step = WriteFile | MakeDir | RemoveFile | Command


class StepFailed(Exception):
    pass


@dataclass
class Plan:
    manager: str
    steps: list[Step]
    finish_by_hand: list[str]  # the commands to run once the service manager is reachable
    action: str = "install"  # or "uninstall": what the closing words say was left done


def default_manager() -> str:
    return "launchd" if sys.platform == "darwin" else "systemd"


def find_nexusd(explicit: str | None = None) -> str:
    """The absolute path of the ``nexusd`` installed beside this ``nexusctl``.

    The console scripts are installed together, so the sibling of the running nexusctl (or of the
    interpreter, for ``python -m``) is the matching daemon; PATH is the last resort. Symlinks are kept
    (not resolved) so that upgrading a pipx or Homebrew install keeps the unit valid.
    """
    candidates: list[str] = []
    if explicit:
        candidates.append(explicit)
    else:
        argv0 = sys.argv[0] if sys.argv else ""
        if os.path.basename(argv0) == "nexusctl":
            candidates.append(os.path.join(os.path.dirname(os.path.abspath(argv0)), "nexusd"))
        candidates.append(os.path.join(os.path.dirname(sys.executable), "nexusd"))
        found = shutil.which("nexusd")
        if found:
            candidates.append(found)
    for c in candidates:
        path = os.path.abspath(c)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    tried = ", ".join(candidates) or "PATH"
    raise StepFailed(f"cannot find an executable nexusd (tried {tried}); pass --nexusd PATH")


def nexusd_warnings(nexusd: str) -> list[str]:
    """Anyone who can replace the daemon's executable runs code as this user at its next start."""
    warnings = []
    for p in (Path(nexusd), Path(nexusd).parent):
        try:
            st = p.stat()
        except OSError:
            continue
        if st.st_mode & 0o022 and not (stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX):
            warnings.append(f"{p} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}); fix that first")
        elif st.st_uid not in (0, os.geteuid()):
            warnings.append(f"{p} is owned by uid {st.st_uid}, who can replace the daemon")
    return warnings


def home_dir(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or str(Path.home()))


def plan_install(manager: str, nexusd: str, environ: Mapping[str, str] | None = None) -> Plan:
    env = os.environ if environ is None else environ
    if manager == "systemd":
        ctl = ("systemctl", "--user")
        steps: list[Step] = [WriteFile(p, c) for p, c in systemd.files(nexusd, env).items()]
        cmds: list[Step] = [
            Command((*ctl, "daemon-reload")),
            Command((*ctl, "enable", "--now", systemd.SOCKET_NAME)),
            # A reinstall (new nexusd path or unit) takes effect now if the daemon is running; no-op if not.
            Command((*ctl, "try-restart", systemd.SERVICE_NAME)),
        ]
        return Plan(manager, steps + cmds, [c.describe() for c in cmds])
    if manager == "launchd":
        home = home_dir(env)
        domain = f"gui/{os.getuid()}"
        agent = launchd.agent_path(home)
        steps = [
            MakeDir(launchd.socket_path(home).parent, 0o700),
            MakeDir(launchd.log_path(home).parent, 0o755),
            *(WriteFile(p, c) for p, c in launchd.files(nexusd, home).items()),
        ]
        cmds = [
            # An older copy of the agent may be loaded; unloading one that is not loaded fails harmlessly.
            Command(("launchctl", "bootout", f"{domain}/{launchd.LABEL}"), tolerate=True),
            # Enabled first: bootstrap refuses a job a previous `launchctl disable` left disabled.
            Command(("launchctl", "enable", f"{domain}/{launchd.LABEL}")),
            Command(("launchctl", "bootstrap", domain, str(agent))),
        ]
        return Plan(manager, steps + cmds, [c.describe() for c in cmds[1:]])
    raise ValueError(f"unknown service manager {manager!r}")


def plan_uninstall(manager: str, environ: Mapping[str, str] | None = None) -> Plan:
    env = os.environ if environ is None else environ
    if manager == "systemd":
        ctl = ("systemctl", "--user")
        d = systemd.unit_dir(env)
        stop = Command((*ctl, "disable", "--now", systemd.SOCKET_NAME, systemd.SERVICE_NAME))
        reload_ = Command((*ctl, "daemon-reload"))
        steps: list[Step] = [
            stop,
            RemoveFile(d / systemd.SOCKET_NAME),
            RemoveFile(d / systemd.SERVICE_NAME),
            reload_,
        ]
        return Plan(manager, steps, [stop.describe(), reload_.describe()], action="uninstall")
    if manager == "launchd":
        home = home_dir(env)
        bootout = Command(("launchctl", "bootout", f"gui/{os.getuid()}/{launchd.LABEL}"), tolerate=True)
        return Plan(manager, [bootout, RemoveFile(launchd.agent_path(home))], [bootout.describe()], action="uninstall")
    raise ValueError(f"unknown service manager {manager!r}")


def run_plan(plan: Plan, out: Out, *, dry_run: bool = False) -> bool:
    """Run (or with dry_run, print) every step; True when all succeeded.

    Files are always written or removed. After a service-manager command fails, later commands are
    skipped (they depend on it) and the person is told what to run once the manager is reachable.
    """
    n = len(plan.steps)
    failed = False
    why = ""
    for i, step in enumerate(plan.steps, 1):
        head = f"[{i}/{n}] {step.describe()}"
        if dry_run:
            out(f"{head} ... (dry run)")
            if isinstance(step, WriteFile):
                out(f"      --- {step.path} (mode {step.mode:04o})")
                out("\n".join("      " + line if line else "" for line in step.content.splitlines()))
                out("      ---")
            continue
        if isinstance(step, Command) and failed:
            out(f"{head} ... skipped (an earlier step failed)")
            continue
        try:
            detail = _run_step(step)
        except StepFailed as e:
            if isinstance(step, Command) and step.tolerate:
                out(f"{head} ... not needed ({e})")
                continue
            out(f"{head} ... FAILED: {e}")
            failed = True
            why = why or str(e)
            continue
        out(f"{head} ... {detail}")
    if failed and not dry_run:
        for line in not_finished(plan, why):
            out(line)
    return not failed


# What systemctl --user says when there is no user manager to talk to (ssh without a login session,
# containers, CI, su/sudo shells): no session bus, or no $XDG_RUNTIME_DIR.
_NO_USER_MANAGER = ("Failed to connect to bus", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "No medium found")


def _user_name() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return "$USER"


def not_finished(plan: Plan, why: str) -> list[str]:
    """The closing words after a failed service-manager command: why, what is already done, and the way
    forward (issue 38: the install failed with no reason, the uninstall said "the files are in place")."""
    done = (
        "The files above are written"
        if plan.action == "install"
        else "The service's files are removed, but the service manager still knows the old service"
    )
    lines = ["", f"Not finished: {plan.manager} could not be told ({why}). {done}."]
    no_manager = plan.manager == "systemd" and any(m in why for m in _NO_USER_MANAGER)
    if no_manager and plan.action == "uninstall":
        lines += [
            "There is no systemd user manager for you here, so no nexusd service of it is running: nothing more",
            "is needed in this session. Where a user manager runs for you (a graphical or lingering login),",
        ]
    elif no_manager:
        user = _user_name()
        lines += [
            "There is no systemd user manager for you here (usual over ssh without a login session, in containers,",
            "in CI, or after su/sudo). Either:",
            f"  - give your user one that outlives logins: `loginctl enable-linger {user}` (as root or with polkit),",
            "    log in again, then run this command again; or",
            "  - run the daemon in a terminal instead: `nexusd` (in a checkout: `scripts/run-daemon`).",
        ]
    lines.append(
        ("f" if no_manager and plan.action == "uninstall" else "Once the service manager is reachable, f")
        + "inish with:"
    )
    lines += [f"    {cmd}" for cmd in plan.finish_by_hand]
    return lines


def _run_step(step: Step) -> str:
    if isinstance(step, WriteFile):
        try:
            unchanged = step.path.is_file() and step.path.read_text() == step.content
            write_atomic(step.path, step.content, step.mode, dir_mode=0o755)
        except OSError as e:
            raise StepFailed(f"{e.strerror or e}") from e
        return "ok (unchanged)" if unchanged else "ok"
    if isinstance(step, MakeDir):
        try:
            existed = step.path.is_dir()
            step.path.mkdir(mode=step.mode, parents=True, exist_ok=True)
            st = os.lstat(step.path)
            if not stat.S_ISDIR(st.st_mode):
                raise StepFailed("exists and is not a directory")
            if st.st_uid != os.geteuid():
                raise StepFailed(f"owned by uid {st.st_uid}, not by us")
            if stat.S_IMODE(st.st_mode) != step.mode:
                os.chmod(step.path, step.mode)
        except OSError as e:
            raise StepFailed(f"{e.strerror or e}") from e
        return "ok (exists)" if existed else "ok"
    if isinstance(step, RemoveFile):
        try:
            step.path.unlink()
        except FileNotFoundError:
            return "ok (not present)"
        except OSError as e:
            raise StepFailed(f"{e.strerror or e}") from e
        return "ok"
    return _run_command(step.argv)


def _run_command(argv: Sequence[str]) -> str:
    exe = shutil.which(argv[0])
    if exe is None:
        hint = " (launchd is macOS only)" if argv[0] == "launchctl" else ""
        raise StepFailed(f"{argv[0]} not found{hint}")
    try:
        r = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        raise StepFailed(f"no answer within {COMMAND_TIMEOUT:.0f}s") from e
    except OSError as e:
        raise StepFailed(str(e)) from e
    text = " ".join((r.stderr.strip() or r.stdout.strip()).splitlines()[-3:])
    if r.returncode != 0:
        raise StepFailed(f"exit {r.returncode}: {text or 'no output'}")
    return "ok" + (f" ({text})" if text else "")
