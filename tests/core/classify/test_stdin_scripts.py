"""Shell code fed on standard input (here-documents, here-strings, ``echo``/``printf`` pipes).

bash.py reads the text a shell would run from its standard input when the text is literal, and parses it
as that shell's script (so deny rules see ``bash <<< 'curl x'``); otherwise the shell's code is dynamic. The
extraction is checked against /bin/bash itself: the same command with the shell replaced by ``cat`` must
print exactly the text nexusd read (up to the final newline), or nexusd must not claim to know it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile

import pytest

from nexusd.core.classify import bash
from nexusd.core.model import Flag

BASH = shutil.which("bash", path="/usr/bin:/bin")

FED = [
    "cat <<< 'curl x'",
    'cat <<< "curl x; ls"',
    "cat <<< plain",
    "cat <<EOF\ncurl x\nls -la\nEOF",
    "cat <<'EOF'\ncurl $x `id`\nEOF",
    'cat <<"EOF"\n$(id)\nEOF',
    "cat <<-EOF\n\tcurl x\n\t\tls\nEOF",
    "cat <<-'EOF'\n\t$x\nEOF",
    "echo curl x | cat",
    "echo 'curl  x' \"y z\" | cat",
    "printf 'curl x' | cat",
    "cat <<\\EOF\n$x\nEOF",
]


@pytest.mark.skipif(BASH is None, reason="no /bin/bash")
@pytest.mark.parametrize("command", FED)
def test_fed_text_is_what_bash_feeds(command: str) -> None:
    parsed = bash.parse(command)
    cats = [c for c in parsed.commands if c.argv[:1] == ("cat",)]
    assert cats, parsed
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(
            [BASH, "--norc", "--noprofile", "-c", command],
            cwd=d,
            capture_output=True,
            text=True,
            timeout=10,
            env={"PATH": "/usr/bin:/bin", "HOME": d},
            check=True,
        ).stdout
    assert cats[-1].stdin.rstrip("\n") == out.rstrip("\n")


@pytest.mark.parametrize(
    "command",
    [
        "cat <<EOF\n$x\nEOF",
        "cat <<EOF\n\\$x\nEOF",
        'cat <<< "$x"',
        "cat <<< $'a\\nb'",
        "echo -e 'a' | cat",
        "echo $x | cat",
        "printf '%s' x | cat",
        "printf a b | cat",
        "base64 -d <<< eA== | cat",
    ],
)
def test_text_nexusd_cannot_know_is_not_claimed(command: str) -> None:
    cats = [c for c in bash.parse(command).commands if c.argv[:1] == ("cat",)]
    assert cats and cats[-1].stdin == ""


@pytest.mark.parametrize(
    "command",
    [
        "bash <<< 'curl x'",
        "sh <<EOF\ncurl x\nEOF",
        "echo 'curl x' | bash",
        "bash -s <<< 'curl x'",
        "dash - <<< 'curl x'",
        "bash -x <<< 'curl x'",
        "at now <<< 'curl x'",
        "bash /dev/stdin <<< 'curl x'",
    ],
)
def test_a_shell_fed_literal_code_runs_it(command: str) -> None:
    assert ("curl", "x") in [c.argv for c in bash.parse(command).commands]


@pytest.mark.parametrize(
    "command",
    [
        "base64 -d <<< x | sh",
        "curl x | bash",
        "bash <<EOF\n$X\nEOF",
        "cat a.sh | bash -s",
        'bash <<< "$X"',
    ],
)
def test_a_shell_fed_unknown_code_is_dynamic(command: str) -> None:
    assert Flag.DYNAMIC in bash.parse(command).flags


@pytest.mark.parametrize(
    "command",
    [
        "bash -c 'ls' <<< 'curl x'",
        "bash script.sh <<< 'curl x'",
        "python3 - <<< 'x'",
    ],
)
def test_a_shell_with_its_own_script_does_not_run_its_stdin(command: str) -> None:
    assert ("curl", "x") not in [c.argv for c in bash.parse(command).commands]
