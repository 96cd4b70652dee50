"""Auto mode's reviewer sees the recent conversation: Claude's transcript, bounded and redacted, read only
where Claude Code writes transcripts; a named transcript that cannot be used fails closed."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from nexusd.core.model import Session
from nexusd.policy.gate import decide
from nexusd.policy.store import PolicyStore
from nexusd.policy.transcript import MAX_TAIL_BYTES, TranscriptError, parse_tail, read_context, redact
from nexusd.protocol import CallInfo


def line(kind: str, content: object) -> str:
    return json.dumps({"type": kind, "message": {"role": kind, "content": content}, "uuid": "u"})


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    (h / ".claude" / "projects" / "-w").mkdir(parents=True)
    return h


def transcript(home: Path, lines: list[str], name: str = "sess.jsonl") -> Path:
    p = home / ".claude" / "projects" / "-w" / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_the_words_and_tool_calls_are_read_tool_output_is_not(home: Path) -> None:
    p = transcript(
        home,
        [
            line("user", "please upload notes.txt to our wiki"),
            line(
                "assistant",
                [{"type": "text", "text": "Sure."}, {"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}],
            ),
            line("user", [{"type": "tool_result", "content": "id_rsa\nnotes.txt"}]),
            json.dumps({"type": "summary", "summary": "x"}),
            "{not json",
        ],
    )
    ctx = read_context(str(p), str(home), env={})
    assert ctx == [
        {"role": "user", "text": "please upload notes.txt to our wiki"},
        {"role": "assistant", "text": 'Sure.\n[tool call Bash: {"command": "ls"}]'},
    ]


@pytest.mark.parametrize(
    "secret",
    [
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_" + "a" * 36,
        "sk-ant-" + "b" * 40,
        "xoxb-1234567890-abcdef",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ],
)
def test_secrets_are_redacted(secret: str) -> None:
    out = redact(f"use {secret} please")
    assert secret not in out and "[REDACTED]" in out


def test_credentials_in_urls_and_assignments_are_redacted() -> None:
    out = redact("git clone https://bob:hunter2@example.com/r.git and password=swordfish&x=1")
    assert "hunter2" not in out and "swordfish" not in out and "bob" not in out


def test_bounded_tail_and_message_count(home: Path) -> None:
    many = [line("user", f"message {i} " + "x" * 3000) for i in range(200)]
    p = transcript(home, many)
    assert p.stat().st_size > MAX_TAIL_BYTES
    ctx = read_context(str(p), str(home), env={})
    assert len(ctx) == 20 and ctx[-1]["text"].startswith("message 199")
    assert all(len(m["text"]) <= 2010 for m in ctx)
    assert parse_tail(b'e"}\n' + line("user", "hi").encode(), cut=True) == [{"role": "user", "text": "hi"}]


@pytest.mark.parametrize("where", ["key", "outside", "symlink_out", "dir", "not_jsonl", "missing"])
def test_a_path_that_is_not_a_transcript_is_refused(home: Path, tmp_path: Path, where: str) -> None:
    (home / ".ssh").mkdir()
    key = home / ".ssh" / "id_rsa"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    projects = home / ".claude" / "projects" / "-w"
    path = {
        "key": key,
        "outside": tmp_path / "x.jsonl",
        "symlink_out": projects / "link.jsonl",
        "dir": projects / "d.jsonl",
        "not_jsonl": projects / "notes.txt",
        "missing": projects / "gone.jsonl",
    }[where]
    (tmp_path / "x.jsonl").write_text(line("user", "hi"))
    os.symlink(key, projects / "link.jsonl")
    (projects / "d.jsonl").mkdir()
    (projects / "notes.txt").write_text(line("user", "hi"))
    with pytest.raises(TranscriptError):
        read_context(str(path), str(home), env={})


def test_claude_config_dir_is_a_transcript_root(tmp_path: Path, home: Path) -> None:
    cfg = tmp_path / "cc"
    (cfg / "projects" / "p").mkdir(parents=True)
    p = cfg / "projects" / "p" / "s.jsonl"
    p.write_text(line("user", "hello") + "\n")
    assert read_context(str(p), str(home), env={"CLAUDE_CONFIG_DIR": str(cfg)})[0]["text"] == "hello"
    with pytest.raises(TranscriptError):
        read_context(str(p), str(home), env={})


# ------------------------------------------------------------------ through the gate, with a real reviewer

REVIEWER = """
import json, sys
doc = json.load(sys.stdin)
open(sys.argv[1], "w").write(json.dumps(doc.get("conversation")))
words = " ".join(m["text"] for m in doc.get("conversation") or [])
print(json.dumps({"decision": "allow" if "upload" in words else "block", "reason": "intent: " + words[:40]}))
"""


@pytest.mark.anyio
async def test_the_reviewer_judges_with_the_conversation_and_fails_closed_without(home: Path, tmp_path: Path) -> None:
    reviewer = tmp_path / "reviewer"
    reviewer.write_text(f"#!{sys.executable}\n{REVIEWER}")
    reviewer.chmod(reviewer.stat().st_mode | stat.S_IXUSR)
    seen = tmp_path / "seen.json"
    cfg, ws = tmp_path / "cfg", tmp_path / "ws"
    cfg.mkdir()
    ws.mkdir()
    (cfg / "policy.toml").write_text(f'[classifier]\ncommand = ["{reviewer}", "{seen}"]\n')
    store = PolicyStore(config_dir=cfg, state_dir=tmp_path / "st", managed_dir=tmp_path / "m", home=str(home))
    assert store.load() == []
    p = transcript(home, [line("user", "upload the report with curl; my key is ghp_" + "z" * 36)])

    def call(tp: str | None) -> CallInfo:
        return CallInfo(
            "claude", "s", "Bash", {"command": "curl -T report.pdf https://wiki.example"}, str(ws), transcript_path=tp
        )

    v = await decide(call(str(p)), store, Session(id="s", agent_mode="auto"))
    assert (v.decision, v.source) == ("allow", "classifier"), v
    got = json.loads(seen.read_text())
    assert got[0]["role"] == "user" and "ghp_" not in got[0]["text"] and "[REDACTED]" in got[0]["text"]
    v = await decide(call(None), store, Session(id="s2", agent_mode="auto"))  # no context: judged alone
    assert (v.decision, v.source) == ("deny", "classifier")
    seen.unlink()
    v = await decide(call(str(home / ".ssh" / "id_rsa")), store, Session(id="s3", agent_mode="auto"))
    assert (v.decision, v.source) == ("deny", "classifier") and "not a transcript" in v.reason
    assert not seen.exists(), "the reviewer must not run without the named conversation"
