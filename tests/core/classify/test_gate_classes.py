"""Issue 35's classes, each in several spellings, through the real gate (store, classifier, engine).

A workspace with a list of workspace files and a list naming a decoy key in the home; narrow allow rules
(``Bash(xargs *)``, ``Bash(cat *)``, ``Bash(grep *)``, ``Bash(find *)``, ``Bash(git *)``) and deny rules
for the home's keys. Where bash decides what a word means, a real bash run shows it first.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nexusd.decision.offline import check_offline
from nexusd.protocol import CallInfo

POLICY = """[permissions]
allow = ["Bash(cat *)", "Bash(xargs *)", "Bash(grep *)", "Bash(find *)", "Bash(git *)", "Bash(echo *)",
         "Bash(head *)", "Bash(wc *)", "Bash(printf *)"]
deny = ["Read(~/.ssh/**)", "Read(~/.aws/**)", "Bash(rm -rf *)", "Bash(git push --force *)", "Bash(rm src/*)",
        "Bash(curl *)"]
"""


@dataclass
class Gate:
    root: Path
    ws: Path
    home: Path

    def decide(self, command: str | tuple[str, dict[str, Any]], mode: str = "default") -> str:
        tool, inp = ("Bash", {"command": command}) if isinstance(command, str) else command
        text = {k: v.replace("@HOME", str(self.home)) if isinstance(v, str) else v for k, v in inp.items()}
        old = os.environ.get("HOME")
        os.environ["HOME"] = str(self.home)
        try:
            v = check_offline(
                CallInfo("claude", "s", tool, text, str(self.ws), mode=mode, workspace=str(self.ws)),
                config_dir=self.root / "cfg",
                state_dir=self.root / "state",
                managed_dir=self.root / "managed",
            )
        finally:
            if old is not None:
                os.environ["HOME"] = old
        return v.decision


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gate]:
    root = Path(os.path.realpath(tmp_path_factory.mktemp("gate35")))
    ws, home = root / "ws", root / "home"
    for d in (ws / "src", home / ".ssh", home / ".aws", root / "cfg", root / "state", root / "managed"):
        d.mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("KEY\n")
    (home / ".aws" / "credentials").write_text("AWS\n")
    (ws / "README.md").write_text("hi\n")
    (ws / "src" / "a.py").write_text("x = 1\n")
    (ws / "list.txt").write_text("README.md\nsrc/a.py\n")
    (ws / "bad.txt").write_text(f"{home}/.ssh/id_rsa\n")
    (ws / "data.json").write_text("{}\n")
    (root / "cfg" / "policy.toml").write_text(POLICY)
    yield Gate(root, ws, home)


NETWORK = [
    "getent hosts example.com",
    "getent ahosts example.com",
    "getent ahostsv4 example.com",
    "getent networks x",
    "getent -s dns passwd x",
    "host example.com",
    "nslookup example.com",
    "dig example.com",
    "drill example.com",
    "ping -c1 example.com",
    "resolvectl query example.com",
    "traceroute example.com",
    "cat < /dev/tcp/example.com/80",  # bash opens a socket for a /dev/tcp redirect
    "head -1 </dev/udp/10.0.0.1/53",
]


@pytest.mark.parametrize("command", NETWORK)
@pytest.mark.parametrize("mode", ["default", "read-only", "plan"])
def test_name_resolution_is_network(gate: Gate, command: str, mode: str) -> None:
    assert gate.decide(command, mode) != "allow"


LIST_FED = [
    "xargs -a bad.txt cat",
    "xargs --arg-file=bad.txt cat",
    "xargs --arg-file bad.txt head -1",
    "xargs -0 -a bad.txt cat",
    "xargs -0a bad.txt cat",
    "xargs -a bad.txt grep -n .",
    "xargs cat <<< @HOME/.ssh/id_rsa",
    "echo @HOME/.ssh/id_rsa | xargs cat",
    "printf '%s\\n' @HOME/.ssh/id_rsa | xargs cat",
    "cat bad.txt | xargs cat",
    "xargs cat < bad.txt",
    "cat $(cat bad.txt)",
    "cat $(<bad.txt)",
    "xargs -I{} cat {} < bad.txt",
]


@pytest.mark.parametrize("command", LIST_FED)
def test_readers_fed_by_a_list_meet_the_deny_rules(gate: Gate, command: str) -> None:
    for mode in ("default", "bypassPermissions"):
        assert gate.decide(command, mode) == "deny", (command, mode)


@pytest.mark.parametrize(
    "command",
    [
        "mystery | xargs cat",  # names we cannot see: asked, never allowed
        "xargs cat",
        "xargs -a ../elsewhere.txt cat",
        "echo @HOME/.ssh/id_rsa > l.txt; xargs -a l.txt cat",  # the list is written by the command itself
    ],
)
def test_unknowable_lists_are_never_allowed(gate: Gate, command: str) -> None:
    assert gate.decide(command) != "allow"


KNOWABLE = [
    'f=@HOME/.ssh/id_rsa; cat "$f"',
    "f=~/.ssh/id_rsa; cat $f",
    "d=~; cat $d/.ssh/id_rsa",
    'a=(README.md @HOME/.ssh/id_rsa); cat "${a[1]}"',
    "printf -v f '%s' @HOME/.ssh/id_rsa; cat \"$f\"",
    "printf -v f @HOME/.ssh/id_rsa; cat $f",
    'cat "${F:-@HOME/.ssh/id_rsa}"',
    "cat ${F:-~/.aws/credentials}",
    "IFS=,; f=README.md,@HOME/.ssh/id_rsa; cat $f",
    "true || f=x; f=@HOME/.ssh/id_rsa; cat $f",
    'eval "cat @HOME/.ssh/id_rsa"',
    "eval cat ~/.ssh/id_rsa",
    "python3 -c \"print(open('@HOME/.ssh/id_rsa').read())\"",
    "python3 -c \"import os; print(open(os.environ['HOME'] + '/.ssh/id_rsa').read())\"",
    "python3 -c \"from pathlib import Path; print((Path.home() / '.ssh' / 'id_rsa').read_text())\"",
    "perl -e 'open F, \"$ENV{HOME}/.ssh/id_rsa\"; print <F>'",
    'ruby -e \'puts File.read(ENV["HOME"] + "/.aws/credentials")\'',
    "node -e \"require('fs').readFileSync(require('os').homedir() + '/.ssh/id_rsa')\"",
    "cat $(echo ~/.ssh/id_rsa)",
]


@pytest.mark.parametrize("command", KNOWABLE)
def test_deny_not_ask_where_the_path_is_knowable(gate: Gate, command: str) -> None:
    assert gate.decide(command) == "deny"


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf src",
        "rm -fr src",
        "rm -r -f src",
        "rm -f -r src",
        "rm --recursive --force src",
        "rm --force --recursive src",
        "rm -Rf src",
        "rm -rfv src",
        "/bin/rm -fr src",
        "git push --force origin main",
        "git push -f origin main",
        "git push origin +main",
        "git push origin +HEAD:main",
        "git push --force-with-lease origin main",
        "git -C . push -f",
        "cd src && rm a.py",
        "cd src; rm a.py",
    ],
)
def test_deny_rules_mean_what_the_command_does(gate: Gate, command: str) -> None:
    for mode in ("default", "bypassPermissions"):
        assert gate.decide(command, mode) == "deny", (command, mode)


def test_plain_spellings_are_not_denied(gate: Gate) -> None:
    for command in ("rm -r src/x", "rm -f x", "git push origin main", "cd src && rm ../README.md"):
        assert gate.decide(command, "bypassPermissions") != "deny", command


EVALUATED = [
    "declare -A a; test -v 'a[$(touch pwned)]'",
    "declare -A a; [[ -v 'a[$(touch pwned)]' ]]",
    "declare -a b; [[ -v 'b[$(touch pwned)]' ]]",
    "declare -A a; printf -v 'a[$(touch pwned)]' x",
    "declare -A a; read 'a[$(touch pwned)]' <<< x",
]


@pytest.mark.parametrize("command", EVALUATED)
def test_bash_evaluation_contexts_run_code(gate: Gate, command: str, tmp_path: Path) -> None:
    """bash itself runs the substitution in each (shown first), so none is allowed, and a denied program in
    it is denied."""
    subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, timeout=30)
    assert (tmp_path / "pwned").exists(), f"bash did not run the code of {command!r}"
    for mode in ("default", "acceptEdits", "bypassPermissions"):
        assert gate.decide(command, mode) != "allow", (command, mode)
    assert gate.decide(command.replace("touch pwned", "curl x")) == "deny"


PROTECTED = [
    ".config/git/config",
    ".yarn/plugins/p.cjs",
    ".yarn/releases/yarn.cjs",
    ".pnp.cjs",
    ".pnp.loader.mjs",
    "bunfig.toml",
    ".bunfig.toml",
    ".bazelrc",
    ".bazelversion",
    ".bazeliskrc",
    "lefthook.yaml",
    ".lefthook.yaml",
    "lefthook.yml",
    ".devcontainer.json",
    "pyrightconfig.json",
    "maven-wrapper.properties",
    ".mcp.json",
    ".ripgreprc",
]


@pytest.mark.parametrize("rel", PROTECTED)
def test_protected_paths_prompt_in_accept_edits(gate: Gate, rel: str) -> None:
    path = str(gate.ws / rel)
    assert gate.decide(("Write", {"file_path": path, "content": "x"}), "acceptEdits") == "ask"
    assert gate.decide(("Edit", {"file_path": path, "old_string": "a", "new_string": "b"}), "acceptEdits") == "ask"
    assert gate.decide(f"echo x > {rel}", "acceptEdits") == "ask"
    assert gate.decide(f"echo x > {rel}", "bypassPermissions") == "ask"


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rmdir /usr",
        "rm -f /etc",
        "rm -d @HOME",
        "rm -rf ~",
        "rmdir ..",
        "rm -r WS",
        "rm -rf .",
        'rm "$D"/*',
        "rm -rf ${DIR}/",
        'echo "$(rm -rf ~)"',
    ],
)
def test_critical_paths_are_never_removed_by_bypass(gate: Gate, command: str) -> None:
    command = command.replace("WS", str(gate.ws))
    assert gate.decide(command, "bypassPermissions") != "allow"


@pytest.mark.parametrize(
    "command",
    [
        "claude mcp add evil -- npx evil",
        "claude mcp add-json evil '{}'",
        "claude config set -g autoUpdates false",
        "gemini mcp add evil npx evil",
        "gemini extensions install https://x/y",
        "codex mcp add evil -- npx evil",
        "cursor-agent mcp login x",
        "opencode auth login",
    ],
)
def test_an_agents_own_cli_changing_its_config_is_gate_management(gate: Gate, command: str) -> None:
    assert gate.decide(command, "bypassPermissions") == "ask"
    assert gate.decide(command, "dontAsk") == "deny"


def test_exit_plan_mode_is_never_approved_by_bypass(gate: Gate) -> None:
    for tool in ("ExitPlanMode", "exit_plan_mode"):
        for mode in ("bypassPermissions", "yolo", "danger-full-access", "allow"):
            assert gate.decide((tool, {"plan": "do it"}), mode) == "ask", (tool, mode)


@pytest.mark.parametrize(
    "command",
    [
        "tree -R -H . src",
        "tree -RH . -L 1",
        "find . -delete",
        "find src -name '*.pyc' -delete",
        "git -c core.pager='sh -c id' log",
        "git -c core.pager=less log",
        "mystery | xargs grep x",
        "mystery | xargs -0 cat",
    ],
)
def test_options_that_turn_a_reader_into_a_runner(gate: Gate, command: str) -> None:
    assert gate.decide(command) != "allow"
    assert gate.decide(command, "acceptEdits") != "allow"


PRECISE = [
    "find . -name '*.py' | xargs grep x",
    "find src -exec wc -l {} +",
    "find src -type f -print0 | xargs -0 cat",
    "git ls-files | xargs wc -l",
    "xargs -a list.txt cat",
    "xargs cat < list.txt",
    "cat list.txt | xargs head -1",
    "echo README.md | xargs cat",
    "cat <(grep -n x README.md)",
    "diff <(sort README.md) <(sort list.txt)",
    'echo "$(<README.md)"',
    'f=README.md; cat "$f"',
    'arr=(README.md src/a.py); cat "${arr[0]}" ${arr[1]}',
    "printf -v f '%s' README.md; cat $f",
    "g() { cat README.md; }; g",
    "tar -xOf x.tar",
    "git apply --check x.patch",
    "echo x | tee",
    "echo x | tee /dev/null",
    "awk '{print $1}' FS=, README.md",
    "unzip -l x.zip",
    "python3 -m json.tool data.json",
    "cat $(echo README.md)",
]


@pytest.mark.parametrize("command", PRECISE)
def test_what_only_reads_is_read_only(gate: Gate, command: str) -> None:
    assert gate.decide(command) == "allow"


def test_assignments_that_may_not_hold_stay_dynamic(gate: Gate) -> None:
    for command in (
        "true || f=README.md; cat $f",  # the assignment may not run: $f comes from the environment
        "f=README.md & cat $f",  # assigned in a background subshell
        "f=README.md; read f; cat $f",
        "f=README.md; f=other; cat $f",
        "cat $f; f=README.md",
        "g() { f=x; }; f=README.md; g; cat $f",
        "f=README.md | cat $f",
        "cat ${F:-README.md}",  # F from the environment
        "echo() { printf %s @HOME/.ssh/id_rsa; }; cat $(echo README.md)",  # echo is a function here
        "cat $(echo -n)",  # an option, not a word
    ):
        assert gate.decide(command) != "allow", command
