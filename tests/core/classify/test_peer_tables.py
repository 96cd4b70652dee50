"""Peers' public test tables, ported case by case: is the command read-only (allowed in default mode)?

Sources, named per row:
  codex   openai/codex codex-rs/core/src/command_safety/is_safe_command.rs (tests: known_safe_examples,
          git_*, unknown_or_partial, base64_output_options_are_unsafe, ripgrep_rules, bash_lc_*)
  gemini  google-gemini/gemini-cli packages/core/src/utils/shell-utils.test.ts (getCommandRoots,
          hasRedirection, splitCommands cases, read as "may this run without asking")
  issue28 nexusd issue 28 class 7 (over-blocks the peers do not have)

"ro": read-only, no flag that stops the mode from allowing it. "no": not read-only (asked in default mode).
Rows where nexusd deliberately differs carry a ``differs`` note saying why.
"""

from __future__ import annotations

import pytest

from nexusd.core.model import Flag, Requirement

RO, NO = "ro", "no"

ROWS: list[tuple[str, str, str, str]] = [
    # (command, expected, source, differs)
    ("ls", RO, "codex", ""),
    ("git status", RO, "codex", ""),
    ("git branch", RO, "codex", ""),
    ("git branch --show-current", RO, "codex", ""),
    ("base64", RO, "codex", ""),
    ("sed -n 1,5p file.txt", RO, "codex", ""),
    ("nl -nrz Cargo.toml", RO, "codex", ""),
    ("find . -name file.txt", RO, "codex", ""),
    ("numfmt 1000", RO, "codex", ""),
    ("tac Cargo.toml", RO, "codex", ""),
    ("git branch -d feature", NO, "codex", ""),
    ("git branch new-branch", NO, "codex", ""),
    ("git -C . branch --show-current", RO, "codex", ""),
    ("git -C . branch -d feature", NO, "codex", ""),
    ("bash -lc 'git -C . branch -d feature'", NO, "codex", ""),
    ("git checkout status", NO, "codex", ""),
    ("git log --output=/tmp/git-log-out-test -n 1", NO, "codex", ""),
    ("git diff --output /tmp/git-diff-out-test", NO, "codex", ""),
    ("git show --output=/tmp/git-show-out-test HEAD", NO, "codex", ""),
    ("git -c core.pager=cat log -n 1", RO, "codex", "nexusd lets a fixed list of output-only -c settings through"),
    ("git -ccore.pager=cat status", NO, "codex", ""),
    ("cargo check", NO, "codex", ""),
    ("zsh -lc ls", RO, "codex", ""),
    ("foo", NO, "codex", ""),
    ("git fetch", NO, "codex", ""),
    ("sed -n xp file.txt", RO, "codex", "x then p: nexusd reads xp as two inert commands (GNU sed refuses it)"),
    ("find . -name file.txt -exec rm {} ';'", NO, "codex", ""),
    ("find . -name '*.py' -execdir python3 {} ';'", NO, "codex", ""),
    ("find . -name file.txt -ok rm {} ';'", NO, "codex", ""),
    ("find . -name '*.py' -okdir python3 {} ';'", NO, "codex", ""),
    ("find . -delete -name file.txt", NO, "codex", ""),
    ("find . -fls /etc/passwd", NO, "codex", ""),
    ("find . -fprint /etc/passwd", NO, "codex", ""),
    ("find . -fprint0 /etc/passwd", NO, "codex", ""),
    ("find . -fprintf /root/suid.txt '%#m %u %p\\n'", NO, "codex", ""),
    ("base64 -o out.bin", NO, "codex", ""),
    ("base64 --output out.bin", NO, "codex", ""),
    ("base64 --output=out.bin", NO, "codex", ""),
    ("base64 -ob64.txt", NO, "codex", ""),
    ("rg Cargo.toml -n", RO, "codex", ""),
    ("rg --search-zip files", NO, "codex", ""),
    ("rg -z files", NO, "codex", ""),
    ("rg --pre pwned files", NO, "codex", ""),
    ("rg --pre=pwned files", NO, "codex", ""),
    ("rg --hostname-bin pwned files", NO, "codex", ""),
    ("rg --hostname-bin=pwned files", NO, "codex", ""),
    ("bash -lc ls", RO, "codex", ""),
    ("bash -lc 'ls -1'", RO, "codex", ""),
    ("bash -lc 'git status'", RO, "codex", ""),
    ("bash -lc 'grep -R \"Cargo.toml\" -n'", RO, "codex", ""),
    ("bash -lc 'sed -n 1,5p file.txt'", RO, "codex", ""),
    ("bash -lc 'find . -name file.txt'", RO, "codex", ""),
    ("bash -lc 'grep -R \"Cargo.toml\" -n || true'", RO, "codex", ""),
    ("bash -lc 'ls && pwd'", RO, "codex", ""),
    ("bash -lc \"echo 'hi' ; ls\"", RO, "codex", ""),
    ("bash -lc 'ls | wc -l'", RO, "codex", ""),
    ("bash -lc 'find . -name file.txt -delete'", NO, "codex", ""),
    ("bash -lc 'ls && rm -rf /'", NO, "codex", ""),
    ("bash -lc '(ls)'", RO, "codex", "nexusd parses subshells: (ls) runs ls only, so it stays read-only"),
    ("bash -lc 'ls || (pwd && echo hi)'", RO, "codex", "nexusd parses subshells (see above)"),
    ("bash -lc 'ls > out.txt'", NO, "codex", ""),
    # gemini-cli shell-utils
    ("ls -l", RO, "gemini", ""),
    ("echo $(badCommand --danger)", NO, "gemini", ""),
    ("diff <(ls) <(ls -a)", RO, "gemini", ""),
    ("echo `badCommand --danger`", NO, "gemini", ""),
    ("echo ${foo@P}", NO, "gemini", ""),
    ("echo $(cat secret) > output.txt", NO, "gemini", ""),
    ("cat < input.txt", RO, "gemini", ""),
    ("ls 2> error.log", NO, "gemini", ""),
    ("echo hello > world", NO, "gemini", ""),
    ("echo hello >> world", NO, "gemini", ""),
    ("echo hello | cat", RO, "gemini", ""),
    ('echo "a > b"', RO, "gemini", ""),
    ("ls -l && git status", RO, "gemini", ""),
    ('echo "foo" > >(cat)', NO, "gemini", ""),
    ('cat <<< "hello"', RO, "gemini", ""),
    # issue 28 class 7: read-only commands the knowledge lacked
    ("tr a-z A-Z < README.md", RO, "issue28", ""),
    ("docker ps", RO, "issue28", ""),
    ("docker images", RO, "issue28", ""),
    ("column -t README.md", RO, "issue28", ""),
    ("cat README.md 2>/dev/null", RO, "issue28", ""),
    ("awk '{print $1}' README.md", RO, "issue28", ""),
    ("tar -tzf a.tgz", RO, "issue28", ""),
    ("unzip -l a.zip", RO, "issue28", ""),
    ("docker run alpine", NO, "issue28", ""),
    ("nexusctl status", RO, "issue28", ""),
    ("nexusctl mode bypass", NO, "issue28", ""),
]


def _read_only(cls) -> bool:  # type: ignore[no-untyped-def]
    return (
        cls.requirement is Requirement.READ_ONLY
        and cls.auto_allowable
        and Flag.OUTSIDE_WORKSPACE not in cls.flags
        and Flag.HIDDEN_EFFECT not in cls.flags
    )


@pytest.mark.parametrize(("cmd", "expected", "source", "differs"), ROWS, ids=[f"{r[2]}: {r[0]}"[:80] for r in ROWS])
def test_peer_row(world, cmd: str, expected: str, source: str, differs: str) -> None:  # type: ignore[no-untyped-def]
    cls = world.bash(cmd)
    if differs.startswith("pending:") and _read_only(cls) is not (expected == RO):
        pytest.xfail(differs)
    assert _read_only(cls) is (expected == RO), (cmd, cls.requirement, cls.flags, cls.notes)
