"""The gate must not be managed by the agents it gates.

A script started by an allowed ``npm test`` is a child of the agent; through the socket (same uid) it
could put its own session in bypass mode, learn ``Bash(*)``, trust its workspace, or answer its own or
another agent's ask. So every agent process that makes a request is remembered (its pid *and* start
time: pids are recycled), and a message that widens what is allowed (``WIDENS`` below) is refused when it
comes from a process that is, or descends from, a remembered agent. A person does these from a terminal or
UI outside the agents; narrowing (a deny rule, distrust, removing an allow rule) stays open to everyone.

Agents are resolved the way the answer guard does it (``peer.resolve_agent``): up through transient
shells and wrappers (``sh -c "nexus-hook claude"``), stopping at an interactive shell, never the daemon's
own ancestors (a login shell or terminal that started both would otherwise lock the person out). On
Linux everything is read from ``/proc`` (a few reads per request, cached by pid and start time).

Limits, said plainly: a process that double-forks away from its agent (reparented to init) escapes any
ancestry check; the uid stays the boundary (docs/SECURITY.md).
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from nexusd import protocol as p
from nexusd.daemon.peer import SHELLS, WRAPPERS, _runs_a_command

log = structlog.get_logger("nexusd.guard")

MAX_AGENTS = 4096
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


class AgentRegistry:
    """The agent processes seen making requests, by (pid, start time)."""

    def __init__(self, never: frozenset[int]) -> None:
        self.never = never  # the daemon's own ancestors: never an agent
        self.agents: OrderedDict[Identity, None] = OrderedDict()
        self._resolved: OrderedDict[Identity, Identity | None] = OrderedDict()  # requester parent -> agent

    def saw(self, ppid: int | None, agent_pid: int | None) -> tuple[Identity, ...]:
        """Remember the agent behind a request: the requester's parent (at accept) and the declared pid.
        Returns the agents remembered, for ``touch`` on the connection's next requests with the same pair."""
        found: list[Identity] = []
        for pid in {ppid, agent_pid}:
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
                if len(self._resolved) > MAX_AGENTS:
                    self._resolved.popitem(last=False)
            if agent is not None:
                found.append(agent)
        self.touch(found)
        return tuple(found)

    def touch(self, agents: Sequence[Identity]) -> None:
        """Remember ``agents`` as the most recently seen. A connection's requester and its parent stay the
        same processes for the connection's life, so its later requests touch what ``saw`` found then
        instead of reading /proc again (a bridge asks many times on one connection)."""
        for agent in agents:
            self.agents[agent] = None
            self.agents.move_to_end(agent)
            if len(self.agents) > MAX_AGENTS:
                self.agents.popitem(last=False)

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

    def from_agent(self, pid: int | None) -> bool:
        """Whether ``pid`` is, or descends from, a remembered agent. Unknown or unreadable: True (fail closed),
        unless no agent has been seen at all."""
        if not self.agents:
            return False
        if pid is None:
            return True
        current = pid
        for _ in range(MAX_DEPTH):
            st = _stat(current)
            if st is None:
                return True  # gone or unreadable while it talks to us: cannot tell, refuse
            if (current, st[1]) in self.agents:
                return True
            if st[0] <= 1:
                return False
            current = st[0]
        return True
