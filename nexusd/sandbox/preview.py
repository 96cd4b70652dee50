"""Preview before effect: a sandboxed command's workspace changes, held in an overlay until a person decides.

``Preview.start`` makes a private directory (``upper``, ``work``) outside the workspace and records a
fingerprint (type, inode, size, mtime, ctime) of every workspace path; ``argv`` puts the overlay helper
(``nexusd.sandbox.overlay``) in front of a sandbox argv, so the command reads the workspace and writes
only into ``upper``. After the command:

- ``changes`` reads ``upper`` as overlayfs left it: files and symlinks are added or changed (a copy-up
  whose bytes and mode equal the workspace's is no change), a whiteout (a 0/0 character device, or a
  file with ``user.overlay.whiteout``) deletes, an opaque directory (``user.overlay.opaque``) deletes
  what the workspace holds in it that the upper does not. Paths the sandbox protects (``.git``,
  ``.claude``, ``.envrc``, ...: ``nexusd.core.protected``) and special files are listed but never applied;
  a preview must not become a way around the sandbox's read-only binds.
- ``diff_text`` is the unified diff a person reviews (text files up to 1 MiB; others "binary").
- ``apply`` copies the changes into the workspace from an open descriptor of its root, one component at
  a time with ``O_NOFOLLOW`` (never through a symlink, out of the workspace or in it), file bytes streamed
  to a temporary name and renamed over the target, permission bits kept (set-id and sticky bits dropped).
  It refuses, naming them, paths whose fingerprint changed since the start (someone else changed them
  while the command ran or the person reviewed), unless ``force``.
- ``discard`` removes the private directory. So does ``apply``, after applying.
"""

from __future__ import annotations

import contextlib
import difflib
import itertools
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from nexusd.core.protected import PROTECTED_DIR_NAMES, PROTECTED_FILE_NAMES, PROTECTED_SUBPATHS
from nexusd.nofollow import DIR_FLAGS as _DIR_FLAGS
from nexusd.nofollow import UnsafePath, open_parent
from nexusd.sandbox.overlay import argv_prefix

_PROTECTED = PROTECTED_DIR_NAMES | PROTECTED_FILE_NAMES
_SUBPATHS = frozenset(PROTECTED_SUBPATHS)
TEXT_LIMIT = 1 << 20  # bytes of a file compared line by line; larger ones count as binary
DIFF_LIMIT = 4 << 20  # characters of diff text shown
CHUNK = 1 << 20
OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque")
WHITEOUT_XATTRS = ("user.overlay.whiteout", "trusted.overlay.whiteout")

Fingerprint = tuple[int, int, int, int, int]  # st_mode, st_ino, st_size, st_mtime_ns, st_ctime_ns
Kind = Literal["added", "changed", "deleted"]


class PreviewError(Exception):
    """The preview cannot be made or applied; the message says why."""


@dataclass(frozen=True)
class Change:
    """One workspace path the command changed in the overlay."""

    path: str  # workspace-relative, "/"-separated
    kind: Kind
    what: str  # file | symlink | dir | other
    added: int = 0  # lines
    removed: int = 0
    binary: bool = False
    refused: str = ""  # why it is never applied ("" : it is applied)


@dataclass
class ApplyResult:
    applied: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)  # changed in the workspace since the start: not applied
    refused: list[str] = field(default_factory=list)  # "path: why" (protected, special file)
    errors: list[str] = field(default_factory=list)  # "path: error"


