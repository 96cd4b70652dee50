"""A shadow git repository per workspace: git's object store and index, the workspace as its work tree.

Why git: its object store is content-addressed (a file unchanged across 1,000 checkpoints is stored once,
and packs delta-compress the rest), its index keeps a stat cache so a snapshot of a 10,000-file tree
re-reads only the files whose size or mtime changed, it honours ``.gitignore`` the way the workspace's
own tools do, it streams large files instead of reading them into memory, and it is installed
wherever agents run. Reflinks need a file system that has them; hard-linked snapshots need our own stat
cache and garbage collector; git has both, well kept.

The repository lives in the daemon's state directory (``STATE/undo/<hash of the workspace>``), which is
a protected path for the gate and hidden from the sandbox, so an agent can neither reach nor rewrite its
own history. Nothing of the workspace's own git is read or written (its ``.git`` is never part of a
snapshot), and git is isolated from the person's configuration (no global or system config, no filters,
no line-ending conversion): a snapshot is the bytes on disk, and running it runs no program of theirs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from nexusd.undo.watch import Watcher

log = structlog.get_logger("nexusd.undo")

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_ATTRIBUTES = "* -text !eol -filter -ident !working-tree-encoding\n"
_CONFIG = (
    ("core.bare", "false"),
    ("core.autocrlf", "false"),
    ("core.safecrlf", "false"),
    ("core.symlinks", "true"),
    ("core.filemode", "true"),
    ("core.untrackedCache", "true"),  # with index v4 and a split index: ~15 % less CPU per snapshot (10,000 files)
    ("core.splitIndex", "true"),
    ("index.version", "4"),
    ("core.fsmonitor", "false"),
    ("core.fsyncMethod", "batch"),  # objects of one snapshot reach the disk with one flush, not one each
    ("core.quotePath", "false"),
    ("core.hooksPath", "/dev/null"),
    ("gc.auto", "0"),
    ("advice.addEmbeddedRepo", "false"),
    ("advice.addIgnoredFile", "false"),
    ("diff.renames", "false"),
)


MAX_PATHSPECS = 5_000  # changed paths given to git by name; more: a full scan (one argument list, bounded)
REARM_AFTER = 50  # checkpoints in full before arming again, after arming failed (too many directories ...)

RUNNING: set[subprocess.Popen[bytes]] = set()  # git processes now running, killed when the daemon stops


def kill_running() -> None:
    """At the daemon's stop: a snapshot abandoned by its call must not hold the exit up."""
    for proc in list(RUNNING):
        with contextlib.suppress(OSError):
            proc.kill()


class GitError(Exception):
    """A git command failed or timed out; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Entry:
    mode: str  # 100644 | 100755 | 120000 | 160000
    sha: str


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str
    status: str  # A added | M changed | D deleted | T type changed (file <-> symlink)
    plus: int | None  # None: binary
    minus: int | None


def display(name: bytes | str) -> str:
    """A file name as text for people and the wire: bytes that are not UTF-8 shown as ``\\xNN``."""
    raw = name if isinstance(name, bytes) else name.encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "backslashreplace")


def workspace_key(workspace: str) -> str:
    return hashlib.sha256(workspace.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def git_env(git_dir: Path, work_tree: str | None) -> dict[str, str]:
    """A clean environment: none of the daemon's GIT_* variables, no person's config, no prompts."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_DIR": str(git_dir),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "HOME": str(git_dir),
        "XDG_CONFIG_HOME": str(git_dir),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "LC_ALL": "C",
    }
    if work_tree is not None:
        env["GIT_WORK_TREE"] = work_tree
    return env


