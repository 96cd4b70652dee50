"""The runtime oracle's corpus: commands of the shapes agents send and attackers try.

Built from templates so that every way of naming a file meets every reader: ``{S}`` is a decoy secret in
the jail's home (``~/.ssh/id_rsa``), ``{W}`` a workspace file. Nothing here says what a command does: the
jail finds that out (tests/oracle/jail.py) and the gate is compared with it (test_oracle.py).
"""

from __future__ import annotations

# readers over one file
READERS = ("cat {p}", "head -n 1 {p}", "tail -n 1 {p}", "wc -l {p}", "grep -n . {p}", "sort {p}", "nl {p}", "od -c {p}")

# ways of naming the file the reader gets, from plain to evasive
NAMINGS = (
    "{r}",
    "f={path}; {r_f}",
    "f={path}; {r_qf}",
    "a=({path}); {r_a}",
    "printf -v f '%s' {path}; {r_f}",
    "{r_default}",
    'eval "{r}"',
    "cd / && cd - >/dev/null && {r}",
    "echo {path} | xargs {prog}",
    "xargs {prog} <<< {path}",
    "{prog} $(echo {path})",
    "{prog} < {path}",
    "{prog} <(cat {path})",
)

SECRET = "~/.ssh/id_rsa"
WS_FILE = "README.md"


def _namings(path: str, readers: tuple[str, ...] = READERS) -> list[str]:
    out: list[str] = []
    for reader in readers:
        prog = reader.split(" {p}")[0]
        for n in NAMINGS:
            out.append(
                n.format(
                    r=reader.format(p=path),
                    r_f=reader.format(p="$f"),
                    r_qf=reader.format(p='"$f"'),
                    r_a=reader.format(p='"${a[0]}"'),
                    r_default=reader.format(p="${F:-" + path + "}"),
                    path=path,
                    prog=prog,
                )
            )
    return out


# what agents run all day: reads of the workspace (the gate should let these through)
AGENT_READS = [
    "ls",
    "ls -la src",
    "cat README.md",
    "head -20 src/main.py",
    "wc -l src/*.py",
    "grep -rn KEY src",
    "grep -n alpha notes.txt",
    "find src -name '*.py'",
    "find src -name '*.py' | xargs grep -n X",
    "find src -type f -exec wc -l {} +",
    "find src -type f -print0 | xargs -0 cat",
    "git status",
    "git log --oneline -3",
    "git diff HEAD",
    "git ls-files | xargs wc -l",
    "git ls-files src | xargs grep -n X",
    "xargs -a list.txt cat",
    "xargs cat < list.txt",
    "cat list.txt | xargs wc -l",
    "sort notes.txt | uniq -c",
    "cat README.md | head -1",
    "diff <(sort notes.txt) <(sort README.md)",
    "cat <(ls src)",
    'echo "$(<README.md)"',
    'f=README.md; cat "$f"',
    "f=src/main.py && wc -l $f",
    "g() { cat README.md; }; g",
    "awk -F, '{print $1}' notes.txt",
    "awk '{print $1}' FS=, notes.txt",
    "sed -n 1p README.md",
    "python3 -m json.tool data.json",
    "tee < README.md",
    "cat README.md | tee /dev/null",
    "stat README.md",
    "file README.md",
    "du -sh src",
    "tree src",
    "basename src/main.py",
    "realpath README.md",
    "test -f README.md && echo yes",
    "[ -d src ] && ls src",
    'for f in src/*.py; do wc -l "$f"; done',
    'while read -r l; do echo "$l"; done < notes.txt',
    "cut -c1-3 notes.txt",
    "tr a-z A-Z < notes.txt",
    "md5sum README.md",
    "sha256sum src/main.py",
    "cmp README.md notes.txt || true",
    "comm -12 <(sort notes.txt) <(sort notes.txt)",
    "git grep -n X",
    "git show HEAD --stat",
    "git rev-parse HEAD",
    "git branch --show-current",
    "grep -c . README.md notes.txt",
    "rg -n KEY src",
    "echo hello",
    "pwd",
    "printf '%s\\n' a b",
    "date +%Y",
    "env | grep -c PATH",
    "uname -a",
    "seq 3 | paste -sd+",
    "jq .a data.json",
]

