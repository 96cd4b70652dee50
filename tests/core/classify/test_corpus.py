"""The adversarial corpus: one row per case — sub-commands, files, requirement and flags expected.

Paths use {ws} (the workspace), {home} and {out} (a directory outside the workspace); {ws}/escape
is a symlink to {out} and {ws}/secret_link a symlink to {out}/secret.txt.
"""

from __future__ import annotations

import pytest

from nexusd.core.model import Flag, Requirement

R, W, D = Requirement.READ_ONLY, Requirement.WORKSPACE_WRITE, Requirement.DANGER_FULL_ACCESS
DYN, UNP, ENV, CAT = Flag.DYNAMIC, Flag.UNPARSEABLE, Flag.DANGEROUS_ENV, Flag.CATASTROPHIC
OUT, PROT, SYM, HID, BG = (
    Flag.OUTSIDE_WORKSPACE,
    Flag.PROTECTED_PATH,
    Flag.SYMLINK_ESCAPE,
    Flag.HIDDEN_CHARS,
    Flag.BACKGROUND,
)
_ = None  # "not checked" for argv / reads / writes

# (command, requirement, flags (exact), argv of every sub-command (in order), reads, writes)
CASES: list[tuple[str, Requirement, set[Flag], list[list[str]] | None, list[str] | None, list[str] | None]] = [
    # --- over-blocking: plain read-only commands stay read-only
    ("ls", R, set(), [["ls"]], [], []),
    ("ls -la src", R, set(), [["ls", "-la", "src"]], ["{ws}/src"], []),
    ("cat README.md", R, set(), [["cat", "README.md"]], ["{ws}/README.md"], []),
    ("head -n 20 src/main.py", R, set(), [["head", "-n", "20", "src/main.py"]], ["{ws}/src/main.py"], []),
    ("tail -n 5 README.md", R, set(), _, ["{ws}/README.md"], []),
    ("wc -l README.md src/main.py", R, set(), _, ["{ws}/README.md", "{ws}/src/main.py"], []),
    ("grep -rn TODO src", R, set(), [["grep", "-rn", "TODO", "src"]], ["{ws}/src"], []),
    ("grep -e foo -e bar README.md", R, set(), _, ["{ws}/README.md"], []),
    ("grep -A 3 foo README.md", R, set(), _, ["{ws}/README.md"], []),
    ("rg -n foo src", R, set(), _, ["{ws}/src"], []),
    ("rg --files", R, set(), [["rg", "--files"]], [], []),
    ("find . -name '*.py'", R, set(), [["find", ".", "-name", "*.py"]], ["{ws}"], []),
    ("find src -type f -newer README.md", R, set(), _, ["{ws}/src"], []),
    ("sed -n '1,20p' README.md", R, set(), [["sed", "-n", "1,20p", "README.md"]], ["{ws}/README.md"], []),
    ("sed 's/a/b/g' README.md", R, set(), _, ["{ws}/README.md"], []),
    ("sed -e 's/a/b/' -e '/x/d' README.md", R, set(), _, ["{ws}/README.md"], []),
    ("sort README.md | uniq -c", R, set(), [["sort", "README.md"], ["uniq", "-c"]], ["{ws}/README.md"], []),
    ("echo hello", R, set(), [["echo", "hello"]], [], []),
    ("pwd && whoami && date", R, set(), [["pwd"], ["whoami"], ["date"]], [], []),
    ("echo $PATH", R, set(), [["echo", "$PATH"]], [], []),
    ("jq .name package.json", R, set(), _, ["{ws}/package.json"], []),
    ("cat README.md | jq .", R, set(), [["cat", "README.md"], ["jq", "."]], _, []),
    ("diff README.md src/main.py", R, set(), _, ["{ws}/README.md", "{ws}/src/main.py"], []),
    ("ls > /dev/null 2>&1", R, set(), [["ls"]], [], []),
    ("git status", R, set(), [["git", "status"]], [], []),
    ("git diff --stat", R, set(), _, [], []),
    ("git log --oneline -20", R, set(), [["git", "log", "--oneline", "-20"]], [], []),
    ("git show HEAD", R, set(), _, [], []),
    ("git branch -a", R, set(), _, [], []),
    ("git --no-pager log -5", R, set(), _, [], []),
    ("git rev-parse --abbrev-ref HEAD", R, set(), _, [], []),
    ("git -C src log", R, set(), _, ["{ws}/src"], []),  # git -C reads the repository there
    ("test -f README.md && echo yes", R, set(), [["test", "-f", "README.md"], ["echo", "yes"]], _, []),
    ("[ -d src ] || echo no", R, set(), _, _, []),
    ("if [ -f README.md ]; then cat README.md; fi", R, set(), _, ["{ws}/README.md"], []),
    ("for f in src/*.py; do wc -l $f; done", D, {DYN}, _, _, []),
    ("cat README.md # rm -rf /", R, set(), [["cat", "README.md"]], _, []),
    ("command -v python", R, set(), [["command", "-v", "python"]], [], []),
    ("set -euo pipefail; ls", R, set(), [["set", "-euo", "pipefail"], ["ls"]], [], []),
    ("cd src && ls", R, set(), [["cd", "src"], ["ls"]], ["{ws}/src"], []),
    ("export FOO=bar", R, set(), [["export", "FOO=bar"]], [], []),
    ("stat -c %s README.md", R, set(), _, ["{ws}/README.md"], []),
    ("du -sh src", R, set(), _, ["{ws}/src"], []),
    ("tree -L 2 src", R, set(), _, ["{ws}/src"], []),
    (
        "git commit -m \"$(cat <<'EOF'\nfix: things\n\nbody\nEOF\n)\"",
        D,
        set(),
        [["git", "commit", "-m", "fix: things\n\nbody"]],
        [],
        [],
    ),
    # --- workspace writes
    ("touch new.txt", W, set(), [["touch", "new.txt"]], [], ["{ws}/new.txt"]),
    ("mkdir -p build/out", W, set(), _, [], ["{ws}/build/out"]),
    ("rm src/main.py", W, set(), _, [], ["{ws}/src/main.py"]),
    ("rm -rf build dist", W, set(), _, [], ["{ws}/build", "{ws}/dist"]),
    ("cp README.md docs.md", W, set(), _, ["{ws}/README.md"], ["{ws}/docs.md"]),
    ("cp -t dest a b", W, set(), _, ["{ws}/a", "{ws}/b"], ["{ws}/dest"]),
    ("mv a.txt b.txt", W, set(), _, ["{ws}/a.txt"], ["{ws}/a.txt", "{ws}/b.txt"]),  # a move reads too
    ("echo hi > out.txt", W, set(), [["echo", "hi"]], [], ["{ws}/out.txt"]),
    ("echo hi >> log.txt", W, set(), _, [], ["{ws}/log.txt"]),
    ("ls &> all.txt", W, set(), _, [], ["{ws}/all.txt"]),
    ("sed -i 's/a/b/' README.md", W, set(), _, ["{ws}/README.md"], ["{ws}/README.md"]),
    ("sed -i.bak 's/a/b/' README.md", W, set(), _, _, ["{ws}/README.md"]),
    ("sort -o sorted.txt README.md", W, set(), _, ["{ws}/README.md"], ["{ws}/sorted.txt"]),
    (
        "echo x | tee a.txt b.txt",
        W,
        set(),
        [["echo", "x"], ["tee", "a.txt", "b.txt"]],
        [],
        ["{ws}/a.txt", "{ws}/b.txt"],
    ),
    ("chmod +x run.sh", W, set(), _, [], ["{ws}/run.sh"]),
    ("ln -s src link2", W, set(), _, ["{ws}/src"], ["{ws}/link2"]),
    ("find . -name '*.pyc' -delete", W, {Flag.HIDDEN_EFFECT}, _, _, ["{ws}"]),
    ("cat < README.md > copy.md", W, set(), _, ["{ws}/README.md"], ["{ws}/copy.md"]),
    ("dd if=README.md of=copy.bin", W, set(), _, ["{ws}/README.md"], ["{ws}/copy.bin"]),
    ("uniq in.txt out.txt", W, set(), _, ["{ws}/in.txt"], ["{ws}/out.txt"]),
    ("touch {a,b}.txt", W, set(), [["touch", "a.txt", "b.txt"]], [], ["{ws}/a.txt", "{ws}/b.txt"]),
    ("cat > notes.md <<'EOF'\nhello $(id)\nEOF", W, set(), [["cat"]], [], ["{ws}/notes.md"]),
    # --- outside the workspace
    ("cat /etc/passwd", R, {OUT}, _, ["/etc/passwd"], []),
    ("cat ~/.ssh/id_rsa", R, {OUT, Flag.SECRET_READ}, _, ["{home}/.ssh/id_rsa"], []),
    ("cat $HOME/.ssh/id_rsa", R, {OUT, Flag.SECRET_READ}, _, ["{home}/.ssh/id_rsa"], []),
    ("cat ../../etc/passwd", R, {OUT}, _, _, []),
    ("cat src/../../outside/secret.txt", R, {OUT}, _, ["{out}/secret.txt"], []),
    ("echo x > /tmp/x", D, {OUT}, _, [], ["/tmp/x"]),
    ("cp README.md /tmp/", D, {OUT}, _, ["{ws}/README.md"], ["/tmp"]),
    ("rm ../other/file", D, {OUT}, _, [], _),
    ("mv README.md ~/Desktop/", D, {OUT}, _, ["{ws}/README.md"], _),
    ("ls ~", R, {OUT}, _, ["{home}"], []),
    ("echo x > ~/notes", D, {OUT}, _, [], ["{home}/notes"]),
    ("cat ~root/.ssh/id_rsa", D, {DYN}, _, [], []),  # another user's home: never allowed by a rule
    ("touch ~bob/x", D, {OUT, DYN}, _, [], []),
    # --- symlink escapes
    ("cat escape/secret.txt", R, {OUT, SYM}, _, ["{out}/secret.txt"], []),
    ("cat secret_link", R, {OUT, SYM}, _, ["{out}/secret.txt"], []),
    ("echo x > escape/new", D, {OUT, SYM}, _, [], ["{out}/new"]),
    ("cat inner_link/main.py", R, set(), _, ["{ws}/src/main.py"], []),
    ("ln -s /etc/passwd pw", W, {OUT}, _, ["/etc/passwd"], ["{ws}/pw"]),
    # --- protected paths
    ("echo x > .git/hooks/pre-commit", D, {PROT}, _, [], ["{ws}/.git/hooks/pre-commit"]),
    ("echo '[core] fsmonitor=x' >> .git/config", D, {PROT}, _, [], ["{ws}/.git/config"]),
    ("cp evil .git/hooks/post-checkout", D, {PROT}, _, _, ["{ws}/.git/hooks/post-checkout"]),
    ("touch .claude/settings.json", D, {PROT}, _, [], _),
    ("mkdir -p .vscode && echo '{}' > .vscode/tasks.json", D, {PROT}, _, _, _),
    ("echo x > .husky/pre-commit", D, {PROT}, _, [], _),
    ("echo 'alias ls=rm' >> ~/.bashrc", D, {PROT, OUT}, _, [], ["{home}/.bashrc"]),
    ("echo x >> ~/.zshrc", D, {PROT, OUT}, _, [], _),
    ("cat key.pub >> ~/.ssh/authorized_keys", D, {PROT, OUT}, _, _, ["{home}/.ssh/authorized_keys"]),
    ("echo 'use flake' > .envrc", D, {PROT}, _, [], _),
    ("sed -i s/x/y/ .GIT/config", D, {PROT}, _, _, _),
    ("touch .gemini/settings.json .codex/config.toml .nexus/policy.toml", D, {PROT}, _, [], _),
    ("cat .git/config", R, set(), _, ["{ws}/.git/config"], []),
    ("rm -rf .*", D, {PROT, OUT, CAT}, _, _, _),
    # --- catastrophic
    ("rm -rf /", D, {CAT, OUT}, [["rm", "-rf", "/"]], [], ["/"]),
    ("rm -rf ~", D, {CAT, OUT}, _, [], ["{home}"]),
    ("rm -rf $HOME", D, {CAT, OUT}, _, [], ["{home}"]),
    ("rm -rf /*", D, {CAT, OUT}, _, _, _),
    ("rm -fr /usr", D, {CAT, OUT}, _, _, _),
    ("rm -r --no-preserve-root /", D, {CAT, OUT}, _, _, _),
    ("sudo rm -rf /etc", D, {CAT, OUT}, [["sudo", "rm", "-rf", "/etc"], ["rm", "-rf", "/etc"]], _, _),
    ("mkfs.ext4 /dev/sda1", D, {CAT}, _, _, _),
    ("dd if=/dev/zero of=/dev/sda bs=1M", D, {CAT, OUT}, _, _, _),
    ("cat image.iso > /dev/sdb", D, {CAT, OUT}, _, _, ["/dev/sdb"]),
    (":(){ :|:& };:", D, {CAT, DYN, BG}, _, _, _),
    ("chmod -R 777 /", D, {CAT, OUT}, _, _, _),
    ("chown -R nobody /etc", D, {CAT, OUT}, _, _, _),
    ("shred -u /dev/nvme0n1", D, {CAT, OUT}, _, _, _),
    ("wipefs -a /dev/sda", D, {CAT}, _, _, _),
    ("find / -delete", D, {CAT, OUT, Flag.HIDDEN_EFFECT}, _, _, _),
    ("timeout 5 rm -rf /", D, {CAT, OUT}, [["rm", "-rf", "/"]], _, _),
    ("bash -c 'rm -rf ~'", D, {CAT, OUT}, [["rm", "-rf", "~"]], _, _),
    # --- compound commands: every part is a sub-command
    ("git status && rm -rf build", W, set(), [["git", "status"], ["rm", "-rf", "build"]], _, _),
    ("git status; curl evil.io", D, set(), [["git", "status"], ["curl", "evil.io"]], _, _),
    ("git status || npm test", D, set(), [["git", "status"], ["npm", "test"]], _, _),
    ("git status | sh", D, {DYN}, [["git", "status"], ["sh"]], _, _),  # sh runs what git prints as code
    ("git log |& tee log.txt", W, set(), [["git", "log"], ["tee", "log.txt"]], _, _),
    ("git status\nrm -rf build", W, set(), [["git", "status"], ["rm", "-rf", "build"]], _, _),
    ("(cd src && ls) ; echo done", R, set(), [["cd", "src"], ["ls"], ["echo", "done"]], _, _),
    ("{ git status; curl x; }", D, set(), [["git", "status"], ["curl", "x"]], _, _),
    ("while true; do curl x; done", D, set(), [["true"], ["curl", "x"]], _, _),
    ("case $x in a) rm -rf build;; esac", W, set(), [["rm", "-rf", "build"]], _, _),
    ("f() { curl x; }; f", D, set(), [["curl", "x"], ["f"]], _, _),
    ("! git diff --quiet", R, set(), [["git", "diff", "--quiet"]], _, _),
    ("git status & curl x", D, {DYN, BG}, [["git", "status"], ["curl", "x"]], _, _),
    ("npm run dev &", D, {DYN, BG}, [["npm", "run", "dev"]], _, _),
    # --- dynamic constructs
    ("echo $(curl evil.io)", D, {DYN}, [["curl", "evil.io"], ["echo", "$(curl evil.io)"]], _, _),
    ("echo `id`", D, {DYN}, [["id"], ["echo", "`id`"]], _, _),
    ('echo "hello $(rm -rf build)"', D, {DYN}, _, _, _),
    # <(cmd) is a pipe named /dev/fd/N: the command inside is judged on its own (curl: danger-full-access)
    ("cat <(curl x)", D, set(), _, _, _),
    ("diff <(ls a) <(ls b)", R, set(), _, _, _),
    ("X=$(curl x) ls", D, {DYN}, _, _, _),
    ("$CMD --version", D, {DYN}, _, _, _),
    ("${EDITOR} file", D, {DYN, ENV} - {ENV}, _, _, _),
    ("$(echo rm) -rf build", W, set(), [["echo", "rm"], ["rm", "-rf", "build"]], _, _),  # $(echo WORD) is WORD
    ('eval "ls"', D, {DYN}, [["ls"], ["eval", "ls"]], _, _),
    ("source ./env.sh", D, {DYN}, _, _, _),
    (". ./env.sh", D, {DYN}, _, _, _),
    ("trap 'rm -rf build' EXIT", D, {DYN}, _, _, _),
    ("alias ls='rm -rf'", D, {DYN}, _, _, _),
    ("cat <<EOF\n$(curl x)\nEOF", D, {DYN}, [["cat"], ["curl", "x"]], _, _),
    ('cat <<< "$(id)"', D, {DYN}, _, _, _),
    ('echo "${x:-$(id)}"', D, {DYN}, _, _, _),
    ("cat $FILE", D, {DYN}, _, _, _),
    ("echo x > $OUT", D, {DYN}, _, _, _),
    ("hash -p /tmp/evil ls; ls", D, {DYN}, _, _, _),
    ('bash -c "$SCRIPT"', D, {DYN}, _, _, _),
    ("echo $((1 + $(id -u)))", D, {DYN}, _, _, _),
    ("coproc curl x", D, {DYN, BG}, _, _, _),
    # --- env prefixes
    ("FOO=bar git status", R, set(), [["git", "status"]], _, _),
    ("LD_PRELOAD=/tmp/x.so ls", R, {ENV}, [["ls"]], _, _),
    ("PATH=/tmp:$PATH ls", R, {ENV}, _, _, _),
    ("GIT_CONFIG_PARAMETERS=\"'core.pager=sh'\" git log", R, {ENV}, _, _, _),
    ("GIT_EXTERNAL_DIFF=/tmp/x git diff", R, {ENV}, _, _, _),
    ("GIT_AUTHOR_NAME=bob git log", R, set(), _, _, _),
    ("BASH_ENV=/tmp/x bash -c ls", R, {ENV}, [["ls"]], _, _),
    ("NODE_OPTIONS='--require /tmp/x.js' node -v", D, {ENV}, _, _, _),
    ("PYTHONPATH=/tmp python -V", D, {ENV}, _, _, _),
    ("DYLD_INSERT_LIBRARIES=x ls", R, {ENV}, _, _, _),
    ("export LD_PRELOAD=/tmp/x.so; ls", R, {ENV}, _, _, _),
    ("PATH=/tmp; ls", R, {ENV}, _, _, _),
    ("IFS=/ ls", R, {ENV}, _, _, _),
    ("env LD_PRELOAD=x ls", R, {ENV}, [["ls"]], _, _),
    ("declare -x PROMPT_COMMAND=id", R, {ENV}, _, _, _),
    # --- wrappers peeled
    ("timeout 10 git status", R, set(), [["git", "status"]], _, _),
    ("timeout -s KILL 10 curl x", D, set(), [["curl", "x"]], _, _),
    ("time git log", R, set(), [["git", "log"]], _, _),
    ("nice -n 10 rm -rf build", W, set(), [["rm", "-rf", "build"]], _, _),
    ("nohup curl x", D, set(), [["curl", "x"]], _, _),
    ("stdbuf -oL grep foo README.md", R, set(), [["grep", "foo", "README.md"]], _, _),
    ("ionice -c 3 ls", R, set(), [["ls"]], _, _),
    ("command curl x", D, set(), [["curl", "x"]], _, _),
    ("builtin echo x", R, set(), [["echo", "x"]], _, _),
    ("exec curl x", D, set(), [["curl", "x"]], _, _),
    ("env -i A=1 curl x", D, set(), [["curl", "x"]], _, _),
    ("env -S 'rm -rf /'", D, {CAT, OUT}, [["rm", "-rf", "/"]], _, _),
    ("xargs rm < list.txt", D, {DYN}, [["rm"]], _, _),  # no list.txt here: the names are unknown
    # git ls-files prints names below the cwd: grep reads the workspace, read-only (issue 35)
    ("git ls-files | xargs -0 grep foo", R, set(), [["git", "ls-files"], ["grep", "foo"]], _, _),
    (
        "find . -name x -exec rm {} \\;",
        D,
        set(),
        [["rm", "{}"], ["find", ".", "-name", "x", "-exec", "rm", "{}", ";"]],
        _,
        _,
    ),
    ("find . -execdir curl x \\;", D, set(), _, _, _),
    ("bash -c 'git status && curl x'", D, set(), [["git", "status"], ["curl", "x"]], _, _),
    ("sh -lc 'ls'", R, set(), [["ls"]], _, _),
    ("bash -e -c 'echo hi > out.txt'", W, set(), [["echo", "hi"]], _, ["{ws}/out.txt"]),
    ('zsh -c "bash -c \'sh -c \\"curl x\\"\'"', D, {UNP}, _, _, _),  # zsh code is not bash
    ("bash script.sh", D, set(), [["bash", "script.sh"]], _, _),
    ("/usr/bin/timeout 5 /bin/rm -rf build", W, set(), [["/bin/rm", "-rf", "build"]], _, _),
    ("sudo -u root ls", D, set(), [["sudo", "-u", "root", "ls"], ["ls"]], _, _),
    ("timeout 5 env FOO=1 nice bash -c 'curl x'", D, set(), [["curl", "x"]], _, _),
    # --- flags that break read-only
    ("sed -n 'w out.txt' README.md", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("sed 's/x/y/w out.txt' README.md", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("sed 's/x/y/e' README.md", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("sed '1e id' README.md", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("sed -f script.sed README.md", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("sed 'r /etc/passwd' README.md", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("find . -exec ls {} +", R, set(), _, _, _),  # a reader handed what find finds below .: read-only
    ("find . -fprint out.txt", W, set(), _, _, ["{ws}/out.txt"]),
    ("sort --compress-program=sh README.md", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("git -c core.pager=id log", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("git --config-env=core.pager=X log", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("git -p log", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("git --exec-path=/tmp status", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("git diff --output=/tmp/x", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("git diff --ext-diff", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("git log -p --textconv", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("git grep -O foo", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("git --git-dir=/tmp/evil/.git log", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("git branch new-feature", D, set(), _, _, _),
    ("git tag -d v1", D, set(), _, _, _),
    ("git config core.pager id", D, {PROT}, _, _, _),  # writes .git/config (core.hooksPath, fsmonitor ...)
    ("git config --get user.name", R, set(), _, _, _),
    ("git config user.name", R, set(), _, _, _),  # one key, no value: a read
    ("git config --global user.email", R, set(), _, _, _),
    ("git config get user.name", R, set(), _, _, _),  # git 2.46 syntax
    ("git config list", R, set(), _, _, _),
    ("git config user.name x", D, {PROT}, _, _, _),  # key and value: a write
    ("git config core.hooksPath=/x", D, {PROT}, _, _, _),  # not a key: never taken for a read
    ("git config --unset user.name", D, {PROT}, _, _, _),
    ("git config set user.name x", D, {PROT}, _, _, _),
    ("git stash", D, set(), _, _, _),
    ("git stash list", R, set(), _, _, _),
    ("git push --force", D, set(), _, _, _),
    ("awk '{print $1}' README.md", R, set(), _, ["{ws}/README.md"], _),  # awk is in the knowledge now
    ("perl -e 'print 1'", D, set(), _, _, _),
    ("python -c 'import os'", D, set(), _, _, _),
    ("node -e 'process.exit()'", D, set(), _, _, _),
    ("rg --pre sh foo", D, {Flag.HIDDEN_EFFECT}, _, _, _),
    ("tree -o out.txt", W, set(), _, _, ["{ws}/out.txt"]),  # the output file is the write it is
    ("date -s '2020-01-01'", D, set(), _, _, _),
    ("date +%s", R, set(), _, _, _),
    # --- danger by nature
    ("curl https://example.com", D, set(), _, _, _),
    ("wget http://x/y", D, {OUT, Flag.SECRET_READ}, _, _, _),  # wget reads ~/.netrc (a credential) and ~/.wgetrc itself
    ("ssh host uptime", D, set(), _, _, _),
    ("scp a host:b", D, set(), _, _, _),
    ("rsync -av . host:/srv", D, set(), _, _, _),
    ("nc -l 4444", D, set(), _, _, _),
    ("npm install", D, set(), _, _, _),
    ("pip install requests", D, set(), _, _, _),
    ("cargo build", D, set(), _, _, _),
    ("make test", D, set(), _, _, _),
    ("docker run --rm -it ubuntu", D, set(), _, _, _),
    ("su -c id", D, set(), _, _, _),
    ("doas ls", D, set(), [["doas", "ls"], ["ls"]], _, _),
    ("kill -9 1234", D, set(), _, _, _),
    ("systemctl stop sshd", D, set(), _, _, _),
    ("some-unknown-tool --flag", D, set(), _, _, _),
    # --- quoting and look-alikes
    ("$'\\x72\\x6d' -rf build", W, set(), [["rm", "-rf", "build"]], _, _),
    ("'r''m' -rf build", W, set(), [["rm", "-rf", "build"]], _, _),
    ('"rm" -rf build', W, set(), [["rm", "-rf", "build"]], _, _),
    ("r\\m -rf build", W, set(), [["rm", "-rf", "build"]], _, _),
    ("echo 'a;b' \"c && d\"", R, set(), [["echo", "a;b", "c && d"]], _, _),
    ("ls\u202e", D, {HID}, _, _, _),
    ("cat README\u200b.md", R, {HID}, _, _, _),
    ("echo \x1b[2J", R, {HID}, _, _, _),
    ("ｒｍ -rf build", D, set(), _, _, _),
    # --- parse errors
    ('echo "unterminated', D, {UNP}, _, _, _),
    ("if true; then", D, {UNP}, _, _, _),
    ("ls )", D, {UNP}, _, _, _),
    ("(((", D, {UNP}, _, _, _),
    ("echo {1..100000}", D, {UNP}, _, _, _),
    ("", R, set(), [], [], []),
]


@pytest.mark.parametrize(("command", "req", "flags", "argvs", "reads", "writes"), CASES, ids=[c[0][:60] for c in CASES])
def test_case(world, command, req, flags, argvs, reads, writes):  # type: ignore[no-untyped-def]
    cls = world.bash(command)
    if argvs is not None:
        assert [list(c.argv) for c in cls.commands] == argvs
    if reads is not None:
        assert sorted(cls.reads) == sorted(world.sub(p) for p in reads)
    if writes is not None:
        assert sorted(cls.writes) == sorted(world.sub(p) for p in writes)
    assert set(cls.flags) == flags, cls.notes
    assert cls.requirement == req, cls.notes
    if flags:
        assert cls.notes  # every flag comes with a reason for people


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 150
