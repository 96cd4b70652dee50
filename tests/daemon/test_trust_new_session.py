"""The trust question for a new session in a workspace with no project policy ("should this session exist
here"), through a real daemon: asked once per session and workspace when a person can answer; the
answer always/never is remembered as trust; unanswered, the call is denied and the workspace stays
untrusted; never asked where nobody could answer or the mode never asks; the setting is the person's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nexusd import protocol as p
from nexusd.policy.trust import TrustStore
from tests.conftest import DaemonHandle


def req(ws: Path, session: str, cmd: str = "ls", ref: str = "r", mode: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {
        "provider": "claude",
        "session": session,
        "tool": "Bash",
        "input": {"command": cmd},
        "cwd": str(ws),
        "workspace": str(ws),
    }
    if mode is not None:
        call["mode"] = mode
    return {"type": "request", "call": call, "ref": ref}


def ui_for(h: DaemonHandle, raw_factory):  # type: ignore[no-untyped-def]
    ui = raw_factory(h.socket, role="ui", name="person")
    assert isinstance(ui.ask({"type": "subscribe"}), p.Snapshot)
    return ui


def trust_of(h: DaemonHandle, ws: Path) -> str:
    return TrustStore(h.state_dir / "trust.toml").state(str(ws))


def test_a_new_session_asks_once_and_always_trusts(daemon_factory, raw_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    h = daemon_factory(trust_question=True)
    ws = tmp_path / "proj"
    ws.mkdir()
    ui, agent = ui_for(h, raw_factory), raw_factory(h.socket)
    pend = agent.ask(req(ws, "s1"))
    assert isinstance(pend, p.Pending), pend
    prompt = ui.recv()
    assert isinstance(prompt, p.Prompt) and "untrusted_workspace" in prompt.item.verdict.flags
    assert prompt.item.verdict.suggestions[0] == f"Trust({ws})" and "let it work here" in prompt.item.verdict.reason
    ui.send({"type": "answer", "id": pend.id, "decision": "allow", "scope": "always", "rules": [f"Trust({ws})"]})
    assert agent.recv().decision == "allow"
    assert trust_of(h, ws) == "trusted"
    # a later session there is not asked: `ls` is the mode's to allow
    assert agent.ask(req(ws, "s2", ref="r2")).decision == "allow"


def test_once_lets_the_session_work_and_its_next_session_is_asked_again(daemon_factory, raw_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    h = daemon_factory(trust_question=True)
    ws = tmp_path / "proj"
    ws.mkdir()
    ui, agent = ui_for(h, raw_factory), raw_factory(h.socket)
    pend = agent.ask(req(ws, "s1"))
    assert isinstance(pend, p.Pending) and isinstance(ui.recv(), p.Prompt)
    ui.send({"type": "answer", "id": pend.id, "decision": "allow", "scope": "once"})
    assert agent.recv().decision == "allow"
    assert trust_of(h, ws) == "unknown"
    # the same session: asked once only
    assert agent.ask(req(ws, "s1", cmd="ls -la", ref="r2")).decision == "allow"
    # a new session: asked again (nobody has said yet)
    assert isinstance(agent.ask(req(ws, "s2", ref="r3")), p.Pending)


def test_never_distrusts_and_denies(daemon_factory, raw_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    h = daemon_factory(trust_question=True)
    ws = tmp_path / "proj"
    ws.mkdir()
    ui, agent = ui_for(h, raw_factory), raw_factory(h.socket)
    pend = agent.ask(req(ws, "s1"))
    assert isinstance(pend, p.Pending) and isinstance(ui.recv(), p.Prompt)
    ui.send({"type": "answer", "id": pend.id, "decision": "deny", "scope": "always", "rules": [f"Trust({ws})"]})
    assert agent.recv().decision == "deny"
    assert trust_of(h, ws) == "untrusted"
    # distrusted: not asked again; the person's own policy decides (a project policy there would only restrict)
    assert agent.ask(req(ws, "s2", ref="r2")).decision == "allow"


def test_unanswered_denies_the_call_and_the_workspace_stays_untrusted(daemon_factory, raw_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    h = daemon_factory(trust_question=True, pending_timeout=1)
    ws = tmp_path / "proj"
    ws.mkdir()
    (ws / ".nexus").mkdir()
    ui, agent = ui_for(h, raw_factory), raw_factory(h.socket)
    pend = agent.ask(req(ws, "s1"))
    assert isinstance(pend, p.Pending) and isinstance(ui.recv(), p.Prompt)
    d = agent.recv()
    assert d.decision == "deny", d  # the prompt timed out: fail closed
    assert trust_of(h, ws) == "unknown"
    # the session was asked: its next call is decided without the question, as in an untrusted workspace
    assert agent.ask(req(ws, "s1", cmd="ls -la", ref="r2")).decision == "allow"
    # a project policy that appears later gives no project allow rule (the project-policy question asks)
    (ws / ".nexus" / "policy.toml").write_text('[permissions]\nallow = ["Bash(make build)"]\n')
    later = agent.ask(req(ws, "s1", cmd="make build", ref="r3"))
    assert isinstance(later, p.Pending)


def test_nobody_to_answer_or_a_mode_that_never_asks_is_not_asked(daemon_factory, raw_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    h = daemon_factory(trust_question=True)
    ws = tmp_path / "proj"
    ws.mkdir()
    agent = raw_factory(h.socket)
    assert agent.ask(req(ws, "s1")).decision == "allow"  # no UI connected: nobody could answer
    ui = ui_for(h, raw_factory)
    assert agent.ask(req(ws, "s2", ref="r2", mode="dontAsk")).decision == "allow"  # the mode never asks
    assert isinstance(agent.ask(req(ws, "s3", ref="r3")), p.Pending)  # the control: asked
    assert isinstance(ui.recv(), p.Prompt)


def test_the_setting_is_the_persons_not_the_projects(daemon_factory, raw_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "proj"
    (ws / ".nexus").mkdir(parents=True)
    (ws / ".nexus" / "policy.toml").write_text("[trust]\nask_new_sessions = false\n")
    other = tmp_path / "other"
    other.mkdir()
    h = daemon_factory(trust_question=True)
    ui, agent = ui_for(h, raw_factory), raw_factory(h.socket)
    # the project's own [trust] is ignored (and it has a project policy: the project question asks)
    assert isinstance(agent.ask(req(ws, "s1")), p.Pending)
    assert isinstance(ui.recv(), p.Prompt)
    # the person's own policy turns the new-session question off
    ui.close()
    agent.close()
    h.stop()
    h.write_policy("[trust]\nask_new_sessions = false\n")
    h.start()
    ui, agent = ui_for(h, raw_factory), raw_factory(h.socket)
    assert agent.ask(req(other, "s2", ref="r2")).decision == "allow"
