"""From a ``MountSpec`` (what may be written, what is hidden) to the argv of a bubblewrap sandbox.

The view a sandboxed command gets: the root bound read-only, fresh ``/proc``, ``/dev`` and ``/tmp``,
the writable paths bound read-write, then the more specific entries on top. Mount order decides who
wins, so entries are applied parent before child: the most specific setting wins, except that the
always-protected paths (``protected``) can never be opened up again by a user's allow_write/allow_read.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from nexusd.sandbox.probe import BWRAP_COMPAT, BWRAP_FULL

Kind = Literal["rw", "ro", "mask", "reveal"]
# At equal paths the later (higher) one is mounted last and wins.
_PRIORITY: dict[Kind, int] = {"rw": 0, "reveal": 1, "ro": 2, "mask": 3}


@dataclass(frozen=True)
class MountSpec:
    """Absolute, canonical paths. Only existing paths are mounted (bwrap would create missing ones on the
    host inside writable binds); missing protected paths are scrubbed after the command instead."""

    cwd: str
    writable: tuple[str, ...] = ()  # workspace, allow_write
    read_only: tuple[str, ...] = ()  # deny_write, bare-repo files
    masked: tuple[str, ...] = ()  # deny_read: tmpfs over directories, ``mask_file`` (empty, read-only) over files
    revealed: tuple[str, ...] = ()  # allow_read: re-exposed read-only inside a mask
    protected_ro: tuple[str, ...] = ()  # always: .git/hooks, .git/config, rc files, agent settings dirs
    protected_masked: tuple[str, ...] = ()  # always: the daemon's config, state and socket directories
    own: tuple[str, ...] = ()  # the per-workspace sandbox HOME and TMPDIR (writable even inside a mask)
    env: tuple[tuple[str, str], ...] = ()
    network: bool = False  # True: share the host's network
    unsetenv: tuple[str, ...] = field(default=("NEXUS_SOCKET",))
    # An empty regular file bound read-only over masked files: a masked .env reads as empty, so that
    # ``grep -r`` over the tree does not stop on a character device (exit 2). /dev/null when unset.
    mask_file: str = "/dev/null"
    # (source, destination): the user's non-secret configuration (~/.gitconfig ...) bound read-only into
    # the sandbox's own HOME, last, so that tools find it where they look. Sources are readable inside at
    # their own path anyway; the plan leaves out anything masked.
    home_files: tuple[tuple[str, str], ...] = ()


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _depth(path: str) -> int:
    return 0 if path == "/" else path.rstrip("/").count("/")


def plan_mounts(spec: MountSpec) -> list[tuple[Kind, str]]:
    """The mounts to apply, in order, after the read-only root. Pure: decides from the spec alone;
    the caller has already dropped paths that do not exist."""
    return list(_plan_mounts(spec))


@functools.lru_cache(maxsize=16)
def _plan_mounts(spec: MountSpec) -> tuple[tuple[Kind, str], ...]:
    """``plan_mounts``, remembered for the last few specs: a workspace of 1,500 repositories has ~3,000
    protected paths, ~6 ms of Python per plan, on the interpreter lock beside every other agent's call;
    its spec is the same from one call to the next while its tree does not change (a frozen dataclass:
    equal specs, equal mounts)."""
    entries: list[tuple[Kind, str, bool]] = []  # kind, path, always-protected
    entries += [("rw", p, False) for p in spec.writable]
    entries += [("ro", p, False) for p in spec.read_only]
    entries += [("mask", p, False) for p in spec.masked]
    entries += [("reveal", p, False) for p in spec.revealed]
    entries += [("ro", p, True) for p in spec.protected_ro]
    entries += [("mask", p, True) for p in spec.protected_masked]
    protected = [(k, p) for k, p, prot in entries if prot]

    def nearest(path: str) -> Kind | None:
        """What a strict ancestor (deepest wins; at a tie the higher priority) makes of ``path``: a walk up
        ``path``'s ancestors through an index, not a scan of every entry (a tree of 1,500 repositories has
        3,000 protected paths, and the scan made planning quadratic: 1.6 s for one command)."""
        q = path.rstrip("/")
        while q:
            q = q.rsplit("/", 1)[0]
            found = by_path.get(q or "/")
            if found is not None:
                return found
        return None

    kept: list[tuple[Kind, str, bool]] = []
    for kind, path, prot in entries:
        # A user's allow_* never opens an always-protected path or anything under it.
        if not prot and kind in ("rw", "reveal") and any(_under(path, p) for _, p in protected):
            continue
        kept.append((kind, path, prot))
    for own in spec.own:  # ours, so allowed under the masked state directory
        kept.append(("rw", own, False))

    by_path: dict[str, Kind] = {}  # each kept path (as _under compares it) -> its highest-priority kind
    for k, p, _ in kept:
        norm = p.rstrip("/") or "/"
        have = by_path.get(norm)
        if have is None or _PRIORITY[k] > _PRIORITY[have]:
            by_path[norm] = k
    ordered = sorted(set((k, p) for k, p, _ in kept), key=lambda e: (_depth(e[1]), _PRIORITY[e[0]], e[1]))
    out: list[tuple[Kind, str]] = []
    for kind, path in ordered:
        above = nearest(path)
        if kind == "ro" and above != "rw":
            continue  # already read-only (root, reveal) or hidden (mask): re-binding would only expose it
        if kind == "reveal" and above != "mask":
            continue  # allow_read only re-opens what a mask hides
        if kind == "rw" and above == "rw" and path not in spec.own:
            continue  # already writable
        out.append((kind, path))
    return tuple(out)


# bubblewrap refuses more than 9,000 arguments in all (its options, what ``--args`` adds, and the command):
# a workspace of 1,500 repositories has ~3,000 protected paths, each one ``--ro-bind P P`` (9,065 words).
BWRAP_MAX_ARGS = 9_000
LAYER_BUDGET = 8_000  # words one bubblewrap is given, leaving room for the command and its environment
LAYER_FD = 5
LAYER_MOUNT = "/dev/.nexus-layer-{}"  # where a layer's argument file is bound inside (``--dev``'s own tmpfs)


def build_bwrap_argv(
    bwrap: str,
    spec: MountSpec,
    argv: list[str],
    *,
    full: bool = True,
    layer_file: Callable[[bytes], str] | None = None,
    outer: Sequence[str] = (),
) -> list[str]:
    """``full``: the probe's BWRAP_FULL flags worked (else the compat set for old bubblewrap). ``outer``:
    options for the outermost bubblewrap only (a filtered network's ``--info-fd``/``--block-fd``).

    ``layer_file`` (writes an argument file, returns its path): when the words pass ``LAYER_BUDGET``, the
    plain read-only binds (mostly nested repositories' protected paths) move into inner
    bubblewraps, *layers*, each run inside the one before with ``--dev-bind / /`` and its binds read from
    a file (``--args``). A layer binds on top of the view it is started in, so the result is the same
    view; its mounts, like the outer ones, are locked against a command that makes a namespace of its own.
    Without ``layer_file`` the words are left as they are (bubblewrap then refuses: closed)."""
    mounts: list[list[str]] = [["--ro-bind", "/", "/"], ["--dev", "/dev"], ["--proc", "/proc"], ["--tmpfs", "/tmp"]]
    movable: list[int] = []  # the plain read-only binds (never a reveal inside a mask): what a layer may take
    for kind, path in plan_mounts(spec):
        if kind == "rw":
            mounts.append(["--bind", path, path])
        elif kind in ("ro", "reveal"):
            if kind == "ro":
                movable.append(len(mounts))
            mounts.append(["--ro-bind", path, path])
        elif os.path.isdir(path):
            mounts.append(["--tmpfs", path])  # writable but ephemeral: nothing reaches the host
        else:
            mounts.append(["--ro-bind", spec.mask_file, path])
    for src, dst in spec.home_files:
        mounts.append(["--ro-bind", src, dst])
    flags = list(BWRAP_FULL if full else BWRAP_COMPAT)
    if spec.network:
        flags.remove("--unshare-net")
    tail = [*flags, *outer]
    for name in spec.unsetenv:
        tail += ["--unsetenv", name]
    for name, value in spec.env:
        tail += ["--setenv", name, value]
    tail += ["--chdir", spec.cwd, "--"]
    words = 1 + sum(len(m) for m in mounts) + len(tail) + len(argv)
    if words > LAYER_BUDGET and layer_file is not None:
        # each layer is a user namespace and mounts: the outer one may neither forbid those nor take the
        # capabilities they need; the innermost layer says both for the command instead
        last: list[str] = []
        if "--disable-userns" in tail:
            tail.remove("--disable-userns")
            last.append("--disable-userns")
        if "--cap-drop" in tail:
            at = tail.index("--cap-drop")
            last += tail[at : at + 2]
            del tail[at : at + 2]
        mounts, argv = _layered(bwrap, mounts, movable, argv, spec.cwd, layer_file, last)
    return [bwrap, *(w for m in mounts for w in m), *tail, *argv]


def _layered(
    bwrap: str,
    mounts: list[list[str]],
    movable: list[int],
    argv: list[str],
    cwd: str,
    layer_file: Callable[[bytes], str],
    innermost: list[str],
) -> tuple[list[list[str]], list[str]]:
    """The outer mounts, and the command behind the layers that take the ``movable`` read-only binds in
    their order, ``LAYER_BUDGET`` words at most each (the command's words included). A writable bind that
    came after one of them, below it (``allow_write`` inside ``deny_write``), ends up read-only: a
    recursive read-only bind makes what it carries read-only too. Stricter, never looser."""
    per_layer = max(3, (LAYER_BUDGET - len(argv) - 32 * 8) // 3 * 3)
    taken = [w for i in movable for w in mounts[i]]
    chunks = [taken[k : k + per_layer] for k in range(0, len(taken), per_layer)]
    gone = set(movable)
    outer = [m for i, m in enumerate(mounts) if i not in gone]
    places = []
    for n, chunk in enumerate(chunks, 1):
        at = LAYER_MOUNT.format(n)
        outer.append(["--ro-bind", layer_file(os.fsencode("\0".join(chunk) + "\0")), at])
        places.append(at)
    # every layer is a user namespace of its own; ``innermost`` (the outer's --disable-userns and
    # --cap-drop ALL) goes to the last, around the command
    inner = list(argv)
    for n, at in reversed(list(enumerate(places, 1))):  # the first chunk outermost: the binds keep their order
        last = innermost if n == len(places) else []
        inner = [
            "/bin/sh", "-c", f'exec "$@" {LAYER_FD}<"$0"', at, bwrap, "--dev-bind", "/", "/",
            "--args", str(LAYER_FD), "--unshare-user", *last, "--die-with-parent", "--chdir", cwd, "--", *inner,
        ]  # fmt: skip
    return outer, inner
