from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from nexusd.policy.sandbox_settings import (
    SandboxSettings,
    merge_settings,
    parse_sandbox_layer,
    parse_sandbox_table,
    resolve_sandbox_path,
    sandbox_settings,
)

POLICY = Path("/etc/proj/policy.toml")


def test_defaults_are_sandbox_first_and_fail_closed() -> None:
    """Unsaid: sandbox-first (on, auto-allowed when sandboxed, no network), but only where the sandbox
    works: with no working sandbox the default falls back to gate-only instead of refusing every call."""
    s = parse_sandbox_table({}, POLICY)
    assert s == SandboxSettings()
    assert s.fail_if_unavailable and s.network_isolation and s.enabled and s.auto_allow_bash_if_sandboxed
    assert not s.enabled_set and s.gate_only_when_unavailable()
    on = parse_sandbox_table({"enabled": True}, POLICY)
    assert on.enabled_set and not on.gate_only_when_unavailable()  # said: refuse when unavailable
    off = parse_sandbox_table({"enabled": False}, POLICY)
    assert off.enabled_set and not off.enabled and not off.active_on("linux")
    lax = parse_sandbox_table({"enabled": True, "fail_if_unavailable": False}, POLICY)
    assert lax.gate_only_when_unavailable()


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("/opt/x", "/opt/x"),
        ("//opt/x", "/opt/x"),
        ("~/.cargo", "/home/u/.cargo"),
        ("~", "/home/u"),
        ("./build", "/etc/proj/build"),
        ("../shared", "/etc/shared"),
        ("/a/../b", "/b"),
    ],
)
def test_sandbox_path_semantics(raw: str, want: str) -> None:
    assert resolve_sandbox_path(raw, POLICY, home="/home/u") == want


@pytest.mark.parametrize("raw", ["build", "", "src/*", "a\x00b", "~user/x"])
def test_ambiguous_or_glob_paths_are_errors(raw: str) -> None:
    with pytest.raises(ValueError):
        resolve_sandbox_path(raw, POLICY, home="/home/u")