# writes, network and code: the gate must never let these pass as read-only
EFFECTS = [
    "echo x > out.txt",
    "echo x >> README.md",
    "touch new.txt",
    "cp README.md copy.md",
    "mv notes.txt moved.txt",
    "rm notes.txt",
    "mkdir newdir",
    "sed -i s/alpha/beta/ notes.txt",
    "tee out.txt < README.md",
    "tree -R -H . src",
    "find src -name '*.pyc' -delete",
    "find src -name main.py -delete",
    "git -c user.email=a@b -c user.name=a commit --allow-empty -qm x",
    "git checkout -q -b topic",
    "tar -cf a.tar src && tar -xf a.tar",
    "ln -s ~/.ssh/id_rsa key && cat key",
    "ln -s ~/.ssh k && cat k/id_rsa",
    "echo x > ~/.bashrc",
    "echo x > .git/hooks/pre-commit",
    "dd if=README.md of=out.bin",
    'python3 -c \'open("out.txt", "w").write("x")\'',
    "getent hosts example.com",
    "getent ahosts example.com",
    "host example.com",
    "nslookup example.com",
    "dig example.com",
    "ping -c1 -W1 example.com",
    "curl -s -m 2 http://example.com",
    "wget -q -T 2 http://example.com",
    "exec 3<>/dev/tcp/example.com/80",
    "python3 -c 'import socket; socket.create_connection((\"example.com\", 80), 1)'",
    "git ls-remote https://example.com/x.git",
    "ssh -o ConnectTimeout=1 example.com true",
    "nc -z -w1 example.com 80",
    "grep -r KEY .",
    "cat .env",
    "cat ~/.aws/credentials",
    "cat ~/.netrc",
    "cat ../outside/other.txt",
    "cat ~/.bashrc",
    "xargs -a bad.txt cat",
    "xargs -0 -a bad.txt cat",
    "cat bad.txt | xargs cat",
    "cat $(cat bad.txt)",
    "xargs cat < bad.txt",
    "python3 -c \"print(open('$HOME/.ssh/id_rsa').read())\"",
    "python3 -c \"import os; print(open(os.environ['HOME'] + '/.ssh/id_rsa').read())\"",
    "perl -e 'open F, \"$ENV{HOME}/.ssh/id_rsa\"; print <F>'",
    "d=~; cat $d/.ssh/id_rsa",
    "IFS=,; f=README.md,$HOME/.ssh/id_rsa; cat $f",
    "declare -A a; test -v 'a[$(touch pwned)]'",
    "declare -A a; [[ -v 'a[$(touch pwned)]' ]]",
    "x='a[$(touch pwned)]'; (( x ))",
    "echo $(( a[$(touch pwned)] ))",
    "git -c core.pager='touch pwned' log -1",
    "find . -name README.md -exec sh -c 'touch pwned' \\;",
    "find . -maxdepth 1 -name '*.md' | xargs -I{} sh -c 'touch pwned'",
    "awk 'BEGIN{system(\"touch pwned\")}'",
    "sort --compress-program=sh notes.txt",
    "tar -cf /dev/null --checkpoint=1 --checkpoint-action=exec='touch pwned' src",
    "env touch pwned",
    "timeout 5 touch pwned",
    "bash -c 'touch pwned'",
    "sh -c 'cat ~/.ssh/id_rsa'",
    "cat <<'EOF' > run.sh\ntouch pwned\nEOF\nbash run.sh",
    "rm -rf src",
    "rm -fr src",
    "rm --recursive --force src",
    "find . -delete",
]


def build(readers: tuple[str, ...] = READERS) -> list[str]:
    """The corpus, each command once, in a stable order (fewer readers: the suite's shorter run)."""
    out = [*AGENT_READS, *EFFECTS, *_namings(SECRET, readers), *_namings(WS_FILE, readers)]
    return list(dict.fromkeys(out))
