"""The Hypothesis profile in force is the one HYPOTHESIS_PROFILE names (quick unless it says otherwise), and no
property test is timed: a loaded machine must not fail one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import settings

from tests.conftest import CI_EXAMPLES, QUICK_EXAMPLES, examples


def test_the_profile_asked_for_is_loaded_and_untimed() -> None:
    name = os.environ.get("HYPOTHESIS_PROFILE", "quick")
    assert settings.default.max_examples == settings.get_profile(name).max_examples
    assert settings.default.deadline is None
    assert examples(100) == settings.default.max_examples


def test_the_environment_selects_the_profile() -> None:
    root = Path(__file__).resolve().parent.parent
    code = "import tests.conftest; from hypothesis import settings; print(settings.default.max_examples)"
    counts = {}
    for name in ("quick", "ci"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HYPOTHESIS_PROFILE": name},
        )
        assert out.returncode == 0, out.stderr
        counts[name] = int(out.stdout)
    assert counts == {"quick": QUICK_EXAMPLES, "ci": CI_EXAMPLES}