def shown(text: str) -> str:
    """A path or link target as one printable line: a newline or escape in a file name could otherwise
    forge lines of the diff a person reviews, or drive their terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _fingerprint(st: os.stat_result) -> Fingerprint:
    return (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def protected(rel: str) -> bool:
    """A path the sandbox keeps read-only or hidden (any component, or a protected two-component pair)."""
    parts = rel.split("/")
    if any(p in _PROTECTED for p in parts):
        return True
    return any((a, b) in _SUBPATHS for a, b in itertools.pairwise(parts))


def fingerprints(root: str) -> dict[str, Fingerprint]:
    """Every path under ``root`` (not following symlinks, not entering ``.git`` directories)."""
    out: dict[str, Fingerprint] = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            it = os.scandir(os.path.join(root, rel) if rel else root)
        except OSError:
            continue
        with it:
            for e in it:
                path = _join(rel, e.name)
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                out[path] = _fingerprint(st)
                if stat.S_ISDIR(st.st_mode) and e.name != ".git":
                    stack.append(path)
    return out


def _xattr(path: str, names: tuple[str, ...]) -> bytes | None:
    for n in names:
        try:
            return os.getxattr(path, n, follow_symlinks=False)
        except OSError:
            continue
    return None


def _is_whiteout(path: str, st: os.stat_result) -> bool:
    if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
        return True
    return stat.S_ISREG(st.st_mode) and st.st_size == 0 and _xattr(path, WHITEOUT_XATTRS) is not None


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None


def _text(path: str, size: int) -> list[str] | None:
    """The file's lines, or None for binary or large files (never read whole when large)."""
    if size > TEXT_LIMIT:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(TEXT_LIMIT + 1)
    except OSError:
        return None
    if b"\0" in data:
        return None
    return data.decode("utf-8", "surrogateescape").splitlines(keepends=True)


def _same_file(a: str, b: str, sa: os.stat_result, sb: os.stat_result) -> bool:
    if sa.st_size != sb.st_size or stat.S_IMODE(sa.st_mode) != stat.S_IMODE(sb.st_mode):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(CHUNK), fb.read(CHUNK)
            if x != y:
                return False
            if not x:
                return True


def _what(st: os.stat_result) -> str:
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISLNK(st.st_mode):
        return "symlink"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    return "other"


