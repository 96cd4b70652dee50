"""PolicyStore: layers on disk, managed-file ownership, per-workspace project layers, reload with a
broken file, learning, trust."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import tomlkit

from nexusd.policy.store import PolicyStore
from nexusd.protocol import Verdict


@pytest.fixture
def dirs(tmp_path: Path):
    d = {k: tmp_path / k for k in ("cfg", "state", "managed", "ws", "home")}
    for p in d.values():
        p.mkdir()
    os.chmod(d["managed"], 0o755)
    return d


def store(d, **kw):
    s = PolicyStore(config_dir=d["cfg"], state_dir=d["state"], managed_dir=d["managed"], home=str(d["home"]), **kw)
    return s


def texts(pol, kind):
    return [r.text for r in pol.rules if r.kind == kind]


def test_builtin_when_no_files(dirs):
    s = store(dirs)
    assert s.load() == []
    assert s.policy.builtin and s.policy.rules == ()
    assert s.sources()[0].layer == "builtin"


def test_layers_and_sources(dirs):
    (dirs["managed"] / "policy.toml").write_text("[permissions]\ndeny = ['Bash(curl *)']\n")
    (dirs["managed"] / "policy.d").mkdir(mode=0o755)
    (dirs["managed"] / "policy.d" / "10-x.toml").write_text("[permissions]\ndeny = ['Bash(wget *)']\n")
    (dirs["cfg"] / "policy.toml").write_text("[permissions]\nallow = ['Bash(git status)']\n")
    s = store(dirs)
    assert s.load() == []
    assert texts(s.policy, "deny") == ["Bash(curl *)", "Bash(wget *)"]
    assert [x.layer for x in s.sources()] == ["managed", "managed", "user"]
    assert {(r.rule, r.layer) for r in s.rules()} >= {("Bash(curl *)", "managed"), ("Bash(git status)", "user")}


def test_managed_file_must_not_be_writable_by_others(dirs):
    f = dirs["managed"] / "policy.toml"
    f.write_text("[permissions]\ndeny = ['Bash(curl *)']\n")
    os.chmod(f, 0o666)
    s = store(dirs)
    s.load()
    assert texts(s.policy, "deny") == []
    # never silently skipped (was only a warning): an error, and the policy locks until it is fixed
    assert any("writable" in e for e in s.errors) and s.policy.locked and "writable" in s.policy.locked
    assert not s.sources()[0].loaded


def test_managed_file_must_be_owned_by_a_trusted_uid(dirs):
    (dirs["managed"] / "policy.toml").write_text("[permissions]\ndeny = ['Bash(curl *)']\n")
    s = store(dirs, trusted_uids=(12345,))
    s.load()
    assert texts(s.policy, "deny") == []
    assert any("not owned by root" in e for e in s.errors) and s.policy.locked


def test_reload_with_a_broken_file_keeps_the_last_good_policy(dirs):
    f = dirs["cfg"] / "policy.toml"
    f.write_text("[permissions]\ndeny = ['Bash(curl *)']\n")
    s = store(dirs)
    assert s.load() == []
    f.write_text("[permissions]\ndeny = ['Bash(curl *']\n")
    os.utime(f, ns=(1, 1))
    errors = s.load()
    assert errors and "policy.toml:2" in errors[0]
    assert texts(s.policy, "deny") == ["Bash(curl *)"]  # last good still in force
    assert s.errors == errors
    assert not next(x for x in s.sources() if x.layer == "user").loaded
    f.write_text("[permissions]\ndeny = ['Bash(wget *)']\n")
    os.utime(f, ns=(2, 2))
    assert s.load() == []
    assert texts(s.policy, "deny") == ["Bash(wget *)"]


def test_project_layer_and_trust(dirs):
    ws = dirs["ws"]
    (ws / ".nexus").mkdir()
    (ws / ".nexus" / "policy.toml").write_text("[permissions]\nallow = ['Bash(make)']\ndeny = ['Bash(rm *)']\n")
    s = store(dirs)
    s.load()
    pol = s.policy_for(str(ws))
    assert pol.trust == "unknown" and pol.workspace == str(ws)
    assert "Bash(rm *)" in texts(pol, "deny")
    s.trust("add", str(ws))
    assert s.policy_for(str(ws)).trust == "trusted"
    assert s.trusted() == [os.path.realpath(ws)]
    s.trust("remove", str(ws))
    assert s.policy_for(str(ws)).trust == "untrusted"
    # no project policy there and nobody said: the global policy's rules, marked for the new-session question
    home = str(dirs["home"])
    new = s.policy_for(home)
    assert new.trust == "new" and new.workspace == home and new.rules is s.policy.rules
    assert s.policy_for(home) is new  # cached
    s.trust("remove", home)
    assert s.policy_for(home) is s.policy  # distrusted: the global policy itself, no question
    s.trust("add", home)
    assert s.policy_for(home) is s.policy


def test_the_new_session_question_is_the_persons_setting(dirs):
    (dirs["ws"] / ".nexus").mkdir()
    (dirs["ws"] / ".nexus" / "policy.toml").write_text("[trust]\nask_new_sessions = true\n")
    s = store(dirs)
    (s.config_dir / "policy.toml").write_text("[trust]\nask_new_sessions = false\n")
    assert not s.load()
    assert s.policy.ask_new_sessions is False and s.policy_for(str(dirs["home"])) is s.policy
    assert s.policy_for(str(dirs["ws"])).ask_new_sessions is False  # a project cannot turn it back on
    assert any("[trust] is ignored in a project" in w for w in s.policy_for(str(dirs["ws"])).warnings)
    (s.config_dir / "policy.toml").write_text("[trust]\nask_new_sessions = 1\nother = 2\n")
    errors = s.load()
    assert any("trust.ask_new_sessions must be true or false" in e for e in errors)
    assert any("unknown key(s) other" in e for e in errors)


def test_learn_persists_and_keeps_comments(dirs):
    s = store(dirs)
    s.load()
    s.learn("allow", ["Bash(npm run test *)"])
    path = dirs["state"] / "learned.toml"
    text = path.read_text()
    path.write_text(text.replace("[permissions]", "# my note\n[permissions]"))
    s.learn("deny", ["Bash(curl *)"])
    assert "# my note" in path.read_text()
    doc = tomlkit.parse(path.read_text())
    assert doc["permissions"]["allow"] == ["Bash(npm run test *)"]
    assert doc["permissions"]["deny"] == ["Bash(curl *)"]
    assert "Bash(npm run test *)" in texts(s.policy, "allow")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert [r.origin.split(":")[0] for r in s.rules() if r.layer == "learned"] == [str(path)] * 2


@pytest.mark.parametrize(
    "rule", ["Bash(python *)", "Bash(npm run *)", "Bash", "Bash(git *)", "Bash(rm -rf /)", "Bash(bad", "Edit(//**)"]
)
def test_learn_refuses(dirs, rule):
    s = store(dirs)
    s.load()
    with pytest.raises(ValueError):
        s.learn("allow", ["Bash(git status)", rule])
    assert not (dirs["state"] / "learned.toml").exists()  # nothing written: all or nothing


def test_learn_refuses_safety_verdicts(dirs):
    s = store(dirs)
    v = Verdict("ask", "x", "safety", flags=["catastrophic"])
    with pytest.raises(ValueError):
        s.learn("allow", ["Bash(ls)"], verdict=v)


def test_blanket_deny_may_be_learned(dirs):
    s = store(dirs)
    s.learn("deny", ["Bash(python *)"])
    assert "Bash(python *)" in texts(s.policy, "deny")


def test_learn_trust_pseudo_rule(dirs):
    s = store(dirs)
    s.learn("allow", [f"Trust({dirs['ws']})"])
    assert s.trusted() == [str(dirs["ws"])]


def test_change_rule(dirs):
    s = store(dirs)
    s.change_rule("add", "ask", "Bash(git push *)")
    assert texts(s.policy, "ask") == ["Bash(git push *)"]
    s.change_rule("remove", "ask", "Bash(git push *)")
    assert texts(s.policy, "ask") == []
    with pytest.raises(ValueError):
        s.change_rule("remove", "ask", "Bash(git push *)")
    with pytest.raises(ValueError):
        s.change_rule("add", "allow", "Bash(sudo *)")


def test_claude_settings_import(dirs):
    (dirs["cfg"] / "policy.toml").write_text("[claude]\nimport_settings = true\n")
    (dirs["home"] / ".claude").mkdir()
    (dirs["home"] / ".claude" / "settings.json").write_text('{"permissions": {"deny": ["Bash(curl *)"]}}')
    managed = dirs["managed"] / "claude-managed.json"
    managed.write_text('{"permissions": {"deny": ["Bash(wget *)"]}}')
    (dirs["ws"] / ".claude").mkdir()
    (dirs["ws"] / ".claude" / "settings.local.json").write_text('{"permissions": {"ask": ["Bash(make *)"]}}')
    s = store(dirs, claude_managed=str(managed))
    assert s.load() == []
    assert set(texts(s.policy, "deny")) == {"Bash(curl *)", "Bash(wget *)"}
    assert texts(s.policy_for(str(dirs["ws"])), "ask") == ["Bash(make *)"]


def test_corrupt_learned_and_trust_files_are_refused_by_name_and_left_alone(tmp_path):
    """A hand-broken learned.toml or trust.toml is never rewritten (the person's edits would be lost):
    learning and trust changes are refused naming the file, and the workspace counts as untrusted."""
    from nexusd.policy.store import PolicyStore

    state = tmp_path / "state"
    state.mkdir()
    (state / "learned.toml").write_text("[permissions\nallow = [")
    (state / "trust.toml").write_text("trusted = [ 'x'")
    store = PolicyStore(config_dir=tmp_path / "cfg", state_dir=state, managed_dir=tmp_path / "m")
    assert any("learned.toml" in e for e in store.load())
    for act in (
        lambda: store.learn("allow", ["Bash(npm run test *)"]),
        lambda: store.change_rule("add", "allow", "Bash(make test)"),
        lambda: store.trust("add", str(tmp_path)),
    ):
        with pytest.raises(ValueError, match=r"(learned|trust)\.toml is not valid TOML"):
            act()
    assert (state / "learned.toml").read_text() == "[permissions\nallow = ["
    assert (state / "trust.toml").read_text() == "trusted = [ 'x'"
    assert store.trust_store.state(str(tmp_path)) == "untrusted"


def test_a_named_unix_socket_is_said_to_stay_closed_where_no_supervisor_opens_it(dirs):
    """allow_unix_sockets: on Linux nexusd's supervisor connects exactly those sockets (docs/SANDBOX.md
    "Unix sockets"; tests/sandbox/test_unix_sockets.py), so the load has nothing to warn of; elsewhere they
    stay closed and the load says so by name."""
    from nexusd.policy.loader import unix_sockets_warning

    s = store(dirs)
    (s.config_dir / "policy.toml").write_text('[sandbox.network]\nallow_unix_sockets = ["/run/docker.sock"]\n')
    assert not s.load()
    said = [w for w in s.warnings if "allow_unix_sockets" in w]
    assert len(said) == (0 if sys.platform.startswith("linux") else 1)
    assert unix_sockets_warning(["/x"], "linux") is None
    darwin = unix_sockets_warning(["/run/docker.sock"], "darwin") or ""
    assert "/run/docker.sock" in darwin and "stay CLOSED" in darwin and "allow_all_unix_sockets = true" in darwin
