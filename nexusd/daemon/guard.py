"""The gate must not be managed by the agents it gates.

A script started by an allowed ``npm test`` is a child of the agent; through the socket (same uid) it
could put its own session in bypass mode, learn ``Bash(*)``, trust its workspace, or answer its own or
another agent's ask. So every agent process that makes a request is remembered (its pid *and* start
time: pids are recycled), and a message that widens what is allowed (``WIDENS`` below) is refused when it
comes from a process that is, or descends from, a remembered agent. A person does these from a terminal or
UI outside the agents; narrowing (a deny rule, distrust, removing an allow rule) stays open to everyone.

Who is an agent comes from the kernel only: the requester's parent as ``SO_PEERCRED`` and ``/proc`` say at
accept, resolved up through transient shells and wrappers (``sh -c "nexus-hook claude"``), stopping at an
interactive shell, never the daemon's own ancestors (a login shell or terminal that started both would
otherwise lock the person out). The ``agent_pid`` a request declares is taken only when it names an
ancestor of the requester: a request cannot make an unrelated process (a person's terminal) an agent.

What must be remembered is never evicted by what agents send (issue 34: an LRU of 4,096 was worn out by
4,200 requests naming other live processes): the table drops only processes that have ended, and it is
kept in ``<state-dir>/agents`` (appended before the request is answered; rewritten at start with the live
ones), so a restart, kill -9 included, still knows every live agent of this boot. The file is in the state
directory, which the sandbox hides and a safety check protects in every mode.

Limits, said plainly: a process that double-forks away from its agent (reparented to init) escapes any
ancestry check; the uid stays the boundary (docs/SECURITY.md).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from nexusd import protocol as p
from nexusd.atomicfile import write_atomic
from nexusd.daemon.peer import SHELLS, WRAPPERS, _runs_a_command, ancestors, resolve_agent

if TYPE_CHECKING:
    from nexusd.daemon.connection import Connection

log = structlog.get_logger("nexusd.guard")

AGENTS_NAME = "agents"  # <state-dir>/agents
MAX_RESOLVED = 4096  # the resolution cache (requester parent -> agent); the agents themselves are never evicted
PRUNE_AT = 4096  # past this many agents, ended ones are dropped (the threshold then follows the live count)
MAX_FILE_BYTES = 64 << 20  # <state-dir>/agents read at start: a bound, far above any real table
MAX_HOPS = 8  # transient shells and wrappers between a hook and its agent
MAX_DEPTH = 128  # ancestors walked for a widening message
Identity = tuple[int, int]  # (pid, start time in clock ticks since boot)


# --------------------------------------------------------------------------- what widens


def _rule_change_widens(m: p.RuleChange) -> bool:
    return (m.action == "add" and m.kind == "allow") or (m.action == "remove" and m.kind in ("deny", "ask"))


# Every client message, classified: True/False, or a predicate on the message. A message type missing
# here is refused from an agent (fail closed), and a test keeps the table complete.
WIDENS: dict[type[Any], bool | Callable[[Any], bool]] = {
    p.Hello: False,
    p.Request: False,  # the gate decides it
    p.Part: False,  # a piece of the next request's input: the gate decides that request
    p.Cancel: False,  # only the connection's own requests, and a cancel is a deny
    p.Subscribe: False,  # reading the queue decides nothing
    p.Answer: True,  # an allow is the obvious case; a deny of another agent's call is refused too
    p.Status: False,
    p.Check: False,  # a dry run
    p.SetMode: True,  # any mode change from an agent, clearing a person's override included
    p.Reload: False,  # re-reads files the classifier and the sandbox already keep agents from writing
    p.Rules: False,
    p.RuleChange: _rule_change_widens,
    p.TrustChange: lambda m: m.action == "add",
    p.Probe: False,
    p.SandboxPlan: False,
    p.SandboxReport: False,  # adds an audit record; decides nothing
    p.Audit: False,
    p.Ping: False,  # keeps the connection open, nothing more
    p.Grants: False,
    p.RevokeGrant: False,  # taking a grant back only narrows
    p.SessionEnd: False,  # ends allow grants only; deny answers and mode overrides stay
    # undo (docs/UNDO.md): checkpoints hold files the policy may keep from agents (a Read deny), and a
    # rewind is a person's act on the workspace: both refused from an agent's process tree
    p.History: True,
    p.Rewind: True,
    p.Hold: False,  # only delays a deny, at most to what the requester itself waits
    p.RuleCheck: False,  # a question, decides nothing
}


def widens(msg: Any) -> bool:
    rule = WIDENS.get(type(msg), True)
    return rule if isinstance(rule, bool) else bool(rule(msg))


# --------------------------------------------------------------------------- processes


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of ``pid``, or None when it is gone or unreadable."""
    if sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                data = f.read()
            fields = data[data.rindex(b")") + 2 :].split()
            return int(fields[1]), int(fields[19])
        except (OSError, ValueError, IndexError):
            return None
    try:
        import psutil

        proc = psutil.Process(pid)
        return proc.ppid(), int(proc.create_time() * 100)
    except Exception:
        return None