def _lines(
    old: str | None, so: os.stat_result | None, new: str | None, sn: os.stat_result | None
) -> tuple[int, int, bool]:
    """(added, removed, binary) between two regular files (None: absent)."""
    a = _text(old, so.st_size) if old and so is not None and stat.S_ISREG(so.st_mode) else []
    b = _text(new, sn.st_size) if new and sn is not None and stat.S_ISREG(sn.st_mode) else []
    if a is None or b is None:
        return 0, 0, True
    added = removed = 0
    for line in difflib.unified_diff(a, b, n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed, False


@dataclass
class Preview:
    """One command's overlay: its private directory, the workspace, and the workspace as it was at start."""

    workspace: str
    base: str  # private directory holding upper/ and work/
    before: dict[str, Fingerprint]

    @property
    def upper(self) -> str:
        return os.path.join(self.base, "upper")

    @property
    def work(self) -> str:
        return os.path.join(self.base, "work")

    @classmethod
    def start(cls, workspace: str, parent: Path) -> Preview:
        """A private directory under ``parent`` (the daemon's state, outside the workspace)."""
        ws = os.path.realpath(workspace)
        if not os.path.isabs(workspace) or not os.path.isdir(ws):
            raise PreviewError(f"workspace {workspace!r} is not an existing absolute directory")
        parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        par = os.path.realpath(parent)
        if par == ws or par.startswith(ws.rstrip("/") + "/") or ws.startswith(par.rstrip("/") + "/"):
            raise PreviewError(f"the preview directory {par} and the workspace {ws} overlap; overlayfs refuses that")
        _clean_stale(par)
        base = os.path.join(par, f"p-{secrets.token_hex(8)}")
        os.mkdir(base, 0o700)
        os.mkdir(os.path.join(base, "upper"), 0o700)
        os.mkdir(os.path.join(base, "work"), 0o700)
        return cls(workspace=ws, base=base, before=fingerprints(ws))

    def argv(self, sandbox_argv: list[str]) -> list[str]:
        """The sandbox argv run on the overlay (its own words unchanged, after our prefix)."""
        return [*argv_prefix(self.workspace, self.upper, self.work), *sandbox_argv]

    # --- what changed -------------------------------------------------------------------------------

    def changes(self) -> list[Change]:
        out: list[Change] = []
        self._scan("", out)
        return sorted(out, key=lambda c: c.path)

    def _scan(self, rel: str, out: list[Change]) -> None:
        up_dir = os.path.join(self.upper, rel) if rel else self.upper
        try:
            names = sorted(os.listdir(up_dir))
        except OSError as e:
            raise PreviewError(f"cannot read the overlay's {rel or 'top'}: {e.strerror}") from None
        for name in names:
            path = _join(rel, name)
            up = os.path.join(self.upper, path)
            ws = os.path.join(self.workspace, path)
            su, sw = os.lstat(up), _lstat(ws)
            refused = "a protected path (the sandbox keeps it read-only)" if protected(path) else ""
            if _is_whiteout(up, su):
                if sw is not None:
                    out.extend(self._deleted(path, sw, refused))
                continue
            if stat.S_ISDIR(su.st_mode):
                if sw is None or not stat.S_ISDIR(sw.st_mode):
                    if sw is not None:
                        out.extend(self._deleted(path, sw, refused))
                    out.append(Change(path, "added", "dir", refused=refused))
                elif _xattr(up, OPAQUE_XATTRS) == b"y":
                    keep = set(os.listdir(up))
                    for child in sorted(os.listdir(ws)):
                        if child not in keep:
                            cp = _join(path, child)
                            cs = _lstat(os.path.join(self.workspace, cp))
                            if cs is not None:
                                out.extend(self._deleted(cp, cs, refused or self._refusal(cp)))
                self._scan(path, out)
                continue
            if not (stat.S_ISREG(su.st_mode) or stat.S_ISLNK(su.st_mode)):
                out.append(Change(path, "added" if sw is None else "changed", "other", refused="not a file or symlink"))
                continue
            if sw is not None and _what(sw) == _what(su):
                if stat.S_ISLNK(su.st_mode) and os.readlink(up) == os.readlink(ws):
                    continue
                if stat.S_ISREG(su.st_mode) and _same_file(up, ws, su, sw):
                    continue
            if sw is not None and stat.S_ISDIR(sw.st_mode):
                out.extend(self._deleted(path, sw, refused))
                sw = None
            added, removed, binary = _lines(ws if sw is not None else None, sw, up, su)
            kind: Kind = "added" if sw is None else "changed"
            out.append(Change(path, kind, _what(su), added, removed, binary, refused))

    @staticmethod
    def _refusal(path: str) -> str:
        return "a protected path (the sandbox keeps it read-only)" if protected(path) else ""

    def _deleted(self, path: str, st: os.stat_result, refused: str) -> list[Change]:
        """A deletion of ``path``; a directory's deletion is refused when it holds a protected path."""
        if not stat.S_ISDIR(st.st_mode):
            a, r, b = _lines(os.path.join(self.workspace, path), st, None, None)
            return [Change(path, "deleted", _what(st), a, r, b, refused)]
        inside = [p for p in fingerprints(os.path.join(self.workspace, path))]
        if not refused and any(protected(_join(path, p)) for p in inside):
            refused = "holds a protected path (the sandbox keeps it read-only)"
        return [Change(path, "deleted", "dir", refused=refused)]

    def diff_text(self, changes: list[Change] | None = None, conflicts: frozenset[str] = frozenset()) -> str:
        """A unified diff of the text changes, and one line for each other change; cut at DIFF_LIMIT.
        ``conflicts``: paths marked as changed in the workspace since the command started."""
        parts: list[str] = []
        size = 0
        for c in self.changes() if changes is None else changes:
            head = f"# {c.kind} {c.what} {shown(c.path)}" + (f"  (NOT APPLIED: {c.refused})" if c.refused else "")
            if c.path in conflicts:
                head += "  (CONFLICT: changed in the workspace since the command started; allow overwrites it)"
            head += "\n"
            body = ""
            if c.what == "file" and not c.binary:
                ws, up = os.path.join(self.workspace, c.path), os.path.join(self.upper, c.path)
                old = _text(ws, TEXT_LIMIT) if c.kind != "added" else []
                new = _text(up, TEXT_LIMIT) if c.kind != "deleted" else []
                body = "".join(
                    difflib.unified_diff(
                        old or [], new or [], f"a/{shown(c.path)}", f"b/{shown(c.path)}", lineterm="\n"
                    )
                )
                if body and not body.endswith("\n"):
                    body += "\n\\ No newline at end of file\n"
            elif c.what == "symlink" and c.kind != "deleted":
                body = f"-> {shown(os.readlink(os.path.join(self.upper, c.path)))}\n"
            parts.append(head + body)
            size += len(head) + len(body)
            if size > DIFF_LIMIT:
                parts.append(f"# ... cut at {DIFF_LIMIT} characters\n")
                break
        return "".join(parts)

    # --- apply or discard ---------------------------------------------------------------------------

    def conflicts(self, changes: list[Change]) -> list[str]:
        """Paths changed in the workspace since the start that these changes would overwrite or delete."""
        out: list[str] = []
        for c in changes:
            if c.refused:
                continue
            now = _lstat(os.path.join(self.workspace, c.path))
            was = self.before.get(c.path)
            if (None if now is None else _fingerprint(now)) != was:
                if c.path not in out:
                    out.append(c.path)
                continue
            if c.kind == "deleted" and c.what == "dir" and now is not None:
                inside = fingerprints(os.path.join(self.workspace, c.path))
                prefix = c.path + "/"
                then = {k[len(prefix) :]: v for k, v in self.before.items() if k.startswith(prefix)}
                if inside != then and c.path not in out:
                    out.append(c.path)
        return out

    def apply(
        self, *, force: bool = False, changes: list[Change] | None = None, overwrite: frozenset[str] = frozenset()
    ) -> ApplyResult:
        """Carry the changes into the workspace. Without ``force`` nothing is written when any path
        conflicts (all listed) other than those in ``overwrite`` (the conflicts a person was shown and
        allowed); with it, every conflicting path is overwritten."""
        todo = self.changes() if changes is None else changes
        result = ApplyResult(refused=[f"{shown(c.path)}: {c.refused}" for c in todo if c.refused])
        todo = [c for c in todo if not c.refused]
        result.conflicts = [c for c in self.conflicts(todo) if c not in overwrite]
        if result.conflicts and not force:
            return result
        root_fd = os.open(self.workspace, _DIR_FLAGS)
        try:
            # deletions first (deepest first), then directories (parents first), then files
            dels = sorted((c for c in todo if c.kind == "deleted"), key=lambda c: (-c.path.count("/"), c.path))
            dirs = sorted((c for c in todo if c.kind != "deleted" and c.what == "dir"), key=lambda c: c.path)
            files = sorted((c for c in todo if c.kind != "deleted" and c.what != "dir"), key=lambda c: c.path)
            for c in [*dels, *dirs, *files]:
                try:
                    self._apply_one(root_fd, c)
                    result.applied.append(c.path)
                except (OSError, PreviewError) as e:
                    msg = str(e) if isinstance(e, PreviewError) else f"{shown(c.path)}: {e.strerror or e}"
                    result.errors.append(msg)
            # new directories' own modes last, deepest first: one made read-only must still take its files
            for c in sorted(dirs, key=lambda c: (-c.path.count("/"), c.path)):
                if c.path in result.applied:
                    try:
                        self._dir_mode(root_fd, c)
                    except (OSError, PreviewError) as e:
                        result.errors.append(
                            str(e) if isinstance(e, PreviewError) else f"{shown(c.path)}: {e.strerror or e}"
                        )
        finally:
            os.close(root_fd)
        return result

    def _apply_one(self, root_fd: int, c: Change) -> None:
        dfd, name = _walk(root_fd, c.path, create=c.kind != "deleted", upper=self.upper)
        try:
            old = _at(dfd, name)
            if c.kind == "deleted":
                _remove(dfd, name, old)
                return
            su = os.lstat(os.path.join(self.upper, c.path))
            if c.what == "dir":  # writable by us until ``_dir_mode`` gives it its own mode
                if old is None or not stat.S_ISDIR(old.st_mode):
                    _remove(dfd, name, old)
                    os.mkdir(name, 0o700, dir_fd=dfd)
                os.chmod(name, _perm(su) | 0o700, dir_fd=dfd, follow_symlinks=False)
                return
            tmp = f".{name[:200]}.nexus-preview-{secrets.token_hex(4)}"
            if c.what == "symlink":
                os.symlink(os.readlink(os.path.join(self.upper, c.path)), tmp, dir_fd=dfd)
            else:
                _copy_in(os.path.join(self.upper, c.path), dfd, tmp, _perm(su))
            if old is not None and stat.S_ISDIR(old.st_mode):
                _remove(dfd, name, old)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        finally:
            os.close(dfd)

    def _dir_mode(self, root_fd: int, c: Change) -> None:
        dfd, name = _walk(root_fd, c.path, create=False, upper=self.upper)
        try:
            st = _at(dfd, name)
            if st is not None and stat.S_ISDIR(st.st_mode):
                os.chmod(name, _perm(os.lstat(os.path.join(self.upper, c.path))), dir_fd=dfd, follow_symlinks=False)
        finally:
            os.close(dfd)

    def discard(self) -> None:
        """Remove the overlay's private directory (overlayfs leaves its work dir unreadable: opened first)."""
        for dirpath, dirnames, _ in os.walk(self.base):
            for d in dirnames:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(dirpath, d), 0o700, follow_symlinks=False)
        shutil.rmtree(self.base, ignore_errors=True)


