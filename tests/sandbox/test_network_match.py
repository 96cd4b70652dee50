"""Domain matching that cannot be fooled, and the ``[sandbox.network]`` settings (pure: no sockets)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from nexusd.core.netpolicy import (
    NetPolicy,
    TargetError,
    decide,
    make_target,
    parse_pattern,
    patterns,
    rules_from,
    split_authority,
)
from nexusd.core.policy.rules import parse_rule
from nexusd.policy.loader import parse_claude_settings
from nexusd.policy.sandbox_settings import merge_settings, parse_sandbox_layer
from nexusd.sandbox.network import has_rule_domains, net_policy, proxy_env

LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.1",
    "2130706433",
    "0x7f000001",
    "0x7f.0.0.1",
    "0177.0.0.1",
    "127.0.0.1.",
    "0177.1",
    "::ffff:127.0.0.1",
    "[::ffff:7f00:1]",
    "user@127.1",
    "user:pw@0x7f.1",
]


@pytest.mark.parametrize("spelling", LOOPBACK_SPELLINGS)
def test_every_ip_spelling_is_one_address(spelling: str) -> None:
    t = make_target(spelling, 80)
    assert (t.host, t.is_ip) == ("127.0.0.1", True)


@pytest.mark.parametrize("spelling", ["ExAmPle.CoM", "example.com.", "user@example.com", "u:p@EXAMPLE.com."])
def test_names_are_folded(spelling: str) -> None:
    assert make_target(spelling, 443).host == "example.com"


def test_idna_becomes_punycode() -> None:
    assert make_target("bücher.de", 443).host == "xn--bcher-kva.de"
    assert parse_pattern("Bücher.DE").matches(make_target("xn--bcher-kva.de", 443))


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "exa mple.com",
        "exa\x00mple.com",
        "a/b",
        "x" * 300,
        "a..b",
        "[::1",
        "1:2:3",
        "exa\r\nmple.com",
        "%00.com",
        "a\\b.com",
    ],
)
def test_malformed_hosts_are_errors(bad: str) -> None:
    with pytest.raises(TargetError):
        make_target(bad, 80)


@pytest.mark.parametrize("port", [0, 65536, -1, True])
def test_bad_ports(port: int) -> None:
    with pytest.raises(TargetError):
        make_target("example.com", port)


def test_authority_forms() -> None:
    assert split_authority("[::1]:8443") == make_target("::1", 8443)
    assert split_authority("Example.com:443").host == "example.com"
    assert split_authority("user@example.com:443").host == "example.com"
    assert split_authority("example.com", 80).port == 80
    for bad in ("example.com", "example.com:", "example.com:8x", "::1:443", "[::1]x:1", "example.com:123456"):
        with pytest.raises(TargetError):
            split_authority(bad)


def test_wildcards_never_match_ips_or_the_apex_or_lookalikes() -> None:
    pol = NetPolicy(allowed=patterns(["*.example.com"]))
    assert decide(make_target("api.example.com", 443), pol).decision == "allow"
    assert decide(make_target("a.b.example.com", 443), pol).decision == "allow"
    for other in ("example.com", "example.com.evil.io", "evilexample.com", "api.example.com.evil.io"):
        assert decide(make_target(other, 443), pol).decision == "ask", other
    with pytest.raises(ValueError):
        parse_pattern("*.0.0.1")  # a wildcard cannot name addresses
    ip_pol = NetPolicy(allowed=patterns(["127.0.0.1"]))
    assert decide(make_target("0x7f.1", 443), ip_pol).decision == "allow"
    assert decide(make_target("localhost", 443), ip_pol).decision == "ask"  # a name is not its address
    name_pol = NetPolicy(allowed=patterns(["localhost"]))
    assert decide(make_target("127.0.0.1", 443), name_pol).decision == "ask"  # no reverse lookup


def test_deny_beats_allow_and_rules_join() -> None:
    rules = rules_from(
        [
            ("WebFetch(domain:bad.example.com)", "deny", "bad.example.com", "t"),
            ("WebFetch(domain:*.example.com)", "allow", "*.example.com", "t"),
        ]
    )
    pol = NetPolicy(allowed=patterns(["bad.example.com"]), rules=rules)
    assert decide(make_target("bad.example.com", 443), pol).decision == "deny"
    assert decide(make_target("ok.example.com", 443), pol).decision == "allow"
    pol2 = NetPolicy(allowed=patterns(["*.example.com"]), denied=patterns(["evil.example.com"]))
    v = decide(make_target("EVIL.example.com.", 443), pol2)
    assert v.decision == "deny" and "denied domain" in v.reason


def test_other_ports_are_a_separate_decision() -> None:
    pol = NetPolicy(allowed=patterns(["example.com", "local.test:8080"]))
    assert decide(make_target("example.com", 80), pol).decision == "allow"
    v = decide(make_target("example.com", 22), pol)
    assert v.decision == "ask" and "port 22" in v.reason and not v.suggestions
    assert decide(make_target("local.test", 8080), pol).decision == "allow"
    assert decide(make_target("local.test", 8081), pol).decision == "ask"
    assert (
        decide(
            make_target("example.com", 8443), NetPolicy(allowed=patterns(["example.com"]), ports=(80, 443, 8443))
        ).decision
        == "allow"
    )


def test_unknown_is_asked_with_the_exact_host_to_learn() -> None:
    v = decide(make_target("api.github.com", 443), NetPolicy())
    assert v.decision == "ask" and v.suggestions == ("WebFetch(domain:api.github.com)",)


# ---------------------------------------------------------------------- settings


def layer(table: dict, managed: bool = False, path: str = "/etc/p.toml"):
    return parse_sandbox_layer(table, Path(path), managed=managed)


def test_modes_and_the_default() -> None:
    assert merge_settings([]).network() == "isolated"
    assert merge_settings([layer({"network": {"allowed_domains": ["example.com"]}})]).network() == "filtered"
    assert (
        merge_settings([layer({"network": {"allowed_domains": ["example.com"], "mode": "isolated"}})]).network()
        == "isolated"
    )
    assert merge_settings([layer({"network_isolation": False})]).network() == "open"
    assert merge_settings([layer({"network": {"mode": "open"}})]).network() == "open"
    assert merge_settings([]).network(rule_domains=True) == "filtered"


@pytest.mark.parametrize(
    "table, needle",
    [
        ({"network": {"mode": "filterd"}}, "mode"),
        ({"network": {"allowed_domains": "example.com"}}, "allowed_domains"),
        ({"network": {"allowed_domains": ["exa mple.com"]}}, "allowed_domains"),
        ({"network": {"denied_domains": ["*.*.com"]}}, "denied_domains"),
        ({"network": {"allowed_domains": ["*.1.2.3"]}}, "allowed_domains"),
        ({"network": {"http_proxy_port": 70000}}, "http_proxy_port"),
        ({"network": {"socks_proxy_port": "1080"}}, "socks_proxy_port"),
        ({"network": {"allowed_ports": [0]}}, "allowed_ports"),
        ({"network": {"allow_local_binding": "yes"}}, "allow_local_binding"),
        ({"network": {"allowed_domain": ["x.com"]}}, "allowed_domain"),
        ({"network_isolation": True, "network": {"mode": "open"}}, "disagrees"),
        ({"network": {"managed_domains_only": True}}, "managed"),
    ],
)
def test_malformed_values_are_clear_errors(table: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        layer(table)


def test_layering_lists_union_managed_final_and_managed_only() -> None:
    managed = layer(
        {
            "network": {
                "allowed_domains": ["corp.example"],
                "denied_domains": ["evil.example"],
                "managed_domains_only": True,
                "mode": "filtered",
            }
        },
        managed=True,
    )
    user = layer(
        {
            "network": {
                "allowed_domains": ["github.com"],
                "denied_domains": ["x.example"],
                "mode": "open",
                "allowed_ports": [8080],
            }
        }
    )
    s = merge_settings([managed, user])
    assert s.allowed_domains == ("corp.example",)  # managed_domains_only keeps the managed layer's
    assert set(s.denied_domains) == {"evil.example", "x.example"}  # denies are a union
    assert s.network() == "filtered"  # the managed mode is final
    assert s.allowed_ports == (80, 443, 8080)
    s2 = merge_settings([layer({"network": {"allowed_domains": ["a.example"]}}), user])
    assert s2.allowed_domains == ("a.example", "github.com") and s2.network() == "open"


def test_webfetch_rules_join_and_managed_only_drops_user_rules() -> None:
    rules = (
        parse_rule("WebFetch(domain:docs.example.com)", "allow", layer="user"),
        parse_rule("WebFetch(domain:*.bad.example)", "deny", layer="user"),
        parse_rule("WebFetch(domain:corp.example)", "allow", layer="managed"),
    )
    policy = SimpleNamespace(rules=rules, trust="none")
    s = merge_settings([])
    assert has_rule_domains(policy, s)
    pol = net_policy(policy, s)
    assert decide(make_target("docs.example.com", 443), pol).decision == "allow"
    assert decide(make_target("x.bad.example", 443), pol).decision == "deny"
    only = merge_settings([layer({"network": {"managed_domains_only": True}}, managed=True)])
    pol2 = net_policy(policy, only)
    assert decide(make_target("docs.example.com", 443), pol2).decision == "ask"
    assert decide(make_target("corp.example", 443), pol2).decision == "allow"
    assert decide(make_target("x.bad.example", 443), pol2).decision == "deny"  # denies always stay
    sess = net_policy(SimpleNamespace(rules=(), trust="none"), s, session_allow=["WebFetch(domain:s.example)"])
    assert decide(make_target("s.example", 443), sess).decision == "allow"


def test_untrusted_project_allow_rules_do_not_open_domains() -> None:
    rule = parse_rule("WebFetch(domain:exfil.example)", "allow", layer="project")
    object.__setattr__(rule, "project", True)
    assert (
        decide(
            make_target("exfil.example", 443),
            net_policy(SimpleNamespace(rules=(rule,), trust="untrusted"), merge_settings([])),
        ).decision
        == "ask"
    )


def test_claude_settings_sandbox_network_keys_are_mapped(tmp_path: Path) -> None:
    doc = {
        "permissions": {"allow": ["WebFetch(domain:github.com)"]},
        "sandbox": {
            "network": {
                "allowUnixSockets": ["/run/docker.sock"],
                "allowAllUnixSockets": False,
                "allowLocalBinding": True,
                "httpProxyPort": 8888,
                "socksProxyPort": 8889,
            }
        },
    }
    path = tmp_path / "settings.json"
    out = parse_claude_settings(json.dumps(doc), path, layer="claude-user")
    assert not out.errors
    s = merge_settings([parse_sandbox_layer(out.sandbox, path)])
    assert (s.allow_unix_sockets, s.allow_local_binding, s.http_proxy_port, s.socks_proxy_port) == (
        ("/run/docker.sock",),
        True,
        8888,
        8889,
    )
    bad = parse_claude_settings(json.dumps({"sandbox": {"network": {"httpProxyPort": "x"}}}), path, layer="claude-user")
    assert bad.errors and "http_proxy_port" in bad.errors[0]


def test_proxy_env_names_every_client_and_no_proxy_bypass() -> None:
    env = dict(proxy_env(merge_settings([])))
    for name in (
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "PIP_PROXY",
    ):
        assert env[name].startswith(("http://127.0.0.1:", "socks5h://127.0.0.1:")), name
    assert env["NO_PROXY"] == env["no_proxy"] == ""  # an inherited NO_PROXY cannot route around the proxy
    local = dict(proxy_env(merge_settings([layer({"network": {"allow_local_binding": True}})])))
    assert "localhost" in local["NO_PROXY"]


# ---------------------------------------------------------------------- DNS rebinding


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",  # (metadata and link-local addresses are refused even then: tests/test_boundaries_network.py)
        "::1",
        "fd00::1",
        "::ffff:127.0.0.1",
        "192.168.1.1",
        "100.64.0.1",
        "0.0.0.0",
    ],
)
def test_a_public_looking_name_resolving_to_a_private_address_is_refused(address: str) -> None:
    from nexusd.core.netpolicy import private_refusal

    t = make_target("x.attacker.example", 443)
    why = private_refusal(t, ["93.184.216.34", address], patterns(["*.attacker.example"]))
    assert why is not None and "private" in why
    # an exact entry a person listed (an internal host) may resolve privately; local names always may
    assert private_refusal(t, [address], patterns(["x.attacker.example"])) is None
    assert private_refusal(make_target("localhost", 80), [address], ()) is None
    assert private_refusal(make_target("db.internal", 80), [address], ()) is None
    assert private_refusal(t, ["93.184.216.34"], ()) is None
    assert private_refusal(make_target("127.0.0.1", 80), [address], ()) is None  # literals matched as IPs


def test_the_proxy_checks_where_an_allowed_name_points_before_connecting() -> None:
    """The daemon's resolver is replaced by a table here: no DNS server we control is reachable in the
    tests, and the host's /etc/hosts is not ours to edit. Everything after the lookup is the real code."""
    import anyio

    from nexusd.core.netpolicy import private_refusal
    from nexusd.sandbox.proxy import Context, NetworkProxy, Refused

    seen: list[str] = []

    async def main() -> None:
        proxy = NetworkProxy(
            decide=None,
            closed=None,  # type: ignore[arg-type]
            resolved=lambda ctx, t, s, a: seen.append(t.host) or private_refusal(t, a, ()),
        )

        async def fake_resolve(host: str) -> list[str]:
            return {"rebind.example": ["127.0.0.1"]}[host]

        proxy._resolve = fake_resolve  # type: ignore[method-assign]
        ctx = Context(command="curl", cwd="/", workspace="/", session="s")
        with pytest.raises(Refused, match="private"):
            await proxy._connect(make_target("rebind.example", 80), ctx, "http")

    anyio.run(main)
    assert seen == ["rebind.example"]
