"""``python -I -m nexusd.sandbox.overlay WORKSPACE UPPER WORK -- SANDBOX-ARGV...``: the sandbox on an overlay.

Preview before effect (docs/UNDO.md) runs a sandboxed command on a copy-on-write view of the workspace:
this process enters a new user and mount namespace (as the caller's own uid, mapped to itself), makes every
mount private, mounts overlayfs over the workspace path (lower: the workspace, upper and work: a private
directory of the daemon's state, outside the workspace) and execs the sandbox's argv (bubblewrap, or the
unshare fallback). The sandbox binds the workspace path as it always does, and so binds the overlay: the
command reads the workspace and writes only into UPPER. The real workspace is never writable to it.

bubblewrap 0.8 has no overlay options, and unprivileged overlayfs inside a user namespace needs Linux >=
5.11 (``userxattr``: overlay's own metadata lives in ``user.overlay.*`` attributes). Anything that fails
here (no user namespaces, no overlayfs, an upper on a file system without user xattrs) stops with exit 126
and one line: the command does not run, never on the real workspace instead.

The process is single-threaded when it calls ``unshare`` (a requirement for a new user namespace), the
directories are opened before the mount and passed as ``/proc/self/fd/N`` (no mount-option escaping of
commas or colons in paths), and capabilities are gone at ``execve`` (a non-zero uid in the namespace).
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_REC, MS_PRIVATE = 16384, 1 << 18
EXIT_REFUSED = 126
MODULE = "nexusd.sandbox.overlay"


def argv_prefix(workspace: str, upper: str, work: str) -> list[str]:
    """What goes before a sandbox argv to run it on the overlay."""
    return [sys.executable, "-I", "-m", MODULE, workspace, upper, work, "--"]


def _check(ok: int, what: str) -> None:
    if ok != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def mount_overlay(workspace: str, upper: str, work: str) -> None:
    """Enter a user and mount namespace of our own and put the overlay over ``workspace`` there."""
    for p in (workspace, upper, work):
        if not os.path.isabs(p) or any(ch in p for ch in ",:\\\n"):
            raise OSError(0, f"{p!r}: a path with a comma, colon or backslash cannot be named to overlayfs")
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    # Opened before unshare: the paths as this user sees them, with no symlink at the last component.
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fds = [os.open(p, flags) for p in (workspace, upper, work)]
    before = os.fstat(fds[0]).st_dev
    try:
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(user, mount)")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        # nothing mounted here may reach the host's mount namespace
        _check(libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "make mounts private")
        opts = f"lowerdir={workspace},upperdir={upper},workdir={work},userxattr"
        target = os.fsencode(workspace)
        _check(libc.mount(b"overlay", target, b"overlay", ctypes.c_ulong(0), os.fsencode(opts)), "mount overlayfs")
    finally:
        for fd in fds:
            os.close(fd)
    # the command reaches the workspace by its path: check that the path now shows the overlay
    if os.stat(workspace).st_dev == before:
        raise OSError(0, "the workspace's path does not show the overlay")


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        print("nexus preview: usage: python -m nexusd.sandbox.overlay WORKSPACE UPPER WORK -- ARGV...", file=sys.stderr)
        return EXIT_REFUSED
    workspace, upper, work = argv[:3]
    try:
        mount_overlay(workspace, upper, work)
    except OSError as e:
        print(
            f"nexus: refused to run the command: preview needs a copy-on-write overlay of the workspace, "
            f"and it could not be made here ({e.strerror or e}); the command did not run",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_REFUSED
    try:
        os.chdir(os.getcwd())  # re-resolve the cwd: inside the workspace it must be the overlay's
    except OSError:
        os.chdir("/")
    try:
        os.execv(argv[4], argv[4:])
    except OSError as e:
        print(f"nexus: cannot start the sandbox ({argv[4]}): {e}", file=sys.stderr, flush=True)
    return EXIT_REFUSED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