class Shadow:
    """One workspace's shadow repository. Its ``lock`` serializes what uses the index (snapshots, restores);
    callers hold it. Every method blocks: the daemon calls them from a worker thread."""

    def __init__(
        self,
        root: Path,
        workspace: str,
        exclude: Iterable[str] = (),
        hidden: Iterable[str] = (),
        *,
        watch: bool = False,
        max_dirs: int = 10_000,
        rescan: float = 300.0,
    ) -> None:
        self.workspace = workspace
        self.git_dir = root / workspace_key(workspace)
        self.lock = threading.Lock()
        self._exclude = list(exclude)
        self._hidden = [h for h in hidden if h]
        self._ready = False
        self.slow = False  # a snapshot is running that outlived its call's deadline
        self.watcher = Watcher(workspace, self.git_dir / "watch", max_dirs) if watch else None
        self.last = ""  # how the last snapshot was taken: "watched", or "full: why"
        self.fallbacks = 0  # snapshots the watcher could not vouch for (scanned in full)
        self._snapshots = 0
        self._arm_at = 0
        self.rescan = rescan  # seconds: a full scan at least this often, for what inotify cannot see (0: never)
        self._full_at = time.monotonic()
        # the last tree written and the index it was written from (its stat): while the watcher reports no
        # change and the index file is the same, that tree is the snapshot, with no git process
        self._written: tuple[tuple[int, int, int, int], str] | None = None
        self._kept: tuple[Path, str] | None = None  # the last ref ``keep`` wrote, and its tree
        self.reused = 0  # snapshots answered that way

    # ------------------------------------------------------------------ plumbing

    def git(
        self,
        *args: str,
        timeout: float = 60.0,
        work_tree: bool = False,
        input_: bytes | None = None,
        literal: bool = False,
        ok: tuple[int, ...] = (0,),
    ) -> bytes:
        env = git_env(self.git_dir, self.workspace if work_tree else None)
        if literal:
            env["GIT_LITERAL_PATHSPECS"] = "1"  # a file named '*' or ':(exclude)x' is that file, not a pattern
        try:
            proc = subprocess.Popen(
                ["git", *args],
                env=env,
                cwd=self.workspace if work_tree else str(self.git_dir),
                stdin=subprocess.PIPE if input_ is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as e:
            raise GitError(f"git {args[0]} could not run: {e}") from None
        RUNNING.add(proc)
        try:
            out, err_bytes = proc.communicate(input_, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise GitError(f"git {args[0]} took longer than {timeout:g} s") from None
        finally:
            RUNNING.discard(proc)
        if proc.returncode not in ok:
            err = err_bytes.decode(errors="replace").strip().splitlines()
            raise GitError(f"git {args[0]} failed ({proc.returncode}): {err[-1] if err else 'no message'}")
        return out

    def ensure(self) -> None:
        """Create the repository on first use; (re)write its settings and excludes once per daemon run."""
        if self._ready:
            return
        self.git_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not (self.git_dir / "HEAD").exists():
            subprocess.run(
                ["git", "init", "-q"], env=git_env(self.git_dir, None), cwd=str(self.git_dir), check=True, timeout=60
            )
        for key, value in _CONFIG:
            self.git("config", key, value)
        info = self.git_dir / "info"
        info.mkdir(exist_ok=True)
        lines = ["# written by nexusd: settings' excludes, and the daemon's own directories", *self._exclude]
        ws = self.workspace.rstrip("/") + "/"
        for h in self._hidden:
            if h.startswith(ws):
                lines.append("/" + h[len(ws) :].strip("/") + "/")
        (info / "exclude").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (info / "attributes").write_text(_ATTRIBUTES, encoding="utf-8")
        (self.git_dir / "refs" / "nexus").mkdir(parents=True, exist_ok=True)
        (self.git_dir / "workspace").write_text(self.workspace + "\n", encoding="utf-8")
        self._ready = True

    # ------------------------------------------------------------------ snapshots

    def snapshot(self, timeout: float = 60.0, full: bool = False) -> str:
        """The workspace as a tree id: every file not ignored, with its bytes, its executable bit and its
        symlinks as links. Incremental: with a watcher, git reads only the paths changed since the last
        snapshot; without one (or when the watcher cannot vouch for them, or ``full``), git's index re-reads
        only the files whose stat changed, after an lstat of every file."""
        if not os.path.isdir(self.workspace):
            raise GitError(f"the workspace {self.workspace} is not a directory")
        self.ensure()
        self._snapshots += 1
        paths, why = self._watched(timeout)
        if full:
            paths, why = None, "asked for"
        if paths is not None:
            if not paths and self._written is not None and self._written[0] == self._index_stat():
                self.last = "watched"
                self.reused += 1
                return self._written[1]  # (what write-tree would answer: the same index gives the same tree)
            try:
                self._add(paths, timeout)
                self.last = "watched"
                return self._write_tree(timeout)
            except GitError as e:  # e.g. a path gone between the listing and the add: the full scan decides
                why = str(e)
                self.fallbacks += 1
        self.last = f"full: {why}"
        self.git("add", "-A", "--ignore-errors", "--", ".", timeout=timeout, work_tree=True)
        self._full_at = time.monotonic()
        return self._write_tree(timeout)

    def _index_stat(self) -> tuple[int, int, int, int] | None:
        """The index file's identity: git rewrites it through a lock file and a rename, so any change to the
        index (an add, a restore, another git command) gives a new inode or time."""
        try:
            st = os.stat(self.git_dir / "index")
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)

    def _write_tree(self, timeout: float) -> str:
        self._written = None
        tree = self.git("write-tree", timeout=timeout).decode().strip()
        after = self._index_stat()  # (write-tree may store its cache of trees in the index: same content)
        if after is not None:
            self._written = (after, tree)
        return tree

    def _watched(self, timeout: float) -> tuple[list[str] | None, str]:
        """The paths changed since the last snapshot, or None and why to scan in full. A watcher not armed is
        armed here, before that full scan: what changes from then on, it sees."""
        w = self.watcher
        if w is None:
            return None, "not watched"
        why = "arming the watcher"
        if w.armed:
            try:
                paths = w.changed()
                if self.rescan > 0 and time.monotonic() - self._full_at > self.rescan:
                    return None, f"the periodic full scan (every {self.rescan:g} s)"
                return paths, ""
            except Exception as e:  # Fallback, OSError, or a bug: never trusted, the full scan decides
                self.fallbacks += 1
                why = f"{e}; re-armed"
                log.info("undo watcher falls back to a full scan", workspace=self.workspace, why=str(e))
                w.close()
        elif self._snapshots < self._arm_at:
            return None, "not watched (arming failed lately)"
        try:
            w.arm(lambda: self._excluded(timeout))
        except Exception as e:
            w.close()
            self._arm_at = self._snapshots + REARM_AFTER
            why = f"not watched: {e}"
            log.info("undo watcher not armed", workspace=self.workspace, why=str(e))
        return None, why

    def _excluded(self, timeout: float) -> set[str]:
        """Directories git does not enter: excluded themselves (by .gitignore or the settings), nothing in
        them tracked. (``ls-files --directory`` names wholly ignored directories; ``check-ignore`` keeps those
        excluded themselves, not merely all of whose files are: a ``.gitignore`` inside may re-include.)"""
        out = self.git(
            "ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory", timeout=timeout, work_tree=True
        )
        dirs = [x[:-1] for x in out.split(b"\0") if x.endswith(b"/")]
        if not dirs:
            return set()
        res = self.git(
            "check-ignore", "-z", "--stdin", timeout=timeout, work_tree=True, input_=b"\0".join(dirs) + b"\0", ok=(0, 1)
        )
        return {os.fsdecode(x) for x in res.split(b"\0") if x}

    def _add(self, paths: list[str], timeout: float) -> None:
        """``git add -A`` of the changed paths only. Each is first listed by git (tracked, or untracked and not
        ignored): a path that is neither (ignored, or created and deleted since) is not given, as git refuses
        those by name where the full scan passes them by."""
        if not paths:
            return
        if len(paths) > MAX_PATHSPECS:
            raise GitError(f"{len(paths)} changed paths")
        if all(self._is_file(q) for q in paths):
            # every path is a file that exists (edits, creations): git takes them by name unless one is
            # ignored or vanished meanwhile, and then fails; the listing below then decides (one process less)
            with contextlib.suppress(GitError):
                return self._add_named(paths, timeout)
        out = self.git(
            "ls-files",
            "-z",
            "-c",
            "-o",
            "--exclude-standard",
            "--",
            *paths,
            timeout=timeout,
            work_tree=True,
            literal=True,
        )
        listed: set[str] = set()
        for raw in out.split(b"\0"):
            if not raw:
                continue
            name = os.fsdecode(raw.rstrip(b"/"))
            while name and name not in listed:
                listed.add(name)
                name = name.rpartition("/")[0]
        keep = [q for q in paths if q in listed]
        if keep:
            self._add_named(keep, timeout)

    def _add_named(self, paths: list[str], timeout: float) -> None:
        self.git(
            "add",
            "-A",
            "--ignore-errors",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            timeout=timeout,
            work_tree=True,
            literal=True,
            input_=b"\0".join(os.fsencode(q) for q in paths),
        )

    def _is_file(self, rel: str) -> bool:
        try:
            return not stat.S_ISDIR(os.lstat(os.path.join(self.workspace, rel)).st_mode)
        except OSError:
            return False

    def close_watcher(self) -> None:
        if self.watcher is not None:
            self.watcher.close()

    def keep(self, name: str, tree: str) -> None:
        """Keep ``tree`` alive under ``refs/nexus/NAME`` (a loose ref, written directly: no process).

        The tree the last ``keep`` named (an unchanged workspace's) gets a hard link to that ref's file: a new
        name, no new inode. Making an inode costs up to ~0.8 ms of kernel time on some ext4 directories, a
        link ~15 µs, and a checkpoint is on every shell call's path. Only this process writes these files."""
        path = self.git_dir / "refs" / "nexus" / name
        last = self._kept
        if last is not None and last[1] == tree:
            try:
                os.link(last[0], path)
                return
            except OSError:  # that ref was forgotten (or the name is taken): written as below
                pass
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(tree + "\n", encoding="ascii")
        os.replace(tmp, path)
        self._kept = (path, tree)

    def forget(self, name: str) -> None:
        self._written = None  # its tree may now be unreferenced, and a prune may take it: write it anew
        with contextlib.suppress(FileNotFoundError):
            (self.git_dir / "refs" / "nexus" / name).unlink()

    def repack(self) -> None:
        """Pack loose objects (cheap, incremental); unreachable ones an hour old are pruned."""
        self._written = None
        self.git("repack", "-d", "-q", timeout=600)
        self.git("prune", "--expire=1.hour.ago", timeout=600)

    # ------------------------------------------------------------------ reading

    def entries(self, tree: str) -> dict[str, Entry]:
        out: dict[str, Entry] = {}
        for rec in self.git("ls-tree", "-r", "-z", "--full-tree", tree).split(b"\0"):
            if not rec:
                continue
            meta, _, name = rec.partition(b"\t")
            mode, _kind, sha = meta.decode().split(" ")
            out[os.fsdecode(name)] = Entry(mode, sha)
        return out

    def changes(self, a: str, b: str) -> list[FileChange]:
        """What differs from tree ``a`` to tree ``b``: each path's status and its +/- lines."""
        raw = self.git("diff-tree", "-r", "-z", "--no-renames", "--raw", "--numstat", a, b)
        parts = raw.split(b"\0")
        status: dict[str, str] = {}
        counts: dict[str, tuple[int | None, int | None]] = {}
        i = 0
        while i < len(parts):
            rec = parts[i]
            if rec.startswith(b":"):
                fields = rec.decode().split(" ")
                status[display(parts[i + 1])] = fields[4][0]
                i += 2
            elif rec:
                plus, minus, name = rec.split(b"\t", 2)
                counts[display(name)] = (
                    int(plus) if plus != b"-" else None,
                    int(minus) if minus != b"-" else None,
                )
                i += 1
            else:
                i += 1
        return [FileChange(path, st, *counts.get(path, (None, None))) for path, st in sorted(status.items())]

    def diff(self, a: str, b: str, paths: Iterable[str] = (), limit: int = 1 << 20) -> tuple[str, bool]:
        """A unified diff for people (binary files named, not dumped); cut at ``limit`` bytes."""
        args = ["diff-tree", "-p", "-r", "--no-renames", "--no-color", "--no-ext-diff", "--no-textconv", a, b]
        args += ["--", *paths] if paths else []
        out = self.git(*args)
        cut = len(out) > limit
        return out[:limit].decode("utf-8", "replace"), cut

    def blob_chunks(self, sha: str, chunk: int = 1 << 20) -> Iterator[bytes]:
        """A blob's bytes in chunks, straight from git's stdout: a large file never sits in memory."""
        proc = subprocess.Popen(
            ["git", "cat-file", "blob", sha],
            env=git_env(self.git_dir, None),
            cwd=str(self.git_dir),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdout is not None
        try:
            while True:
                data = proc.stdout.read(chunk)
                if not data:
                    break
                yield data
        finally:
            proc.stdout.close()
            rc = proc.wait(timeout=60)
        if rc != 0:
            raise GitError(f"git cat-file {sha} failed ({rc})")

    def blob(self, sha: str) -> bytes:
        return self.git("cat-file", "blob", sha)
