"""What the load generator asks: one list of (call, expected outcome) per scenario.

The rule-decided scenarios rely on ``procs.BENCH_POLICY`` (allow ``Bash(echo *)``, ask ``Bash(git push *)``,
deny ``Bash(rm *)``); against a running daemon with another policy, mismatches are counted as
``unexpected`` rather than hidden. ``mix`` replays the corpus of real-world commands with the reads,
searches and edits an agent interleaves with them; whatever is asked there is answered by the automatic
UI client. ``agent`` (``nexusd/bench/agent.py``) is the headline: a seeded stream of distinct calls
per client, shaped like a coding session, so the decision memo hits only as often as it would for a
real agent.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import msgspec

from nexusd import protocol

# Package data (pyproject.toml), so ``nexusctl bench`` works from an installed package too.
DEFAULT_CORPUS = Path(__file__).resolve().parent / "corpus" / "commands.txt"

Expect = tuple[str, str] | None  # (decision, source), or None when any outcome is fine


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    needs_ui: bool  # an automatic UI client must be subscribed and answering


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "agent",
            "realistic session: distinct reads, edits, greps, test runs with filters, git; asks answered by UI",
            needs_ui=True,
        ),
        Scenario("allow", "shell command allowed by a rule (Bash(echo *))", needs_ui=False),
        Scenario("deny", "shell command denied by a rule (Bash(rm *))", needs_ui=False),
        Scenario("prompt", "shell command asked (Bash(git push *)), answered allow by an automatic UI", needs_ui=True),
        Scenario(
            "mix", "realistic mix: corpus commands plus reads, searches and edits; asks answered by UI", needs_ui=True
        ),
    )
}

_ALLOW = ["echo hello", "echo build finished", "echo $HOME", "echo 'tests passed: 42'"]
_DENY = ["rm -rf build", "rm dist/app.js", "rm -f /tmp/cache.db", "rm -r node_modules"]
_PROMPT = ["git push origin main", "git push --force-with-lease origin feature/x"]


def load_corpus(path: Path | None = None) -> list[str]:
    """Commands one per line; blank lines and ``#`` comments skipped."""
    p = path or DEFAULT_CORPUS
    if not p.is_file():
        raise FileNotFoundError(f"command corpus not found: {p}")
    out = [ln.strip() for ln in p.read_text(encoding="utf-8").splitlines()]
    commands = [c for c in out if c and not c.startswith("#")]
    if not commands:
        raise ValueError(f"command corpus is empty: {p}")
    return commands


def _bash(command: str, cwd: str) -> protocol.CallInfo:
    return protocol.CallInfo(
        provider="claude", session="bench", tool="Bash", input={"command": command, "description": "bench"}, cwd=cwd
    )


def calls(name: str, workspace: str, corpus: Path | None = None) -> list[tuple[protocol.CallInfo, Expect]]:
    """The request cycle of scenario ``name`` for an agent working in ``workspace``."""
    if name == "allow":
        return [(_bash(c, workspace), ("allow", "rule")) for c in _ALLOW]
    if name == "deny":
        return [(_bash(c, workspace), ("deny", "rule")) for c in _DENY]
    if name == "prompt":
        return [(_bash(c, workspace), ("allow", "user")) for c in _PROMPT]
    if name == "mix":
        return _mix(load_corpus(corpus), workspace)
    if name == "agent":
        raise ValueError("the agent scenario has one stream per client: use per_client()")
    raise KeyError(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")


def _mix(commands: list[str], ws: str) -> list[tuple[protocol.CallInfo, Expect]]:
    """About 60 % shell, 25 % reads, 10 % searches, 5 % edits: the shape of a coding session."""
    files = ["src/app.py", "README.md", "tests/test_app.py", "pyproject.toml", "src/lib/util.ts"]
    out: list[tuple[protocol.CallInfo, Expect]] = []
    fcycle = itertools.cycle(files)
    for i, command in enumerate(commands):
        out.append((_bash(command, ws), None))
        if i % 12 in (1, 4, 7, 10, 11):
            out.append((protocol.CallInfo("claude", "bench", "Read", {"file_path": f"{ws}/{next(fcycle)}"}, ws), None))
        if i % 12 in (3, 9):
            out.append((protocol.CallInfo("claude", "bench", "Grep", {"pattern": "def main", "path": ws}, ws), None))
        if i % 12 == 6:
            edit = {"file_path": f"{ws}/{next(fcycle)}", "old_string": "x = 1", "new_string": "x = 2"}
            out.append((protocol.CallInfo("claude", "bench", "Edit", edit, ws), None))
    return out


def encode_for_client(
    cycle: list[tuple[protocol.CallInfo, Expect]], client: int, offset: int = 0
) -> list[tuple[bytes, Expect]]:
    """Pre-encoded request lines for one client (its own session), rotated so clients differ."""
    session = f"bench-{client}"
    n = len(cycle)
    out: list[tuple[bytes, Expect]] = []
    for k in range(n):
        call, expect = cycle[(k + offset) % n]
        req = protocol.Request(call=msgspec.structs.replace(call, session=session), on_no_ui="deny")
        out.append((protocol.encode(req), expect))
    return out


def per_client(
    name: str, clients: int, workspace: str, *, length: int, corpus: Path | None = None, seed: int = 1
) -> list[list[tuple[bytes, Expect]]]:
    """Every client's pre-encoded request lines for one cell of scenario ``name``.

    The rule scenarios and ``mix`` give each client the same cycle, rotated. ``agent`` gives each client
    ``length`` calls of its own seeded session, in sessions named after the cell: a later cell does not
    hit the memo entries an earlier one left behind.
    """
    if name != "agent":
        cycle = calls(name, workspace, corpus)
        return [encode_for_client(cycle, c, offset=c * 7) for c in range(clients)]
    from nexusd.bench import agent

    commands = load_corpus(corpus)
    out: list[list[tuple[bytes, Expect]]] = []
    for c in range(clients):
        session = f"bench-agent-{clients}-{c}"
        stream = agent.session_calls(seed, c, length, workspace, commands)
        out.append(
            [
                (
                    protocol.encode(
                        protocol.Request(call=msgspec.structs.replace(call, session=session), on_no_ui="deny")
                    ),
                    None,
                )
                for call in stream
            ]
        )
    return out
