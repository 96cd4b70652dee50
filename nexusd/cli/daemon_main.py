"""``nexusd``: the permission daemon, in the foreground.

Start-up is on the clock (a service manager waits for it): heavy modules load lazily, and the sandbox
probe runs in a thread after the socket is already serving.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click

from nexusd import __version__

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_IN_USE = 3  # another daemon is live on the socket, or the socket's directory is unsafe


def _import_structlog() -> None:
    """Import structlog without its optional rich extras: structlog.dev and structlog.tracebacks import
    rich when it is installed (it is, for the TUI), which is about a third of the daemon's start-up and
    several MB it never uses (issue 21). The block is lifted right after, so a process that imports
    structlog this way (tests run in one) can still import rich itself; console output on a terminal
    keeps its colours, exceptions print as plain tracebacks."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # makes ``import rich`` raise ImportError
    try:
        import structlog  # noqa: F401
    finally:
        if sys.modules.get("rich", 0) is None:
            del sys.modules["rich"]


def configure_logging(level: str) -> None:
    """JSON lines for journald and files; readable console output for a person at a terminal."""
    _import_structlog()
    import structlog

    numeric = logging.getLevelNamesMapping()[level.upper()]
    processors: list[object] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if sys.stderr.isatty():
        processors.append(structlog.dev.ConsoleRenderer())
    else:
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    structlog.configure(
        processors=processors,  # type: ignore[arg-type]
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


def absolute(path: Path) -> Path:
    """``path`` made absolute against the start-up cwd (lexically: a symlinked directory keeps its name;
    the sandbox resolves symlinks itself where it mounts)."""
    return Path(os.path.abspath(os.path.expanduser(path)))


NO_UI_NOTE = (
    "a call no rule settles waits for a person in nexus-tui, nexus-web or `nexusctl pending`; with none of "
    "them open it is denied at once (the agent is told so): start `nexus-tui` in another terminal"
)


def banner(where: str) -> None:
    """What a person starting the daemon must know first (issue 38): asks need a UI open, or are denied at
    once. Plain lines at a terminal; one JSON log line (``event: "asks need a UI"``) for journald and files."""
    if sys.stderr.isatty():
        click.echo(
            f"nexusd {__version__} on {where}\n"
            "  A call no rule settles waits for a person: nexus-tui, nexus-web or `nexusctl pending`.\n"
            "  With none of them open it is DENIED AT ONCE (the agent is told so): run `nexus-tui` now.",
            err=True,
        )
        return
    import structlog

    structlog.get_logger("nexusd").info("asks need a UI", socket=where, note=NO_UI_NOTE)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="nexusd", message="%(prog)s %(version)s")
