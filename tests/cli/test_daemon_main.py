"""``nexusd``'s own options: malformed values are usage errors (exit 2) before anything is bound."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from nexusd.cli.daemon_main import main


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--decision-memo", "-1"], "not in the range"),
        (["--decision-memo", "2000000"], "not in the range"),
        (["--decision-memo", "many"], "not a valid integer"),
        (["--decision-memo"], "requires an argument"),
        (["--pending-timeout", "0"], "not in the range"),
        (["--max-pending", "x"], "not a valid integer"),
    ],
)
def test_malformed_options_are_usage_errors(args, says, tmp_path):
    r = CliRunner().invoke(main, ["--socket", str(tmp_path / "s.sock"), *args])
    assert r.exit_code == 2 and says in r.output, r.output
    assert not (tmp_path / "s.sock").exists()


def test_help_documents_the_memo():
    r = CliRunner().invoke(main, ["--help"])
    assert r.exit_code == 0 and "--decision-memo" in r.output and "0 turns it off" in " ".join(r.output.split())