def _transient(pid: int) -> bool:
    """A wrapper, or a shell running a command or script (``sh -c ...``): not the agent itself."""
    try:
        if sys.platform.startswith("linux"):
            with open(f"/proc/{pid}/comm", "rb") as f:
                name = f.read().decode(errors="replace").strip()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        else:
            import psutil

            proc = psutil.Process(pid)
            name, argv = proc.name(), proc.cmdline()
    except Exception:
        return False
    names = {name, os.path.basename(argv[0]) if argv else ""}
    return bool(names & WRAPPERS) or bool(names & SHELLS and _runs_a_command(argv))


def boot_id() -> str:
    """What tells this boot from the next: start times count from boot, so a saved identity is only
    meaningful within the boot that saved it."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        pass
    try:
        import psutil

        return f"boot-{int(psutil.boot_time())}"
    except Exception:
        return "unknown-boot"


class AgentRegistry:
    """The agent processes seen making requests, by (pid, start time), kept while they live.

    ``path`` (``<state-dir>/agents``) keeps them across a restart of the daemon. When it exists but cannot be
    read, the registry fails closed: every widening message is refused until it is readable again (a person
    can remove it), and the daemon says so."""

    def __init__(self, never: frozenset[int], path: Path | None = None) -> None:
        self.never = never  # the daemon's own ancestors: never an agent
        self.agents: dict[Identity, None] = {}
        self._resolved: OrderedDict[Identity, Identity | None] = (
            OrderedDict()
        )  # a cache only: requester parent -> agent
        self.path = path
        self.broken: str | None = None  # why the saved agents could not be read: refuse every widening
        self._boot = boot_id()
        self._prune_at = PRUNE_AT
        self._fd: int | None = None
        if path is not None:
            self._load(path)

    # ------------------------------------------------------------------ persistence

    def _load(self, path: Path) -> None:
        """Read the agents saved by earlier daemons of this boot, keep the live ones, and rewrite the file."""
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            text = ""
        except OSError as e:
            self.broken = f"{path}: {e.strerror or e}"
            log.error("saved agents unreadable: every gate-widening message is refused", error=self.broken)
            return
        for line in text.splitlines():
            parts = line.split()
            if len(parts) != 3 or parts[0] != self._boot:
                continue
            try:
                ident = (int(parts[1]), int(parts[2]))
            except ValueError:
                continue
            if _alive(ident):
                self.agents[ident] = None
        self._rewrite()

    def _rewrite(self) -> None:
        """The file holds exactly the live agents (at start, and when pruning)."""
        if self.path is None:
            return
        body = "".join(f"{self._boot} {pid} {start}\n" for pid, start in self.agents)
        try:
            self._close()
            write_atomic(self.path, body, 0o600)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        except OSError as e:
            log.error("saved agents cannot be written; a restart would forget them", error=str(e))

    def _save(self, ident: Identity) -> None:
        """Appended at once (before the request is answered): the page cache outlives a kill -9, and after a
        reboot no saved identity means anything anyway, so no fsync."""
        if self._fd is None:
            return
        try:
            os.write(self._fd, f"{self._boot} {ident[0]} {ident[1]}\n".encode())
        except OSError as e:
            log.error("saved agents cannot be written; a restart would forget them", error=str(e))

    def _close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        self._close()

    # ------------------------------------------------------------------ requests

    def saw(self, ppid: int | None, agent_pid: int | None) -> tuple[Identity, ...]:
        """Remember the agent behind a request: the requester's parent (at accept, from the kernel), and the
        declared pid only when it is that parent or one of its ancestors. Returns the agents remembered, for
        ``touch`` on the connection's next requests with the same pair."""
        found: list[Identity] = []
        candidates = [ppid]
        if agent_pid is not None and agent_pid != ppid and _is_ancestor(agent_pid, ppid):
            candidates.append(agent_pid)
        for pid in candidates:
            if pid is None or pid <= 1 or pid in self.never:
                continue
            st = _stat(pid)
            if st is None:
                continue
            key = (pid, st[1])
            if key in self._resolved:
                self._resolved.move_to_end(key)
                agent = self._resolved[key]
            else:
                agent = self._resolve(pid, st)
                self._resolved[key] = agent
                if len(self._resolved) > MAX_RESOLVED:
                    self._resolved.popitem(last=False)  # a cache: what it forgets is resolved again
            if agent is not None:
                found.append(agent)
        self.touch(found)
        return tuple(found)

    def touch(self, agents: Sequence[Identity]) -> None:
        """Remember ``agents`` (a connection's later requests come from the same processes: no /proc reads)."""
        for agent in agents:
            if agent not in self.agents:
                self.agents[agent] = None
                self._save(agent)
        if len(self.agents) > self._prune_at:
            self.prune()

    def prune(self) -> None:
        """Forget agents that have ended (their descendants were reparented away from them: an ended agent
        is nobody's ancestor); only ended ones, so nothing an agent sends can push a live one out."""
        self.agents = {a: None for a in self.agents if _alive(a)}
        self._prune_at = max(PRUNE_AT, 2 * len(self.agents))
        self._rewrite()

    def _resolve(self, pid: int, st: tuple[int, int]) -> Identity | None:
        current, (parent, start) = pid, st
        for _ in range(MAX_HOPS):
            if current in self.never:
                return None
            if not _transient(current) or parent <= 1:
                return current, start
            nxt = _stat(parent)
            if nxt is None:
                return current, start
            current, (parent, start) = parent, nxt
        return current, start

    def from_agent(self, pid: int | None, start: int | None = None) -> bool:
        """Whether ``pid`` is, or descends from, a remembered agent. Unknown or unreadable: True (fail closed),
        unless no agent has been seen at all (in this boot, by this daemon or one before it). ``start`` is the
        peer's start time at accept: a pid that now belongs to another process is refused."""
        if self.broken is not None:
            return True
        if not self.agents:
            return False
        if pid is None:
            return True
        current = pid
        for i in range(MAX_DEPTH):
            st = _stat(current)
            if st is None:
                return True  # gone or unreadable while it talks to us: cannot tell, refuse
            if i == 0 and start is not None and st[1] != start:
                return True  # the peer ended and its pid was reused: whoever holds its socket now, refuse
            if (current, st[1]) in self.agents:
                return True
            if st[0] <= 1:
                return False
            current = st[0]
        return True


