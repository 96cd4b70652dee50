"""The workspace walk in processes of their own, so a big tree's walk never holds the daemon's interpreter lock.

A walk of a tree of 1,500 repositories is ~100-400 ms of Python: in a thread of the daemon it holds the one
interpreter lock, and every other agent's call, whose facts hop between the loop and a worker dozens of
times, waits at each hop. In a child process the walk costs the daemon nothing but a pipe read: the lock is
free, and on a machine with two cores the walk runs beside the other agents' decisions instead of between
them.

Each child keeps ``nested``'s cache, proven fresh by a fenced inotify watch (``treewatch``: O(1), and a
change walks only the directories that changed) or else by stamps, so a tree goes back to the child that
walked it when that child is free. A child is asked one root at a time; a busy one is never waited for while
another can be had (``Walkers``); the daemon side (``nested.find_protected``) coalesces concurrent askers
of one root. A child that does not answer within ``timeout`` (a file system
that stalls: a FUSE mount whose server never answers) is killed, which a thread could not be, and the asker
gets an error (its call is denied); the next ask starts a new child. A child that cannot be started leaves
the walk to the asking thread (the same answer, computed in the daemon).

The wire: one question per line on the child's stdin, a JSON string (the root) or ``[root, answer]``,
and one JSON object per line on its stdout: ``{"paths": [...], "complete": bool, "secrets": [...],
"links": [...], "listed": [...], "answer": n, "proof": "..."}``, ``{"same": true, "answer": n, ...}``,
or ``{"error": "..."}``. ``listed``: the directories walked, for the agent wrapper's epilogue (7,500
paths in a tree of 1,500 repositories); ``answer``: the child's number for its answer, which the asker
sends back with its next question of that root, so an unchanged answer comes back as ``same`` instead
of whole (numbers are the child's own: a new child starts over, and its asker forgets them).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import replace

import msgspec

from nexusd.sandbox import nested

# How a child is started; tests replace it (a launcher that makes the child's walks stall).
CHILD_ARGV: list[str] = [sys.executable, "-I", "-m", "nexusd.sandbox.walkers"]


class _Reply(msgspec.Struct, omit_defaults=True):
    paths: list[str] = []
    complete: bool = False
    secrets: list[str] = []
    links: list[str] = []
    listed: list[str] = []  # the directories walked (complete walks of at most nested.MAX_LISTED)
    proof: str = ""  # how the child answered: walk, watch or stamps (``nested.last_proof``)
    answer: int = 0  # the child's number for this answer (0: none)
    same: bool = False  # the answer the asker named in its question, unchanged: nothing else sent
    error: str | None = None


_encode = msgspec.json.Encoder().encode
_decode_reply = msgspec.json.Decoder(_Reply).decode
_decode_question = msgspec.json.Decoder(str | tuple[str, int]).decode
KNOWN_MAX = 64  # answers an asker keeps per child (one per root)
KNOWN_LISTED_MAX = 60_000  # and the directories they list, all together (a big tree's answer is ~1 MB)


class WalkFailed(OSError):
    """The child did not answer in time, died, or said the walk failed: the asking call is denied."""


class _Count:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._n = 0

    def add(self, k: int) -> None:
        with self._lock:
            self._n += k

    def value(self) -> int:
        return self._n


MAX_DYING = 16
_dying = _Count()  # killed children not yet reaped


FENCE_ENV = "NEXUSD_WALKER_FENCE"  # the directory a child makes its fence directory in (``Walkers``'s)


class _Child:
    def __init__(self, index: int, fence_root: str | None = None) -> None:
        self.index = index
        self.fence_root = fence_root
        self.lock = threading.Lock()  # one root at a time per child
        self.proc: subprocess.Popen[bytes] | None = None
        self.buf = b""
        self.known: dict[str, tuple[int, nested.Found]] = {}  # root -> (the child's number, its answer)

    def _start(self) -> subprocess.Popen[bytes]:
        if _dying.value() >= MAX_DYING:
            raise WalkFailed(f"{MAX_DYING} killed walkers have not died yet (a file system that never answers?)")
        env = dict(os.environ)
        env.pop(FENCE_ENV, None)
        if self.fence_root is not None:
            env[FENCE_ENV] = self.fence_root
        proc = subprocess.Popen(
            CHILD_ARGV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,  # a terminal's ^C reaches the daemon, which stops its children itself
            env=env,
        )
        self.buf = b""
        self.known.clear()  # a new child numbers its answers anew
        return proc

    def start_if_needed(self) -> subprocess.Popen[bytes]:
        with self.lock:
            return self._running()

    def _running(self) -> subprocess.Popen[bytes]:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            proc = self.proc = self._start()
        return proc

    def ask(self, root: str, timeout: float) -> nested.Found:
        with self.lock:
            proc = self._running()
            assert proc.stdin is not None and proc.stdout is not None
            known = self.known.get(root)
            question = _encode([root, known[0]]) if known is not None else _encode(root)
            try:
                proc.stdin.write(question + b"\n")
                proc.stdin.flush()
                line = self._read_line(proc, time.monotonic() + timeout)
            except (OSError, ValueError) as e:
                self._kill()
                raise WalkFailed(f"the walker of {root} failed: {e}") from e
            if line is None:
                self._kill()
                raise WalkFailed(f"the walk of {root} did not return in time ({timeout:g} s: a stalled file system?)")
            try:
                reply = _decode_reply(line)
            except msgspec.DecodeError as e:  # out of step with us: a new child for the next ask
                self._kill()
                raise WalkFailed(f"the walker of {root} answered garbage: {e}") from e
            if reply.error is not None:
                self.known.pop(root, None)
                raise WalkFailed(f"the walk of {root} failed: {reply.error}")
            if reply.same:
                if known is None or reply.answer != known[0]:  # never ours to reuse: out of step
                    self._kill()
                    raise WalkFailed(f"the walker of {root} answered 'same' for an answer not held here")
                return replace(known[1], proof=reply.proof)
            found = nested.Found(
                tuple(reply.paths),
                reply.complete,
                (),
                tuple(reply.secrets),
                frozenset(reply.links),
                listed=tuple(reply.listed),
                proof=reply.proof,
            )
            self.known.pop(root, None)
            if reply.answer:
                self.known[root] = (reply.answer, found)
                while len(self.known) > 1 and (
                    len(self.known) > KNOWN_MAX
                    or sum(len(f.listed) + len(f.paths) for _, f in self.known.values()) > KNOWN_LISTED_MAX
                ):
                    self.known.pop(next(iter(self.known)))
            return found

    def _read_line(self, proc: subprocess.Popen[bytes], deadline: float) -> bytes | None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            poller = select.poll()  # (not select.select: a daemon with many clients has descriptors past 1023)
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
            if not poller.poll(left * 1000):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise OSError(f"the walker exited ({proc.poll()})")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.kill()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        # reaped by a thread of its own: a child stuck in a file system may take its time to die (and while
        # MAX_DYING of them have not, no new one starts: their walks are denied, memory stays bounded)
        _dying.add(1)

        def reap() -> None:
            proc.wait()
            _dying.add(-1)

        threading.Thread(target=reap, name="nexusd-walker-reap", daemon=True).start()

    def close(self) -> None:
        held = self.lock.acquire(timeout=0.5)  # a thread stuck on the child holds it: kill the child anyway
        try:
            self._kill()
        finally:
            if held:
                self.lock.release()


FENCE_PREFIX = "nexusd-walkers-"


def _remove_stale_fence_roots() -> None:
    """The fence directories of daemons that are gone (killed: ``close`` never ran), ours by owner and by a
    pid that no longer runs. A pid taken again by another process keeps its directory: a leak, never a
    removal under a live daemon."""
    base = tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(base) if n.startswith(FENCE_PREFIX)]
    except OSError:
        return
    for name in names:
        pid_text = name[len(FENCE_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        path = os.path.join(base, name)
        try:
            if os.lstat(path).st_uid != os.getuid():
                continue
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


class Walkers:
    """Walker children: a root goes back to the child that walked it last (its cache is there) when that one
    is free, else to any free child, else to a new one (up to ``max_children``); only past that does an
    asker wait. So one agent's slow walk never queues another agent's behind it."""

    def __init__(self, count: int = 2, timeout: float = 30.0, max_children: int = 8) -> None:
        if not 1 <= count <= max_children:
            raise ValueError("need 1 <= count <= max_children walkers")
        self.timeout = timeout
        self.max_children = max_children
        self._cond = threading.Condition()
        # the children's fence directories live in one of ours, removed at ``close``: a child is killed,
        # never asked to end, so it cannot remove its own
        _remove_stale_fence_roots()
        self._fence_root = tempfile.mkdtemp(prefix=f"{FENCE_PREFIX}{os.getpid()}-")
        self._all = [_Child(i, self._fence_root) for i in range(count)]
        self._idle = list(self._all)
        self._home: dict[str, _Child] = {}  # root -> the child that last walked it (bounded)
        self._fallback_noted = False

    def warm(self) -> None:
        """Start the first ``count`` children now (~0.2 s of CPU each), so no call waits for one to start."""
        with self._cond:
            idle = list(self._idle)
        for child in idle:
            child.start_if_needed()

    def _take(self, root: str) -> _Child:
        with self._cond:
            while True:
                home = self._home.get(root)
                if home is not None and home in self._idle:
                    self._idle.remove(home)
                    return home
                if self._idle:
                    return self._idle.pop()
                if len(self._all) < self.max_children:
                    child = _Child(len(self._all), self._fence_root)
                    self._all.append(child)
                    return child
                self._cond.wait()

    def _give(self, child: _Child, root: str) -> None:
        with self._cond:
            self._home.pop(root, None)
            self._home[root] = child
            while len(self._home) > 1024:
                self._home.pop(next(iter(self._home)))
            self._idle.append(child)
            self._cond.notify()

    def find(self, root: str) -> nested.Found:
        child = self._take(root)
        try:
            return child.ask(root, self.timeout)
        except WalkFailed:
            raise
        except OSError as e:  # the child could not even be started: the same walk, here
            if not self._fallback_noted:
                import structlog  # (not in the child, which starts without it)

                self._fallback_noted = True
                structlog.get_logger("nexusd").error("walker process unavailable; walking in the daemon", error=str(e))
            return nested.walk_here(root)
        finally:
            self._give(child, root)

    def close(self) -> None:
        with self._cond:
            children = list(self._all)
        for child in children:
            child.close()
        # (a killed child stuck in a file system may still hold its fence directory: removed all the same)
        shutil.rmtree(self._fence_root, ignore_errors=True)


def serve(stdin: int = 0, stdout: int = 1) -> None:
    """The child: answer roots until stdin closes. Its cached answers are proven by fenced inotify watches
    (``nexusd.sandbox.treewatch``; the fence directory is the child's own, made in its ``Walkers``'s, which
    removes them all at ``close``: children are killed, never asked to end)."""
    from nexusd.sandbox.treewatch import TreeWatches

    parent = os.environ.get(FENCE_ENV)
    fence_dir = tempfile.mkdtemp(prefix="fence-", dir=parent if parent and os.path.isdir(parent) else None)
    nested.watch_trees(TreeWatches(fence_dir))
    out = os.fdopen(stdout, "wb", buffering=0)
    numbers = _Numbers()
    try:
        with os.fdopen(stdin, "rb") as lines:
            for raw in lines:
                out.write(_encode(_answer(raw, numbers)) + b"\n")
                nested.idle()
    finally:
        nested.watch_trees(None)
        shutil.rmtree(fence_dir, ignore_errors=True)


class _Numbers:
    """The child's numbers for the answers it sent, per root (the latest only): an answer is the same
    object as long as its cache holds it, so its number says "unchanged"."""

    def __init__(self) -> None:
        self.next = 1
        # weakly: an answer the cache dropped is not kept alive here (a big tree's is megabytes)
        self.sent: dict[str, tuple[weakref.ref[nested.Found], int]] = {}

    def number(self, root: str, found: nested.Found) -> int:
        sent = self.sent.get(root)
        if sent is not None and sent[0]() is found:
            return sent[1]
        n, self.next = self.next, self.next + 1
        self.sent.pop(root, None)
        self.sent[root] = (weakref.ref(found), n)
        while len(self.sent) > 2 * KNOWN_MAX:
            self.sent.pop(next(iter(self.sent)))
        return n


def _answer(raw: bytes, numbers: _Numbers) -> _Reply:
    try:
        question = _decode_question(raw)
        root, held = (question, 0) if isinstance(question, str) else question
        found = nested.find_protected(root)
        n = numbers.number(root, found)
        if held and held == n:
            return _Reply(same=True, answer=n, complete=found.complete, proof=nested.last_proof())
        return _Reply(
            paths=list(found.paths),
            complete=found.complete,
            secrets=list(found.secrets),
            links=sorted(found.links),
            listed=list(dict.fromkeys(d for d, _ in found.dirs))
            if found.complete and len(found.dirs) <= nested.MAX_LISTED
            else [],
            proof=nested.last_proof(),
            answer=n,
        )
    except Exception as e:  # reported, and the asker denies its call
        return _Reply(error=f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    serve()
