"""macOS: the same plan as a Seatbelt profile, run with ``sandbox-exec -p PROFILE``.

UNTESTED ON REAL HARDWARE: nothing here has run on a Mac yet. The profile text is checked against the
plan for every escape-corpus scenario (``tests/sandbox/test_seatbelt.py``, golden files reviewed by hand);
docs/SANDBOX.md says how to run the escape corpus on a Mac with one command.

One source of truth: the ordered mount list of ``nexusd.sandbox.bwrap.plan_mounts`` (parent before child,
at equal paths the stronger kind last). Seatbelt, like bubblewrap's mounts, lets a *later* rule win, so
each entry becomes one rule in the same order:

============  =========================================  ============================================
plan entry    bubblewrap                                 Seatbelt
============  =========================================  ============================================
root          ``--ro-bind / /``                          ``(allow file-read*)`` + no write allowed
rw            ``--bind P P``                             ``(allow file-read* file-write* (subpath P))``
ro            ``--ro-bind P P``                          ``(deny file-write* (subpath P))``
reveal        ``--ro-bind P P`` inside a mask            ``(allow file-read* (subpath P))`` + no write
mask          tmpfs or /dev/null over P                  ``(deny file-read* file-write* (subpath P))``
============  =========================================  ============================================

Path rules match the path an operation names, not the file: renaming a parent would carry a protected
path out from under its rule, so every parent of a read-only or masked path is refused
``file-write-unlink`` (rename and delete), as sandbox-runtime does. Unlike bubblewrap there is no pid
namespace (other processes stay visible to ``ps``; signals only reach the sandbox's own), no fresh
``/tmp`` (TMPDIR is the per-workspace one; the shared ``/tmp`` is read-only), and ``socket(AF_UNIX)``
is refused by not allowing ``system-socket`` for ``AF_UNIX`` rather than by seccomp.
"""

from __future__ import annotations

import json

from nexusd.sandbox.bwrap import MountSpec, plan_mounts

SANDBOX_EXEC = "/usr/bin/sandbox-exec"

# Essentials every command needs under (deny default): processes, their own signals, system information,
# shared memory, and the few system services that name lookups, logging and TLS use (the set Chrome's and
# sandbox-runtime's profiles allow; no wildcard).
_BASE = """\
(version 1)
(deny default)
(allow process-exec process-fork)
(allow process-info* signal (target same-sandbox))
(allow sysctl-read user-preference-read iokit-get-properties ipc-posix-shm ipc-posix-sem)
(allow mach-lookup
  (global-name "com.apple.system.logger")
  (global-name "com.apple.system.notification_center")
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.system.opendirectoryd.membership")
  (global-name "com.apple.bsd.dirhelper")
  (global-name "com.apple.logd")
  (global-name "com.apple.trustd.agent")
  (global-name "com.apple.SecurityServer")
  (global-name "com.apple.coreservices.launchservicesd")
  (global-name "com.apple.lsd.mapdb"))
(allow system-socket (require-all (socket-domain AF_SYSTEM) (socket-protocol 2)))
(allow pseudo-tty)
(allow file-ioctl (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty") (literal "/dev/dtracehelper")
  (regex #"^/dev/ttys[0-9]+$"))
"""
_DEVICES = (
    '(allow file-write* (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty") '
    '(regex #"^/dev/ttys[0-9]+$") (regex #"^/dev/fd/"))'
)


def sbpl_string(path: str) -> str:
    """A Seatbelt string literal (the profile language reads JSON-style escapes)."""
    return json.dumps(path, ensure_ascii=False)


def _parents(path: str) -> list[str]:
    out = []
    p = path.rstrip("/")
    while "/" in p:
        p = p.rsplit("/", 1)[0]
        if not p:
            break
        out.append(p)
    return out


def build_profile(spec: MountSpec, *, proxy_port: int | None = None, unix_sockets: bool = False) -> str:
    """The profile for ``spec``. ``proxy_port``: with the network isolated, the one loopback port the
    command may connect to (the egress proxy, when the plan has one). ``unix_sockets``: allow AF_UNIX."""
    lines = [_BASE.rstrip("\n"), "; network"]
    if spec.network:
        lines.append("(allow network*)")
    elif proxy_port is not None:
        lines.append(f'(allow network-outbound (remote ip "localhost:{int(proxy_port)}"))')
    if unix_sockets:
        lines += [
            "(allow system-socket (socket-domain AF_UNIX))",
            '(allow network-outbound (remote unix-socket (path-regex #"^/")))',
            '(allow network-bind (local unix-socket (path-regex #"^/")))',
        ]
    lines += ["; files: the plan's mounts in order, a later rule wins", "(allow file-read*)", _DEVICES]
    pinned: list[str] = []
    for kind, path in plan_mounts(spec):
        s = f"(subpath {sbpl_string(path)})"
        if kind == "rw":
            lines.append(f"(allow file-read* file-write* {s})")
        elif kind == "ro":
            lines.append(f"(deny file-write* {s})")
            pinned.append(path)
        elif kind == "reveal":
            lines.append(f"(allow file-read* {s})")
            lines.append(f"(deny file-write* {s})")
        else:
            lines.append(f"(deny file-read* file-write* {s})")
            pinned.append(path)
    parents = sorted({p for path in pinned for p in _parents(path)})
    if parents:
        lines.append("; a read-only or hidden path cannot be renamed away with its parent")
        lines.append("(deny file-write-unlink " + " ".join(f"(literal {sbpl_string(p)})" for p in parents) + ")")
    return "\n".join(lines) + "\n"


# Seatbelt has no --chdir: a shell inside the sandbox changes directory, then becomes the command.
_CHDIR = ["/bin/sh", "-c", 'cd "$0" || exit 126; exec "$@"']


def build_seatbelt_argv(
    spec: MountSpec, argv: list[str], *, unix_sockets: bool = False, proxy_port: int | None = None
) -> list[str]:
    """``sandbox-exec -p PROFILE sh -c 'cd' CWD env -u NAME K=V CMD...``: the command (``argv``) stays the
    last words, untouched; its environment comes from ``env`` (Seatbelt has no --setenv either)."""
    profile = build_profile(spec, proxy_port=proxy_port, unix_sockets=unix_sockets)
    env = ["/usr/bin/env"]
    for name in spec.unsetenv:
        env += ["-u", name]
    env += [f"{k}={v}" for k, v in spec.env]
    return [SANDBOX_EXEC, "-p", profile, *_CHDIR, spec.cwd, *env, *argv]
