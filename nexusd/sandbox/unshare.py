"""The fallback when bubblewrap is missing but user namespaces work: ``unshare`` plus our own mount setup.

``unshare --user --map-root-user --mount --pid --fork --ipc --uts [--net] --mount-proc`` starts this
module (``python -I -m nexusd.sandbox.unshare SPEC -- CMD...``) as root of a fresh user namespace. It
then does what bwrap would: every mount read-only, a fresh /tmp, the workspace and allow_write
writable, the same masks in the same order (``bwrap.plan_mounts``), nested user namespaces disabled,
every capability dropped, no-new-privs; then execs the command. Reduced against bwrap (stated in the
probe): the host's /dev stays visible, and there is no seccomp filter.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import sys

from nexusd.sandbox.bwrap import MountSpec, plan_mounts

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC = 32, 4096, 16384
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
_OPT_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 38, 24


def build_unshare_argv(spec: MountSpec, argv: list[str]) -> list[str]:
    unshare = shutil.which("unshare") or "unshare"
    ns = ["--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child", "--ipc", "--uts", "--mount-proc"]
    if not spec.network:
        ns.append("--net")
    payload = json.dumps(
        {
            "cwd": spec.cwd,
            "writable": spec.writable,
            "read_only": spec.read_only,
            "masked": spec.masked,
            "revealed": spec.revealed,
            "protected_ro": spec.protected_ro,
            "protected_masked": spec.protected_masked,
            "own": spec.own,
            "env": spec.env,
            "unsetenv": spec.unsetenv,
            "mask_file": spec.mask_file,
            "home_files": spec.home_files,
        }
    )
    return [unshare, *ns, "--", sys.executable, "-I", "-m", "nexusd.sandbox.unshare", payload, "--", *argv]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _enc(s: str | None) -> bytes | None:
    return s.encode("utf-8", "surrogateescape") if s is not None else None


def _mount(libc: ctypes.CDLL, src: str | None, target: str, fstype: str | None, flags: int) -> None:
    enc = _enc
    if libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src or ''} -> {target}: {os.strerror(err)}")


def _mountinfo() -> list[tuple[str, int]]:
    """(mount point, flags to keep) of every mount, deepest last; octal escapes decoded."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            mp = fields[4].encode().decode("unicode_escape").encode("latin-1").decode("utf-8", "surrogateescape")
            keep = 0
            for opt in fields[5].split(","):
                keep |= _OPT_FLAGS.get(opt, 0)
            out.append((mp, keep))
    return out


def _ensure_mountpoint(path: str, is_dir: bool) -> None:
    if os.path.lexists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if is_dir:
        os.mkdir(path)
    else:
        open(path, "a").close()


def setup(spec: MountSpec) -> None:
    libc = _libc()
    mounts = plan_mounts(spec)
    # Open every bind source before anything is masked: a reveal or an own dir may lie under a mask.
    sources = {p: os.open(p, os.O_PATH) for kind, p in mounts if kind != "mask"}
    mask_src = os.open(spec.mask_file, os.O_PATH)
    home_src = [(os.open(src, os.O_PATH), dst) for src, dst in spec.home_files]
    mask_dirs = {p for kind, p in mounts if kind == "mask" and os.path.isdir(p)}
    flags_of = {}
    for mp, keep in _mountinfo():
        flags_of[mp] = keep
        if mp == "/proc" or not mp.startswith("/"):
            continue
        try:
            _mount(libc, None, mp, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)
        except OSError:
            if os.path.exists(mp):
                raise
    _mount(libc, "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV)
    for kind, path in mounts:
        if kind == "mask":
            if path in mask_dirs:
                _ensure_mountpoint(path, True)
                _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV)
            else:
                _ensure_mountpoint(path, False)
                _mount(libc, f"/proc/self/fd/{mask_src}", path, None, MS_BIND)
                _mount(libc, None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY)  # an empty file stays empty
            continue
        src = f"/proc/self/fd/{sources[path]}"
        _ensure_mountpoint(path, os.path.isdir(src))
        _mount(libc, src, path, None, MS_BIND | MS_REC)
        ro = MS_RDONLY if kind in ("ro", "reveal") else 0
        _mount(libc, None, path, None, MS_REMOUNT | MS_BIND | ro | MS_NOSUID)
    for fd, dst in home_src:  # the user's non-secret configuration, read-only, in the sandbox's HOME
        src = f"/proc/self/fd/{fd}"
        _ensure_mountpoint(dst, os.path.isdir(src))
        _mount(libc, src, dst, None, MS_BIND | MS_REC)
        _mount(libc, None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
        os.close(fd)
    os.close(mask_src)
    for fd in sources.values():
        os.close(fd)


def _drop_privileges(libc: ctypes.CDLL) -> None:
    try:  # like bwrap --disable-userns: no nested user namespace to regain capabilities in
        with open("/proc/sys/user/max_user_namespaces", "w") as f:
            f.write("0")
    except OSError:
        pass
    cap = 0
    while libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if cap == 0 or libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError("could not drop capabilities")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("nexus sandbox: usage: python -m nexusd.sandbox.unshare SPEC -- CMD...", file=sys.stderr)
        return 126
    d = json.loads(argv[0])
    spec = MountSpec(
        cwd=d["cwd"],
        writable=tuple(d["writable"]),
        read_only=tuple(d["read_only"]),
        masked=tuple(d["masked"]),
        revealed=tuple(d["revealed"]),
        protected_ro=tuple(d["protected_ro"]),
        protected_masked=tuple(d["protected_masked"]),
        own=tuple(d["own"]),
        env=tuple((k, v) for k, v in d["env"]),
        unsetenv=tuple(d["unsetenv"]),
        mask_file=d.get("mask_file", "/dev/null"),
        home_files=tuple((a, b) for a, b in d.get("home_files", ())),
    )
    try:
        setup(spec)
        _drop_privileges(_libc())
    except OSError as e:
        print(f"nexus sandbox: setting up the unshare sandbox failed, not running the command: {e}", file=sys.stderr)
        return 126
    env = dict(os.environ)
    for name in spec.unsetenv:
        env.pop(name, None)
    env.update(dict(spec.env))
    os.chdir(spec.cwd)
    # We are pid 1 of the new pid namespace, which the kernel shields from signals it has no handler
    # for: run the command as a child (so `kill $$` works as usual), reap orphans, relay its status.
    child = os.fork()
    if child == 0:
        try:
            os.execvpe(argv[2], argv[2:], env)
        except OSError as e:
            print(f"nexus sandbox: cannot run {argv[2]}: {e}", file=sys.stderr)
        os._exit(127)
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
