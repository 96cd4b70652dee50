"""Write the repository's reviewable copies of the units and the plist: ``python -m nexusd.service.render ROOT``.

The installer renders the same text with the real nexusd path and home; a test keeps these copies equal
to what this module produces, so the files in ``systemd/`` and ``launchd/`` never drift from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

from nexusd.service import launchd, systemd

EXAMPLE_NEXUSD = "/usr/local/bin/nexusd"  # `nexusctl service install` writes the real path instead
EXAMPLE_HOME = Path("/Users/you")  # LaunchAgents cannot expand ~, so the plist holds absolute paths


def repo_files(root: Path) -> dict[Path, str]:
    return {
        root / "systemd" / systemd.SOCKET_NAME: systemd.render_socket(),
        root / "systemd" / systemd.SERVICE_NAME: systemd.render_service(EXAMPLE_NEXUSD),
        root / "launchd" / f"{launchd.LABEL}.plist": launchd.render_plist(EXAMPLE_NEXUSD, EXAMPLE_HOME),
    }


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path.cwd()
    for path, text in repo_files(root).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
