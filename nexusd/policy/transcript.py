"""The recent conversation, for auto mode's reviewer: read from the agent's transcript, bounded and redacted.

A single call says little about intent (``curl -d @notes.txt https://...`` is fine or an exfiltration depending
on what the user asked for); Claude Code's auto-mode classifier sees the conversation too. Claude Code names its
transcript in every hook input (``transcript_path``). The path comes from the requester, so it is read only when
it is what Claude Code writes: a regular ``.jsonl`` file of ours under ``<claude config>/projects/`` (never a
key or a policy file an agent names), only its tail, only the user's and the assistant's words and
tool calls, each shortened, with tokens and keys redacted. A transcript that is named but cannot be read this
way is an error: the reviewer is not asked and its ``on_error`` applies (deny by default): fail closed.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Sequence
from typing import Any

MAX_TAIL_BYTES = 256 << 10  # read at most this much of the file's end
MAX_MESSAGES = 20
MAX_MESSAGE_CHARS = 2000

# Secrets by shape (the common providers' token formats, private keys, credentials in URLs and assignments).
_SECRETS = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}\b|\bgithub_pat_[A-Za-z0-9_]{30,}\b"
    r"|\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}\b|\bxox[abprs]-[A-Za-z0-9-]{10,}\b"
    r"|\bAIza[0-9A-Za-z_-]{35}\b|\bglpat-[A-Za-z0-9_-]{20,}\b|\bnpm_[A-Za-z0-9]{36}\b"
    r"|\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b"
    r"|(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"
    r"|(?i:(?<=password=)|(?<=passwd=)|(?<=secret=)|(?<=token=)|(?<=api_key=)|(?<=apikey=))[^\s&\"']+",
    re.DOTALL,
)


class TranscriptError(Exception):
    """The transcript was named but cannot be used: the reviewer must not decide without it."""


def redact(text: str) -> str:
    return _SECRETS.sub("[REDACTED]", text)


def transcript_roots(home: str, env: dict[str, str] | None = None) -> list[str]:
    """Where Claude Code keeps transcripts: ``$CLAUDE_CONFIG_DIR/projects`` and ``~/.claude/projects``."""
    env = dict(os.environ) if env is None else env
    roots = [os.path.join(home, ".claude", "projects")]
    if env.get("CLAUDE_CONFIG_DIR"):
        roots.insert(0, os.path.join(env["CLAUDE_CONFIG_DIR"], "projects"))
    return [os.path.realpath(r) for r in roots]


def _under(real: str, roots: Sequence[str]) -> bool:
    return real.endswith(".jsonl") and any(real.startswith(r.rstrip("/") + "/") for r in roots)


def _open_checked(path: str, roots: Sequence[str]) -> int:
    real = os.path.realpath(path)
    if not _under(real, roots):
        raise TranscriptError(
            f"{path} is not a transcript of Claude Code (expected a .jsonl under {' or '.join(roots)})"
        )
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise TranscriptError(f"cannot open the transcript {path}: {e.strerror}") from None
    st = os.fstat(fd)
    try:
        # what was opened, not what the name resolved to a moment before: a parent swapped for a link in
        # between (the agent can write there) must not turn the read into one of ~/.ssh
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        opened = real  # no /proc (macOS): the O_NOFOLLOW open and the checks below stand alone
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or not _under(opened, roots):
        os.close(fd)
        raise TranscriptError(f"the transcript {path} is not a regular file of this user under the transcripts")
    return fd


def _text_of(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            yield block["text"]
        elif kind == "tool_use":
            yield f"[tool call {block.get('name')}: {json.dumps(block.get('input'), ensure_ascii=False)[:500]}]"
        elif kind == "tool_result":
            yield "[tool result]"  # outputs can hold anything a tool read: not passed on


def parse_tail(data: bytes, *, cut: bool = False, max_messages: int = MAX_MESSAGES) -> list[dict[str, str]]:
    """The last messages of a Claude Code transcript tail (JSON lines; ``cut``: the first line is partial)."""
    out: list[dict[str, str]] = []
    lines = data.split(b"\n")
    if cut:
        lines = lines[1:]
    for raw in lines:
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            continue  # a line being written, or another format: the rest still counts
        if not isinstance(entry, dict) or entry.get("type") not in ("user", "assistant"):
            continue
        message = entry.get("message")
        if not isinstance(message, dict):
            continue
        text = "\n".join(_text_of(message.get("content"))).strip()
        if not text or text == "[tool result]":
            continue
        if len(text) > MAX_MESSAGE_CHARS:
            text = text[:MAX_MESSAGE_CHARS] + " [...]"
        out.append({"role": str(entry["type"]), "text": redact(text)})
    return out[-max_messages:]


def read_context(path: str, home: str, env: dict[str, str] | None = None) -> list[dict[str, str]]:
    """The recent conversation of the transcript at ``path``; TranscriptError when it cannot be used."""
    fd = _open_checked(path, transcript_roots(home, env))
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - MAX_TAIL_BYTES)
        data = os.pread(fd, MAX_TAIL_BYTES, start)
    except OSError as e:
        raise TranscriptError(f"cannot read the transcript {path}: {e.strerror}") from None
    finally:
        os.close(fd)
    return parse_tail(data, cut=start > 0)
