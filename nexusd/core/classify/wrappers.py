"""Programs that run another program, as data: how to find the program they wrap.

A wrapper hides the command that really runs (``setsid rm -rf x``), so the shell parser peels it. Each
entry says which options take a value, how many operands come before the wrapped command
(``timeout DURATION cmd``, ``chroot NEWROOT cmd``), which options carry shell *source* (``flock -c``,
``su -c``, ``script -c``), under which options nothing is wrapped (``taskset -p``), and whether the
wrapper joins its arguments into a ``sh -c`` script (``watch``). An option the entry does not know stops
the peeling: the wrapper then stays an unknown program, which fails closed (danger-full-access, deny
rules matched at every argv tail). ``examples`` pair a command with the argv the parser must report
for it (``None``: nothing wrapped is found); tests/core/classify/test_bash_semantics.py runs them all.
"""

from __future__ import annotations

import msgspec


class Wrapper(msgspec.Struct, frozen=True):
    """How one wrapper program's command line is laid out."""

    name: str
    value_opts: frozenset[str] = frozenset()  # options taking a value ("-n" also matches "-n5" and "--x=v")
    flag_opts: frozenset[str] = frozenset()  # options without a value; anything else stops the peeling
    skip: int = 0  # operands before the wrapped command (timeout DURATION, chroot NEWROOT, flock FILE)
    source_opts: frozenset[str] = frozenset()  # options whose value is shell source (flock -c, su -c)
    no_command_opts: frozenset[str] = frozenset()  # with one of these nothing is wrapped (taskset -p)
    joins: bool = False  # joins its arguments with spaces and runs them through ``sh -c`` (watch)
    joins_unless: frozenset[str] = frozenset()  # options that turn joining off (watch -x)
    keep: bool = False  # report the wrapper itself as well (its own options read/write files or need root)
    permute: bool = False  # options may follow operands (util-linux su: ``su root -c cmd``)
    any_flags: bool = False  # every option is a flag unless listed in value_opts (long-option-only tools)
    examples: tuple[tuple[str, tuple[str, ...] | None], ...] = ()


def _f(*names: str) -> frozenset[str]:
    return frozenset(names)


