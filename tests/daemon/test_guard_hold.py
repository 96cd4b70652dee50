"""The guard against agents widening their own session holds against floods and restarts (issue 34, item 1).

Reproduced on 43de9e7: a grandchild of an agent sent 4,200 requests, each naming another live process as its
agent, which wore out the guard's memory of 4,096 agents; then it set bypass mode, added an allow rule and
trusted the workspace, all acknowledged. With no flood, the same widening went through right after a kill -9
and restart, because a fresh daemon knew no agent. And a request could name a person's own terminal as its
agent, locking the person out.

Everything below is real: a daemon on a temp socket, an "agent" process whose hook child makes a request, and
a grandchild of the agent (through ``sh -c``) that floods and then tries to widen the gate. The "live
processes" the flood names are threads of the grandchild (each has its own pid in /proc), which is as cheap
for an attacker as it is for this test.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from nexusd import protocol as p
from nexusd.client import Client
from tests.conftest import DaemonHandle

HOOK = textwrap.dedent(
    """
    from nexusd.client import Client
    from nexusd import protocol as p
    with Client(role="agent", name="hook") as c:
        d = c.request(p.CallInfo(provider="claude", session="sess-h", tool="Read", input={"file_path": "/tmp/x"},
                                 cwd="/tmp"))
        print("REQUESTED", d.decision, flush=True)
    """
)

# The flood: N requests, each naming one of N live threads as its agent. It runs two processes below the
# grandchild, through a plain (non-shell) process, so the parent it registers is not an ancestor of the
# grandchild that widens afterwards: nothing of the widening process's own ancestry is kept fresh by it.
FLOOD = textwrap.dedent(
    """
    import os, socket, sys, threading
    from nexusd import protocol as p
    flood = int(sys.argv[1])
    threading.stack_size(64 * 1024)
    stop = threading.Event()
    tids = []
    lock = threading.Lock()
    def live():
        with lock:
            tids.append(threading.get_native_id())
        stop.wait()
    threads = [threading.Thread(target=live, daemon=True) for _ in range(flood)]
    for t in threads:
        t.start()
    while len(tids) < flood:
        pass
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["NEXUS_SOCKET"])
    f = s.makefile("rb")
    s.sendall(p.encode(p.Hello(proto=p.PROTOCOL_VERSION, role="agent", name="flood")))
    f.readline()
    decided = 0
    for i in range(0, flood, 200):
        batch = tids[i:i + 200]
        s.sendall(b"".join(
            p.encode(p.Request(call=p.CallInfo(provider="claude", session="flood", tool="Read",
                                               input={"file_path": "/tmp/x"}, cwd="/tmp", agent_pid=tid)))
            for tid in batch))
        got = 0
        while got < len(batch):
            if isinstance(p.decode_server(f.readline()), p.Decision):
                got += 1
        decided += got
    print("FLOODED", decided, flush=True)
    """
)

# The grandchild: optionally flood (through a child that runs FLOOD as its own child), then try every
# widening message. Prints a JSON list: "ok" (acknowledged) or "blocked" (refused by the guard).
WIDEN = textwrap.dedent(
    """
    import json, subprocess, sys
    import msgspec
    from nexusd import protocol as p
    from nexusd.client import Client, ClientError
    flood = int(sys.argv[1])
    if flood:
        relay = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"
        r = subprocess.run([sys.executable, "-c", relay, sys.executable, "-c", FLOOD, str(flood)],
                           capture_output=True, text=True, timeout=240)
        print(r.stdout.strip() or r.stderr[-300:], file=sys.stderr, flush=True)
    out = []
    with Client(role="admin", name="script") as c:
        for raw in json.loads(sys.argv[2]):
            try:
                c.call(msgspec.convert(raw, p.ClientMessage))
                out.append("ok")
            except ClientError as e:
                out.append("blocked" if e.code == "self_approval" else e.code)
    print(json.dumps(out), flush=True)
    """
)

ATTEMPTS = [
    {"type": "set_mode", "session": "sess-h", "mode": "bypassPermissions"},
    {"type": "rule_change", "action": "add", "kind": "allow", "rule": "Bash(curl *)"},
    {"type": "trust_change", "action": "add", "path": "/tmp"},
]

# The agent: its hook child requests, then it waits for a line on stdin (the test may restart the daemon
# meanwhile), then runs the grandchild through sh -c.
AGENT = textwrap.dedent(
    """
    import subprocess, sys
    req = subprocess.run([sys.executable, "-c", HOOK], capture_output=True, text=True)
    print(req.stdout.strip() or req.stderr[-300:], flush=True)
    flood = sys.stdin.readline().strip()
    grand = subprocess.run(["sh", "-c", 'exec "$0" -c "$1" "$2" "$3"', sys.executable, WIDEN, flood, MSGS],
                           capture_output=True, text=True, timeout=300)
    print("GRANDCHILD", grand.stdout.strip() or grand.stderr[-600:], flush=True)
    print("STDERR", grand.stderr.strip().replace("\\n", " | ")[-300:], flush=True)
    """
)


def _start_agent(d: DaemonHandle) -> subprocess.Popen[str]:
    widen = f"FLOOD={FLOOD!r}\n{WIDEN}"
    code = f"HOOK={HOOK!r}\nWIDEN={widen!r}\nMSGS={json.dumps(ATTEMPTS)!r}\n{AGENT}"
    agent = subprocess.Popen(
        [sys.executable, "-c", code], env=d.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert agent.stdout is not None
    first = agent.stdout.readline()
    assert first.startswith("REQUESTED"), first
    return agent


def _widen(agent: subprocess.Popen[str], flood: int) -> tuple[list[str], str]:
    out, _ = agent.communicate(f"{flood}\n", timeout=300)
    lines = out.splitlines()
    grand = next(x for x in lines if x.startswith("GRANDCHILD"))
    err = next((x for x in lines if x.startswith("STDERR")), "")
    try:
        return json.loads(grand.split(" ", 1)[1]), err
    except json.JSONDecodeError as e:
        raise AssertionError(out) from e


def _session_unwidened(d: DaemonHandle) -> None:
    with Client(socket_path=str(d.socket), role="admin", name="person") as c:
        st = c.status()
        assert st.sessions.get("sess-h", "default") == "default", st.sessions
        rules = c.call(p.Rules())
        assert ("allow", "Bash(curl *)") not in {(r.kind, r.rule) for r in rules.rules}
        assert "/tmp" not in rules.trusted


def test_a_flood_naming_4200_live_processes_does_not_wear_the_guard_out(daemon_factory) -> None:
    d = daemon_factory()
    agent = _start_agent(d)
    results, err = _widen(agent, 4200)
    assert "FLOODED 4200" in err, err
    assert results == ["blocked"] * len(ATTEMPTS), (results, err)
    _session_unwidened(d)


def test_the_guard_holds_after_kill_9_and_restart(daemon_factory) -> None:
    d = daemon_factory()
    agent = _start_agent(d)
    d.stop(signal.SIGKILL)
    d.start()
    results, err = _widen(agent, 0)
    assert results == ["blocked"] * len(ATTEMPTS), (results, err)
    _session_unwidened(d)


def test_the_guard_holds_after_a_clean_restart(daemon_factory) -> None:
    d = daemon_factory()
    agent = _start_agent(d)
    d.restart()
    results, err = _widen(agent, 0)
    assert results == ["blocked"] * len(ATTEMPTS), (results, err)
    _session_unwidened(d)


PERSON = textwrap.dedent(
    """
    import sys
    from nexusd.client import Client, ClientError
    from nexusd import protocol as p
    print(flush=True)
    sys.stdin.readline()
    try:
        with Client(role="admin", name="person") as c:
            c.call(p.SetMode(session="sess-p", mode="plan"))
        print("ok", flush=True)
    except ClientError as e:
        print(e.code, flush=True)
    """
)


def test_a_request_cannot_name_a_persons_terminal_as_its_agent(daemon_factory) -> None:
    """The declared agent_pid is taken only when it is an ancestor of the requester."""
    d = daemon_factory()
    person = subprocess.Popen(
        [sys.executable, "-c", PERSON], env=d.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert person.stdout is not None and person.stdin is not None
    person.stdout.readline()
    # an agent's request naming the person's process (three spellings: the pid alone, on one connection
    # after another agent_pid, and on a fresh connection)
    hook = textwrap.dedent(
        f"""
        from nexusd.client import Client
        from nexusd import protocol as p
        for agent_pid in ({person.pid}, 999_999, {person.pid}):
            with Client(role="agent", name="hook") as c:
                c.request(p.CallInfo(provider="claude", session="sess-p", tool="Read",
                                     input={{"file_path": "/tmp/x"}}, cwd="/tmp", agent_pid=agent_pid))
        """
    )
    subprocess.run([sys.executable, "-c", hook], env=d.env, check=True, timeout=60)
    out, _ = person.communicate("go\n", timeout=60)
    assert out.strip() == "ok", out


def test_saved_agents_are_kept_only_while_they_live(tmp_path: Path) -> None:
    from nexusd.daemon.guard import AgentRegistry, boot_id

    live = subprocess.Popen(["sleep", "60"])
    try:
        saved = tmp_path / "agents"
        reg = AgentRegistry(frozenset({0, 1}), saved)
        reg.saw(live.pid, None)
        ((pid, start),) = reg.agents
        assert pid == live.pid
        text = saved.read_text()
        assert text == f"{boot_id()} {pid} {start}\n"
        # a recycled pid, another boot, garbage: none is loaded; the live agent is
        saved.write_text(text + f"{boot_id()} {pid} {start + 1}\nother-boot {pid} {start}\nnonsense\n")
        again = AgentRegistry(frozenset({0, 1}), saved)
        assert set(again.agents) == {(pid, start)} and again.from_agent(pid)
        assert saved.read_text() == text  # rewritten with the live ones only
    finally:
        live.kill()
        live.wait()
    assert AgentRegistry(frozenset({0, 1}), saved).agents == {}  # it ended: forgotten
    saved.unlink()
    saved.mkdir()  # unreadable as a file: fail closed
    broken = AgentRegistry(frozenset({0, 1}), saved)
    assert broken.broken and broken.from_agent(None)