@pytest.mark.parametrize(
    ("table", "msg"),
    [
        ({"enable": True}, "unknown key(s) enable"),
        ({"enabled": "yes"}, "enabled must be true or false"),
        ({"filesystem": {"allow_writes": []}}, "unknown key(s) allow_writes"),
        ({"filesystem": {"deny_read": "/x"}}, "deny_read must be a list"),
        ({"filesystem": {"deny_read": ["rel"]}}, "sandbox.filesystem.deny_read"),
        ({"excluded_commands": [""]}, "empty rule"),
        ({"network": {"isolated": 1}}, "isolated"),
        ({"network_isolation": True, "network": {"isolated": False}}, "disagree"),
    ],
)
def test_bad_tables_name_the_key(table: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        parse_sandbox_table(table, POLICY)


def test_full_table() -> None:
    s = parse_sandbox_table(
        {
            "enabled": True,
            "auto_allow_bash_if_sandboxed": True,
            "excluded_commands": ["Bash(npm install *)"],
            "network": {"isolated": False},
            "filesystem": {"allow_write": ["./out"], "deny_read": ["~/.ssh"], "deny_write": ["/etc"], "allow_read": []},
        },
        POLICY,
    )
    assert s.enabled and s.auto_allow_bash_if_sandboxed and not s.network_isolation
    assert s.allow_write == ("/etc/proj/out",) and s.deny_write == ("/etc",)
    assert s.excluded_commands == ("Bash(npm install *)",)


def test_merge_unions_lists_and_managed_booleans_are_final() -> None:
    managed = parse_sandbox_layer(
        {"enabled": True, "filesystem": {"deny_read": ["/secrets"]}}, Path("/etc/nexus/policy.toml"), managed=True
    )
    user = parse_sandbox_layer(
        {"network_isolation": False, "filesystem": {"allow_write": ["/data"]}},
        Path("/home/u/.config/nexus/policy.toml"),
    )
    project = parse_sandbox_layer(
        {"enabled": False, "filesystem": {"deny_read": ["./.env"]}}, Path("/w/.nexus/policy.toml")
    )
    s = merge_settings([managed, user, project])
    assert s.enabled is True  # a project cannot switch the managed sandbox off
    assert s.network_isolation is False
    assert s.deny_read == ("/secrets", "/w/.nexus/.env") and s.allow_write == ("/data",)


def test_sandbox_settings_from_policy_layers() -> None:
    pol = SimpleNamespace(sandbox_layers=[({"enabled": True}, "/x/policy.toml")])
    assert sandbox_settings(pol).enabled
    assert sandbox_settings(object()) == SandboxSettings()


def _layer(table: dict, managed: bool = False, path: str = "/etc/proj/policy.toml"):
    return parse_sandbox_layer(table, Path(path), managed=managed, home="/home/u")


def test_enabled_platforms_narrow_where_transparent_sandboxing_applies() -> None:
    s = merge_settings([_layer({"enabled": True, "enabled_platforms": ["linux", "macos"]})])
    assert s.active_on("linux") and s.active_on("macos") and not s.active_on("wsl2")
    # every layer's list must name the platform: a later layer cannot widen a managed one's list
    s = merge_settings(
        [
            _layer({"enabled_platforms": ["macos"]}, managed=True),
            _layer({"enabled": True, "enabled_platforms": ["linux", "macos"]}),
        ]
    )
    assert not s.active_on("linux") and s.active_on("macos")
    assert merge_settings([_layer({"enabled": True})]).active_on("wsl2")  # not set: every platform
    assert not merge_settings([_layer({"enabled": False, "enabled_platforms": ["linux"]})]).active_on("linux")
    only_linux = merge_settings([_layer({"enabled_platforms": ["linux"]})])  # sandbox-first by default
    assert only_linux.active_on("linux") and not only_linux.active_on("macos")


@pytest.mark.parametrize("bad", [["linux", "windows"], "linux", [1]])
def test_enabled_platforms_are_checked(bad) -> None:
    with pytest.raises(ValueError, match="enabled_platforms"):
        _layer({"enabled_platforms": bad})


def test_allow_managed_read_paths_only_keeps_only_the_managed_layers_allow_read() -> None:
    managed = _layer(
        {"filesystem": {"allow_managed_read_paths_only": True, "allow_read": ["/opt/shared"]}}, managed=True
    )
    user = _layer({"filesystem": {"allow_read": ["~/.ssh"]}})
    s = merge_settings([managed, user])
    assert s.allow_managed_read_paths_only and s.allow_read == ("/opt/shared",)
    assert merge_settings([user]).allow_read == ("/home/u/.ssh",)


def test_managed_read_paths_only_stops_the_user_reopening_credentials() -> None:
    from nexusd.policy.sandbox_settings import person_allow_read

    layers = (
        (({"filesystem": {"allow_managed_read_paths_only": True}}), "/etc/nexus/policy.toml", True),
        ({"filesystem": {"allow_read": ["~/.aws"]}}, "/home/u/.config/nexus/policy.toml", False),
    )
    pol = SimpleNamespace(sandbox_layers=layers, workspace=None)
    assert person_allow_read(pol) == ()


def test_unix_socket_keys_live_in_network() -> None:
    s = merge_settings([_layer({"network": {"allow_all_unix_sockets": True, "allow_unix_sockets": ["/run/x.sock"]}})])
    assert s.allow_all_unix_sockets and s.allow_unix_sockets == ("/run/x.sock",)
    with pytest.raises(ValueError, match="unknown key"):
        _layer({"allow_all_unix_sockets": True})
    with pytest.raises(ValueError, match="allow_unix_sockets"):
        _layer({"network": {"allow_unix_sockets": ["relative.sock"]}})
