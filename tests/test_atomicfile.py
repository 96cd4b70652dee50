"""write_atomic: a crash leaves the old file or the new one; links are replaced, not written through."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

from nexusd.atomicfile import write_atomic


def test_mode_and_content(tmp_path: Path) -> None:
    p = tmp_path / "new" / "x"
    write_atomic(p, "a = 1\n")
    assert p.read_text() == "a = 1\n"
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert stat.S_IMODE(p.parent.stat().st_mode) == 0o700


def test_replaces_a_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "units" / "nexusd.service"
    link.parent.mkdir()
    link.symlink_to(victim)
    write_atomic(link, "unit\n", 0o644)
    assert victim.read_text() == "precious"
    assert not link.is_symlink() and link.read_text() == "unit\n"
    assert stat.S_IMODE(link.stat().st_mode) == 0o644
    assert sorted(q.name for q in link.parent.iterdir()) == ["nexusd.service"]  # no temp file left


def test_kill_9_mid_write_never_tears_the_file(tmp_path: Path) -> None:
    target = tmp_path / "f"
    write_atomic(target, "old\n" * 1000)
    writer = (
        "import sys; from pathlib import Path; from nexusd.atomicfile import write_atomic\n"
        "p = Path(sys.argv[1])\n"
        "while True: write_atomic(p, 'new\\n' * 200000)\n"
    )
    for _ in range(5):
        proc = subprocess.Popen([sys.executable, "-c", writer, str(target)])
        # Let it get well into a write, then kill it without warning.
        try:
            proc.wait(timeout=0.15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        text = target.read_text()
        assert text in ("old\n" * 1000, "new\n" * 200000)