@click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False),
    help="Socket path (default: NEXUS_SOCKET, else per-user runtime dir).",
)
@click.option(
    "--config-dir",
    type=click.Path(file_okay=False),
    help="Policy directory (default: NEXUS_CONFIG_DIR, else per-user config dir).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    help="State directory: audit log, learned rules (default: NEXUS_STATE_DIR).",
)
@click.option(
    "--pending-timeout",
    type=click.FloatRange(min=0.01),
    default=30.0,
    show_default=True,
    help="Seconds a person has to answer before the request is denied.",
)
@click.option(
    "--max-pending",
    type=click.IntRange(min=1),
    default=16_384,
    show_default=True,
    help="Pending requests allowed in the whole daemon.",
)
@click.option(
    "--max-pending-per-connection",
    type=click.IntRange(min=1),
    default=1_024,
    show_default=True,
    help="Pending requests allowed per connection.",
)
@click.option(
    "--max-line-bytes",
    type=click.IntRange(min=1024, max=1 << 20),
    default=1 << 20,
    show_default=True,
    help="Longest accepted protocol line.",
)
@click.option(
    "--decision-memo",
    type=click.IntRange(min=0, max=1 << 20),
    default=4096,
    show_default=True,
    help="Verdicts of repeated calls kept, each re-checked against the file system before use; 0 turns it off.",
)
@click.option(
    "--decision-workers",
    type=click.IntRange(min=1, max=256),
    default=4,
    show_default=True,
    help="Threads that compute calls' facts (classification, file-system questions, sandbox plans) off the "
    "event loop; a thread stuck on a file system that never answers is replaced.",
)
@click.option(
    "--facts-deadline",
    type=click.FloatRange(min=0.05, max=3600),
    default=10.0,
    show_default=True,
    help="Seconds a call's facts (or its sandbox plan) may take; past it the call is denied, saying why.",
)
@click.option(
    "--max-ui-output",
    type=click.IntRange(min=64 << 10, max=1 << 30),
    default=8 << 20,
    show_default=True,
    help="Unread bytes a subscribed UI may hold while it reads nothing for 5 s (or four times this at once) "
    "before it is dropped; its asks stay pending for other UIs.",
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    help="Close a connection that sent nothing for this many seconds while nothing of its own is pending "
    "(UIs send ping to stay); 0: never.",
)
@click.option(
    "--line-timeout",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Close a connection whose line was begun and not finished within this many seconds; 0: never.",
)
@click.option(
    "--client-log-interval",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="What clients cause (protocol errors, timeouts, refusals) is logged at most once per client per this "
    "many seconds, with a count, and at most 41 lines per interval in all.",
)
@click.option(
    "--audit-export",
    metavar="journald[:SOCKET]|syslog[:SOCKET]",
    help="Also send every audit record to the system journal (native protocol) or to syslog (RFC 5424), "
    "where the user cannot rewrite it.",
)
@click.option(
    "--otel-endpoint",
    metavar="URL",
    help="Also send every audit record (as an OTLP log) and decision counts (the nexusd.decisions metric) to "
    "this OpenTelemetry collector over OTLP/HTTP, e.g. http://127.0.0.1:4318. Off by default.",
)
@click.option(
    "--otel-interval",
    type=click.FloatRange(min=0.1, max=3600),
    default=5.0,
    show_default=True,
    help="Seconds between sends to the OpenTelemetry collector.",
)
@click.option(
    "--watch-policy/--no-watch-policy",
    default=True,
    show_default=True,
    help="Reload when a policy file changes (SIGHUP and `nexusctl reload` always work).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
)
def main(
    socket_path: str | None,
    config_dir: str | None,
    state_dir: str | None,
    pending_timeout: float,
    max_pending: int,
    max_pending_per_connection: int,
    max_line_bytes: int,
    decision_memo: int,
    decision_workers: int,
    facts_deadline: float,
    max_ui_output: int,
    idle_timeout: float,
    line_timeout: float,
    client_log_interval: float,
    audit_export: str | None,
    otel_endpoint: str | None,
    otel_interval: float,
    watch_policy: bool,
    log_level: str,
) -> None:
    """Run the nexusd permission daemon in the foreground until SIGTERM or SIGINT (SIGHUP reloads policy).

    Exit codes: 0 clean stop, 1 error, 2 usage, 3 socket in use by a live daemon or its directory is unsafe.
    """
    from nexusd.daemon.startsignals import StartSignals

    # before the socket is bound: a stop (or reload) asked during start-up is kept for the server's signal loop
    start_signals = StartSignals().install()
    from nexusd import locations

    if audit_export is not None and audit_export.partition(":")[0] not in ("journald", "syslog"):
        raise click.BadParameter("journald, journald:SOCKET, syslog or syslog:SOCKET", param_hint="--audit-export")
    if otel_endpoint is not None:
        from nexusd.daemon.otel import check_endpoint

        try:
            check_endpoint(otel_endpoint)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--otel-endpoint") from None
    configure_logging(log_level)
    import structlog

    log = structlog.get_logger("nexusd")
    # Absolute once, here: the daemon is the only source of its paths, and the sandbox plans it hands
    # to agents (masks, HOME, TMPDIR, the wrapper's files) run in other working directories.
    sock = absolute(locations.socket_path(socket_path))
    cfg = absolute(Path(config_dir) if config_dir else locations.config_dir())
    state = absolute(Path(state_dir) if state_dir else locations.state_dir())
    managed = absolute(locations.MANAGED_POLICY)

    from nexusd.daemon.activation import ActivationError, inherited_listener
    from nexusd.daemon.listener import ListenerError, adopt_socket, bind_socket, raise_nofile_limit
    from nexusd.daemon.notify import Notifier

    soft, _hard = raise_nofile_limit()
    try:
        inherited = inherited_listener()
        bound = adopt_socket(inherited) if inherited is not None else bind_socket(sock)
    except (ListenerError, ActivationError) as e:
        click.echo(f"nexusd: {e}", err=True)
        sys.exit(EXIT_IN_USE)
    try:
        old = os.umask(0o077)
        try:
            state.mkdir(mode=0o700, parents=True, exist_ok=True)
        finally:
            os.umask(old)

        import anyio

        from nexusd.daemon.server import Config, Server
        from nexusd.policy.store import PolicyStore
        from nexusd.sandbox.probe import probe

        protected = tuple(str(d) for d in (cfg, state, sock.parent))
        store = PolicyStore(config_dir=cfg, state_dir=state, managed_dir=managed, protected_dirs=protected)
        config = Config(
            socket_path=sock,
            config_dir=cfg,
            state_dir=state,
            managed_dir=managed,
            pending_timeout=pending_timeout,
            max_pending=max_pending,
            max_pending_per_connection=max_pending_per_connection,
            max_line_bytes=max_line_bytes,
            decision_memo=decision_memo,
            decision_workers=decision_workers,
            facts_deadline=facts_deadline,
            watch_policy=watch_policy,
            max_ui_output=max_ui_output,
            idle_timeout=idle_timeout,
            line_timeout=line_timeout,
            log_interval=client_log_interval,
            audit_export=audit_export,
            otel_endpoint=otel_endpoint,
            otel_interval=otel_interval,
        )
        server = Server(config, store, notifier=Notifier.from_env(), probe_fn=probe, start_signals=start_signals)
        log.debug("starting", nofile=soft, config_dir=str(cfg), state_dir=str(state))
        banner(str(bound.path) if bound.path else "<inherited socket>")
        anyio.run(server.serve, bound)
    except KeyboardInterrupt:
        pass
    except Exception as e:
        log.exception("nexusd failed")
        click.echo(f"nexusd: {type(e).__name__}: {e}", err=True)
        sys.exit(EXIT_ERROR)
    finally:
        bound.release()
    sys.exit(EXIT_OK)


if __name__ == "__main__":
    main()