def _alive(ident: Identity) -> bool:
    st = _stat(ident[0])
    return st is not None and st[1] == ident[1]


def _is_ancestor(pid: int, of: int | None) -> bool:
    """Whether ``pid`` is ``of`` or one of its ancestors (each parent no younger than its child)."""
    if of is None or pid <= 1:
        return False
    current = of
    st = _stat(current)
    for _ in range(MAX_DEPTH):
        if st is None:
            return False
        if current == pid:
            return True
        parent, started = st[0], st[1]
        if parent <= 1:
            return False
        st = _stat(parent)
        if st is not None and st[1] > started:
            return False  # the parent's pid was reused by a younger process
        current = parent
    return False


def agent_pids(conn: Connection, call: p.CallInfo, daemon_ancestors: frozenset[int]) -> frozenset[int]:
    """Who the requesting agent is, taken while the requester still waits (its parent chain is alive).

    The requester's parent (at accept) and the call's declared ``agent_pid``, each also resolved up
    through transient shells and wrappers (``sh -c "nexus-hook claude"``): the agent's own Bash tool
    descends from the agent, not from that shell. Ancestors of the daemon itself (a login shell, a
    terminal, init) are never "the agent", or no UI started beside the daemon could answer.

    Resolved at a connection's first ask and kept for its later ones with the same declared pid (an MCP
    bridge asks many times; the walk was a third of an ask's CPU): the chain seen while the first ask
    waited, not a later one whose shells have exited, and a process that rewrites itself between asks
    could as well have looked that way at the first.
    """
    if conn.agents is not None and conn.agents[0] == call.agent_pid:
        return conn.agents[1]
    direct = {pid for pid in (conn.peer.ppid, call.agent_pid) if pid is not None}
    pids = set(direct)
    for pid in direct:
        try:
            resolved = resolve_agent(pid)
        except Exception:  # psutil trouble costs the resolution, never the request
            log.exception("agent resolution failed", pid=pid)
            continue
        if resolved is not None:
            pids.add(resolved)
    agents = frozenset(pids - daemon_ancestors)
    conn.agents = (call.agent_pid, agents)
    return agents


def answered_by_its_agent(answerer: Connection, agents: frozenset[int]) -> bool:
    """True if the answering process descends from the agent that made the request (``agents``: the ask's
    ``guard``, taken by ``agent_pids``); True when that cannot be told (fail closed)."""
    if not agents:
        return False
    if answerer.peer.pid is None:
        return True  # cannot tell: fail closed
    chain = ancestors(answerer.peer.pid)
    if chain is None:
        return True
    return bool(agents.intersection(chain))


def remember_requester(agents: AgentRegistry, conn: Connection, call: p.CallInfo) -> None:
    """Remember the agent behind a request (the registry above), once per connection and declared pid; a
    failure costs the request nothing (it is logged)."""
    try:
        seen = conn.seen
        if seen is not None and seen[0] == call.agent_pid:
            agents.touch(seen[1])
        else:
            found = agents.saw(conn.peer.ppid, call.agent_pid)
            conn.seen = (call.agent_pid, found) if found else None  # nothing readable: look again next time
    except Exception:  # remembering the agent costs nothing of the request
        log.exception("agent registry failed")