WRAPPERS: dict[str, Wrapper] = {
    w.name: w
    for w in (
        Wrapper(
            "setsid",
            flag_opts=_f("-c", "--ctty", "-f", "--fork", "-w", "--wait"),
            examples=(("setsid -f rm -rf x", ("rm", "-rf", "x")), ("setsid -w ls", ("ls",))),
        ),
        Wrapper(
            "nohup",
            examples=(("nohup rm x", ("rm", "x")), ("nohup -- ls", ("ls",))),
        ),
        Wrapper(
            "nice",
            value_opts=_f("-n", "--adjustment"),
            examples=(("nice -n 5 rm x", ("rm", "x")), ("nice -n5 ls", ("ls",)), ("nice --adjustment=3 ls", ("ls",))),
        ),
        Wrapper(
            "timeout",
            value_opts=_f("-s", "--signal", "-k", "--kill-after"),
            flag_opts=_f("--preserve-status", "--foreground", "-v", "--verbose"),
            skip=1,
            examples=(("timeout 5 rm x", ("rm", "x")), ("timeout -s KILL -k 2 5s ls", ("ls",))),
        ),
        Wrapper(
            "stdbuf",
            value_opts=_f("-i", "-o", "-e", "--input", "--output", "--error"),
            examples=(("stdbuf -oL rm x", ("rm", "x")), ("stdbuf -o 0 ls", ("ls",))),
        ),
        Wrapper(
            "ionice",
            value_opts=_f("-c", "-n", "--class", "--classdata"),
            flag_opts=_f("-t", "--ignore"),
            no_command_opts=_f("-p", "-P", "-u", "--pid", "--pgid", "--uid"),
            examples=(("ionice -c 3 rm x", ("rm", "x")), ("ionice -p 12", None)),
        ),
        Wrapper(
            "taskset",
            flag_opts=_f("-a", "--all-tasks", "-c", "--cpu-list"),
            skip=1,
            no_command_opts=_f("-p", "--pid"),
            examples=(("taskset 0x1 rm x", ("rm", "x")), ("taskset -c 0,1 ls", ("ls",)), ("taskset -p 1 12", None)),
        ),
        Wrapper(
            "chrt",
            value_opts=_f("-T", "-P", "-D", "--sched-runtime", "--sched-period", "--sched-deadline"),
            flag_opts=_f("-b", "-d", "-f", "-i", "-o", "-r", "-R", "-v", "--batch", "--deadline", "--fifo",
                         "--idle", "--other", "--rr", "--reset-on-fork", "--verbose"),
            skip=1,
            no_command_opts=_f("-p", "--pid", "-m", "--max", "-a", "--all-tasks"),
            examples=(("chrt -f 10 rm x", ("rm", "x")), ("chrt 0 ls", ("ls",)), ("chrt -p 12", None)),
        ),
        Wrapper(
            "chronic",
            flag_opts=_f("-e", "-v"),
            examples=(("chronic rm x", ("rm", "x")), ("chronic -ev ls", ("ls",))),
        ),
        Wrapper(
            "unbuffer",
            flag_opts=_f("-p"),
            examples=(("unbuffer rm x", ("rm", "x")), ("unbuffer -p ls", ("ls",))),
        ),
        Wrapper(
            "caffeinate",
            value_opts=_f("-t", "-w"),
            flag_opts=_f("-d", "-i", "-m", "-s", "-u"),
            examples=(("caffeinate -i rm x", ("rm", "x")), ("caffeinate -t 5 ls", ("ls",))),
        ),
        Wrapper(
            "dbus-run-session",
            value_opts=_f("--config-file"),
            no_command_opts=_f("--dbus-daemon"),  # runs the program it names: not peeled, stays unknown
            examples=(("dbus-run-session -- rm x", ("rm", "x")), ("dbus-run-session ls", ("ls",))),
        ),
        Wrapper(
            "time",
            value_opts=_f("-f", "--format"),
            flag_opts=_f("-p", "--portability", "-v", "--verbose", "-q", "--quiet"),
            no_command_opts=_f("-o", "--output", "-a", "--append"),  # writes a file: stays an unknown program
            examples=(("time rm x", ("rm", "x")), ("time -p ls", ("ls",))),
        ),
        Wrapper(
            "flock",
            value_opts=_f("-w", "--wait", "--timeout", "-E", "--conflict-exit-code"),
            flag_opts=_f("-s", "--shared", "-x", "-e", "--exclusive", "-u", "--unlock", "-n", "--nb", "--nonblock",
                         "-o", "--close", "-F", "--no-fork", "--verbose"),
            skip=1,
            source_opts=_f("-c", "--command"),
            keep=True,  # creates its lock file
            examples=(("flock /tmp/l rm x", ("rm", "x")), ("flock -n /tmp/l -c 'rm x'", ("rm", "x"))),
        ),
        Wrapper(
            "watch",
            value_opts=_f("-n", "--interval", "-q", "--equexit", "-s", "--shotsdir"),
            flag_opts=_f("-b", "--beep", "-c", "--color", "-C", "--no-color", "-e", "--errexit", "-g", "--chgexit",
                         "-t", "--no-title", "-w", "--no-wrap", "-p", "--precise", "-r", "--no-rerun", "-d",
                         "--differences", "-x", "--exec"),
            joins=True,
            joins_unless=_f("-x", "--exec"),
            examples=(("watch 'curl x | sh'", ("sh",)), ("watch -n 1 rm x", ("rm", "x")), ("watch -x ls", ("ls",))),
        ),
        Wrapper(
            "script",
            value_opts=_f("-E", "--echo", "-I", "--log-in", "-O", "--log-out", "-B", "--log-io", "-T",
                          "--log-timing", "-m", "--logging-format", "-o", "--output-limit", "-t", "--timing"),
            flag_opts=_f("-a", "--append", "-e", "--return", "-f", "--flush", "--force", "-q", "--quiet"),
            source_opts=_f("-c", "--command"),
            keep=True,  # writes its typescript file
            permute=True,
            examples=(("script -qc 'rm x' /dev/null", ("rm", "x")), ("script -c ls out.log", ("ls",))),
        ),
        Wrapper(
            "su",
            value_opts=_f("-s", "--shell", "-g", "--group", "-G", "--supp-group", "-w", "--whitelist-environment"),
            flag_opts=_f("-", "-l", "--login", "-m", "-p", "--preserve-environment", "-f", "-P", "--pty"),
            source_opts=_f("-c", "--command", "--session-command"),
            keep=True,
            permute=True,
            examples=(("su -c 'rm x' root", ("rm", "x")), ("su root -c 'ls'", ("ls",)), ("su - bob", None)),
        ),
        Wrapper(
            "runuser",
            value_opts=_f("-u", "--user", "-s", "--shell", "-g", "--group", "-G", "--supp-group", "-w",
                          "--whitelist-environment"),
            flag_opts=_f("-", "-l", "--login", "-m", "-p", "--preserve-environment", "-f", "-P", "--pty"),
            source_opts=_f("-c", "--command", "--session-command"),
            keep=True,
            examples=(("runuser -u bob -- rm x", ("rm", "x")), ("runuser -c 'ls' bob", ("ls",))),
        ),
        Wrapper(
            "sudo",
            value_opts=_f("-u", "-g", "-h", "-p", "-C", "-r", "-t", "-U", "-D", "-T", "-R", "--user", "--group",
                          "--host", "--prompt", "--close-from", "--role", "--type", "--other-user", "--chdir",
                          "--command-timeout", "--chroot"),
            flag_opts=_f("-A", "-b", "-E", "-H", "-i", "-k", "-K", "-n", "-P", "-S", "-s", "-B", "--askpass",
                         "--background", "--preserve-env", "--set-home", "--login", "--reset-timestamp",
                         "--remove-timestamp", "--non-interactive", "--preserve-groups", "--stdin", "--shell",
                         "--bell"),
            no_command_opts=_f("-e", "--edit", "-l", "--list", "-v", "--validate", "-V", "--version"),
            keep=True,
            examples=(("sudo -u root rm x", ("rm", "x")), ("sudo -E ls", ("ls",)), ("sudo -e /etc/hosts", None)),
        ),
        Wrapper(
            "doas",
            value_opts=_f("-a", "-C", "-u"),
            flag_opts=_f("-n", "-S", "-s", "-L"),
            keep=True,
            examples=(("doas -u root rm x", ("rm", "x")), ("doas -n ls", ("ls",))),
        ),
        Wrapper(
            "chroot",
            value_opts=_f("--userspec", "--groups"),
            flag_opts=_f("--skip-chdir"),
            skip=1,
            keep=True,
            examples=(("chroot /srv/r rm x", ("rm", "x")), ("chroot --userspec=1:1 /r ls", ("ls",))),
        ),
        Wrapper(
            "unshare",
            value_opts=_f("-S", "--setuid", "-G", "--setgid", "-R", "--root", "-w", "--wd", "--map-user",
                          "--map-group", "--map-users", "--map-groups", "--propagation", "--monotonic",
                          "--boottime", "-l", "--load-interp"),
            any_flags=True,
            keep=True,
            examples=(("unshare -r rm x", ("rm", "x")), ("unshare --map-user=0 -n ls", ("ls",))),
        ),
        Wrapper(
            "nsenter",
            value_opts=_f("-t", "--target", "-S", "--setuid", "-G", "--setgid", "--env"),
            any_flags=True,
            keep=True,
            examples=(("nsenter -t 1 -m rm x", ("rm", "x")), ("nsenter --target=1 -a ls", ("ls",))),
        ),
        Wrapper(
            "firejail",
            any_flags=True,
            examples=(("firejail --net=none rm x", ("rm", "x")), ("firejail --quiet ls", ("ls",))),
        ),
        Wrapper(
            "strace",
            value_opts=_f("-e", "-p", "-s", "-u", "-a", "-b", "-E", "-I", "-O", "-P", "-S", "-X", "-U", "--trace",
                          "--signal", "--status", "--attach", "--string-limit", "--user", "--env", "--columns"),
            any_flags=True,
            no_command_opts=_f("-o", "--output"),  # writes a file: stays an unknown program
            keep=True,
            examples=(("strace -f rm x", ("rm", "x")), ("strace -e trace=open ls", ("ls",))),
        ),
        Wrapper(
            "ltrace",
            value_opts=_f("-e", "-p", "-s", "-u", "-a", "-n", "-A", "-D", "-F", "-x", "-w", "-l", "--library",
                          "--indent", "--align"),
            any_flags=True,
            no_command_opts=_f("-o", "--output"),
            keep=True,
            examples=(("ltrace -f rm x", ("rm", "x")), ("ltrace -e malloc ls", ("ls",))),
        ),
        Wrapper(
            "systemd-run",
            value_opts=_f("-u", "--unit", "-p", "--property", "-E", "--setenv", "-M", "--machine", "--description",
                          "--slice", "--uid", "--gid", "--nice", "--working-directory", "--on-active", "--on-boot",
                          "--on-startup", "--on-unit-active", "--on-unit-inactive", "--on-calendar", "-H", "--host",
                          "--service-type", "--timer-property", "--path-property", "--socket-property"),
            any_flags=True,
            keep=True,
            examples=(("systemd-run --user rm x", ("rm", "x")), ("systemd-run -p Nice=5 ls", ("ls",))),
        ),
        Wrapper(
            "busybox",
            examples=(("busybox rm x", ("rm", "x")), ("busybox sh -c 'ls'", ("ls",)), ("busybox --list", None)),
        ),
        Wrapper("toybox", examples=(("toybox rm x", ("rm", "x")), ("toybox sh -c 'ls'", ("ls",)))),
        Wrapper(
            "pkexec",
            value_opts=_f("--user"),
            flag_opts=_f("--keep-cwd", "--disable-internal-agent"),
            keep=True,
            examples=(("pkexec rm x", ("rm", "x")), ("pkexec --user bob ls", ("ls",))),
        ),
        Wrapper(
            "run0",
            value_opts=_f("-u", "--user", "-g", "--group", "-D", "--chdir", "--setenv", "--nice", "--unit",
                          "--property", "--description", "--slice", "--machine", "--background"),
            any_flags=True,
            keep=True,
            examples=(("run0 rm x", ("rm", "x")), ("run0 -u bob ls", ("ls",))),
        ),
        Wrapper("eatmydata", examples=(("eatmydata rm x", ("rm", "x")),)),
        Wrapper("proxychains", value_opts=_f("-f"), flag_opts=_f("-q"), examples=(("proxychains rm x", ("rm", "x")),)),
        Wrapper(
            "proxychains4", value_opts=_f("-f"), flag_opts=_f("-q"), examples=(("proxychains4 -q rm x", ("rm", "x")),)
        ),
        Wrapper("torsocks", value_opts=_f("-u", "-p", "-a", "-P"), any_flags=True,
                examples=(("torsocks rm x", ("rm", "x")),)),
        Wrapper("tsocks", examples=(("tsocks rm x", ("rm", "x")),)),
        Wrapper(
            "faketime",
            flag_opts=_f("-m", "-f", "--exclude-monotonic", "--date-prog"),
            skip=1,
            examples=(("faketime '2020-01-01' rm x", ("rm", "x")), ("faketime -f +2d ls", ("ls",))),
        ),
        Wrapper(
            "numactl",
            value_opts=_f("-N", "-m", "-C", "-p", "-i", "-P", "-b", "--cpunodebind", "--membind", "--physcpubind",
                          "--preferred", "--interleave", "--preferred-many", "--balancing"),
            flag_opts=_f("-l", "--localalloc", "-a", "--all", "-t", "--touch"),
            no_command_opts=_f("-H", "--hardware", "-s", "--show"),
            examples=(("numactl -N 0 rm x", ("rm", "x")), ("numactl --membind=0 ls", ("ls",))),
        ),
        Wrapper(
            "setarch",
            any_flags=True,
            skip=1,
            examples=(("setarch x86_64 -R rm x", None), ("setarch x86_64 rm x", ("rm", "x"))),
        ),
        Wrapper("linux32", examples=(("linux32 rm x", ("rm", "x")),)),
        Wrapper("linux64", examples=(("linux64 rm x", ("rm", "x")),)),
        Wrapper("dumb-init", flag_opts=_f("-c", "--single-child", "-v", "--verbose"),
                examples=(("dumb-init -- rm x", ("rm", "x")),)),
        Wrapper("tini", value_opts=_f("-p", "-e"), flag_opts=_f("-s", "-g", "-v", "-w", "-l"),
                examples=(("tini -- rm x", ("rm", "x")),)),
        Wrapper("gosu", skip=1, keep=True, examples=(("gosu bob rm x", ("rm", "x")),)),
        Wrapper("su-exec", skip=1, keep=True, examples=(("su-exec bob rm x", ("rm", "x")),)),
        Wrapper(
            "sg",  # sg GROUP [-c] COMMAND: the command is a string run by /bin/sh -c
            flag_opts=_f("-"),
            skip=1,
            source_opts=_f("-c"),
            joins=True,
            keep=True,
            examples=(("sg docker -c 'rm x'", ("rm", "x")), ("sg docker 'rm x'", ("rm", "x"))),
        ),
        Wrapper(
            "xvfb-run",
            value_opts=_f("-e", "--error-file", "-f", "--auth-file", "-n", "--server-num", "-p", "--xauth-protocol",
                          "-s", "--server-args", "-w", "--wait"),
            flag_opts=_f("-a", "--auto-servernum", "-d", "--auto-display"),
            examples=(("xvfb-run -a rm x", ("rm", "x")),),
        ),
        Wrapper("valgrind", any_flags=True, keep=True, examples=(("valgrind --leak-check=full rm x", ("rm", "x")),)),
        Wrapper("catchsegv", examples=(("catchsegv rm x", ("rm", "x")),)),
        Wrapper(
            "prlimit",
            value_opts=_f("-p", "--pid", "-o", "--output"),
            any_flags=True,
            examples=(("prlimit --nofile=1024 rm x", ("rm", "x")),),
        ),
        # program subcommands that run a command in a prepared environment: kept (the program's own work,
        # such as syncing dependencies, is the knowledge's to judge) and peeled (rules see the command)
        Wrapper(
            "uv run",
            value_opts=_f("--with", "--python", "-p", "--project", "--directory", "--package", "--extra",
                          "--group", "--env-file", "--index", "--index-url", "--extra-index-url"),
            flag_opts=_f("--frozen", "--locked", "--no-sync", "--all-extras", "--no-dev", "--isolated", "-q",
                         "--quiet", "-v", "--verbose", "--offline", "--no-project", "--active"),
            keep=True,
            examples=(("uv run rm x", ("rm", "x")), ("uv run --frozen pytest -k a", ("pytest", "-k", "a"))),
        ),
        Wrapper("poetry run", keep=True, examples=(("poetry run rm x", ("rm", "x")),)),
        Wrapper("pipenv run", keep=True, examples=(("pipenv run rm x", ("rm", "x")),)),
        Wrapper("pdm run", keep=True, examples=(("pdm run rm x", ("rm", "x")),)),
        Wrapper("bundle exec", keep=True, examples=(("bundle exec rm x", ("rm", "x")),)),
        Wrapper("pnpm exec", keep=True, examples=(("pnpm exec rm x", ("rm", "x")),)),
        Wrapper("direnv exec", skip=1, keep=True, examples=(("direnv exec . rm x", ("rm", "x")),)),
        Wrapper(
            "conda run",
            value_opts=_f("-n", "--name", "-p", "--prefix", "--cwd"),
            flag_opts=_f("--no-capture-output", "--live-stream", "-v", "--verbose"),
            keep=True,
            examples=(("conda run -n base rm x", ("rm", "x")),),
        ),
        Wrapper(
            "nix-shell",  # nix-shell --run 'cmd' / --command 'cmd': shell source
            value_opts=_f("-p", "--packages", "-A", "--attr", "-I", "--arg", "--argstr"),
            any_flags=True,
            source_opts=_f("--run", "--command"),
            keep=True,
            permute=True,
            examples=(("nix-shell -p hello --run 'rm x'", ("rm", "x")),),
        ),
        Wrapper(
            "npx",  # `npx -c 'cmd'` runs cmd through the npm script shell; plain npx runs a package (the knowledge)
            value_opts=_f("-p", "--package"),
            flag_opts=_f("-y", "--yes", "--no", "-q", "--quiet"),
            source_opts=_f("-c", "--call"),
            keep=True,
            examples=(("npx -c 'rm x'", ("rm", "x")),),
        ),
    )
}

# GNU parallel and xargs are handled by the parser itself (their inputs arrive at run time).