STALE_AFTER_S = 24 * 3600  # a preview directory left by a killed run (no finally ran) is removed after this


def _clean_stale(parent: str) -> None:
    cutoff = time.time() - STALE_AFTER_S
    try:
        entries = [e for e in os.scandir(parent) if e.name.startswith("p-")]
    except OSError:
        return
    for e in entries:
        try:
            if e.stat(follow_symlinks=False).st_mtime < cutoff:
                Preview(workspace="", base=e.path, before={}).discard()
        except OSError:
            pass


def _perm(st: os.stat_result) -> int:
    """Permission bits kept; set-uid, set-gid and sticky dropped."""
    return stat.S_IMODE(st.st_mode) & 0o777


def _at(dfd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _remove(dfd: int, name: str, st: os.stat_result | None) -> None:
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dfd)  # descriptor-based: never follows a symlink inside
    else:
        os.unlink(name, dir_fd=dfd)


def _copy_in(src: str, dfd: int, tmp: str, mode: int) -> None:
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            while chunk := os.read(sfd, CHUNK):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
        except BaseException:
            os.close(fd)
            os.unlink(tmp, dir_fd=dfd)
            raise
        os.close(fd)
    finally:
        os.close(sfd)


def _walk(root_fd: int, rel: str, *, create: bool, upper: str) -> tuple[int, str]:
    """``nofollow.open_parent``; missing directories get the overlay's modes, refusals are this module's."""
    parts = rel.split("/")

    def mode(i: int) -> int:
        try:
            return _perm(os.lstat(os.path.join(upper, *parts[: i + 1])))
        except OSError:
            return 0o755

    try:
        return open_parent(root_fd, rel, create=create, dir_mode=mode)
    except UnsafePath as e:
        raise PreviewError(e.describe(shown)) from None


def summary(changes: list[Change]) -> str:
    """``+2 ~1 -1 files, +10/-3 lines`` (refused changes not counted)."""
    live = [c for c in changes if not c.refused]
    a = sum(c.kind == "added" for c in live)
    m = sum(c.kind == "changed" for c in live)
    d = sum(c.kind == "deleted" for c in live)
    la, lr = sum(c.added for c in live), sum(c.removed for c in live)
    refused = f", {len(changes) - len(live)} refused" if len(changes) != len(live) else ""
    return f"+{a} ~{m} -{d} paths, +{la}/-{lr} lines{refused}"


def iter_lines(result: ApplyResult) -> Iterator[str]:
    """What the person and the agent read about an apply."""
    for p in result.conflicts:
        yield f"conflict: {shown(p)} changed in the workspace while the command ran or was reviewed"
    for r in result.refused:
        yield f"not applied: {r}"
    for e in result.errors:
        yield f"error: {e}"
