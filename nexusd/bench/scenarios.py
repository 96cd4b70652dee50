"""What the load generator asks: one list of (call, expected outcome) per scenario.

The rule-decided scenarios rely on ``procs.BENCH_POLICY`` (allow ``Bash(echo *)``, ask ``Bash(git push *)``,
deny ``Bash(rm *)``); against a running daemon with another policy, mismatches are counted as
``unexpected`` rather than hidden. ``mix`` replays the corpus of real-world commands with the reads,
searches and edits an agent interleaves with them; whatever is asked there is answered by the automatic
UI client.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from nexusd import protocol

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CORPUS = REPO / "benchmarks" / "corpus" / "commands.txt"

Expect = tuple[str, str] | None  # (decision, source), or None when any outcome is fine


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    needs_ui: bool  # an automatic UI client must be subscribed and answering


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
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
    import msgspec

    session = f"bench-{client}"
    n = len(cycle)
    out: list[tuple[bytes, Expect]] = []
    for k in range(n):
        call, expect = cycle[(k + offset) % n]
        req = protocol.Request(call=msgspec.structs.replace(call, session=session), on_no_ui="deny")
        out.append((protocol.encode(req), expect))
    return out
