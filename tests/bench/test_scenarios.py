from __future__ import annotations

from pathlib import Path

import pytest

from nexusd import protocol
from nexusd.bench import scenarios


def test_rule_scenarios_expect_rule_decisions() -> None:
    assert {e for _, e in scenarios.calls("allow", "/w")} == {("allow", "rule")}
    assert {e for _, e in scenarios.calls("deny", "/w")} == {("deny", "rule")}
    assert {e for _, e in scenarios.calls("prompt", "/w")} == {("allow", "user")}


def test_mix_uses_corpus_and_other_tools(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("# comment\nls -la\n\ngit status\n" + "\n".join(f"echo {i}" for i in range(20)))
    cycle = scenarios.calls("mix", "/w", corpus)
    tools = {c.tool for c, _ in cycle}
    assert {"Bash", "Read", "Grep", "Edit"} <= tools
    commands = [c.input["command"] for c, _ in cycle if c.tool == "Bash"]
    assert commands[:2] == ["ls -la", "git status"] and len(commands) == 22


def test_missing_corpus_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        scenarios.calls("mix", "/w", tmp_path / "nope.txt")


def test_each_client_gets_its_own_bench_session() -> None:
    lines = scenarios.encode_for_client(scenarios.calls("allow", "/w"), 7, offset=1)
    reqs = [protocol.decode_client(line) for line, _ in lines]
    assert all(isinstance(r, protocol.Request) and r.call.session == "bench-7" for r in reqs)
    assert len(reqs) == len(scenarios.calls("allow", "/w"))


def test_agent_streams_are_seeded_distinct_and_agent_shaped(tmp_path: Path) -> None:
    from nexusd.bench import agent

    corpus = scenarios.load_corpus()
    one = agent.session_calls(1, 0, 400, "/w", corpus)
    assert one == agent.session_calls(1, 0, 400, "/w", corpus)  # reproducible from the seed
    assert one != agent.session_calls(2, 0, 400, "/w", corpus)
    assert one != agent.session_calls(1, 1, 400, "/w", corpus)  # clients differ
    assert {"Bash", "Read", "Grep", "Glob", "Edit", "Write"} <= {c.tool for c in one}
    keys = [(c.tool, repr(sorted(c.input.items()))) for c in one]
    assert 0.6 < len(set(keys)) / len(keys) < 0.95  # mostly new calls, some repeats
    commands = [c.input["command"] for c in one if c.tool == "Bash"]
    assert any(" -k " in c or "::test_" in c for c in commands)  # test runs with filters
    assert any(c.startswith("git push") for c in commands)  # asked by the bench policy
    agent.populate(tmp_path)
    reads = [c.input["file_path"].removeprefix("/w/") for c in one if c.tool == "Read"]
    assert all((tmp_path / r).is_file() for r in reads)  # the project's files are real


def test_agent_cell_gives_each_client_its_own_sessions_and_length() -> None:
    lines = scenarios.per_client("agent", 3, "/w", length=50)
    assert [len(x) for x in lines] == [50, 50, 50]
    sessions = {protocol.decode_client(line).call.session for x in lines for line, _ in x}  # type: ignore[union-attr]
    assert sessions == {"bench-agent-3-0", "bench-agent-3-1", "bench-agent-3-2"}
    assert lines[0] != lines[1]
