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
