"""Verdicts with their traces over the bench corpus and the seeded agent stream, one JSON line each, memo
off then on: run it against two checkouts and compare the files byte for byte (issue 33's "exactly as
strict" check of a refactor of the decision path).

    git archive BASE | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base python benchmarks/verdicts_dump.py /tmp/before.jsonl
    PYTHONPATH=.          python benchmarks/verdicts_dump.py /tmp/after.jsonl
    cmp /tmp/before.jsonl /tmp/after.jsonl

Uses ``gate.begin`` (present before and after; it is the pipeline's facts and ruling in one thread).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import msgspec

from nexusd.bench import agent, procs, scenarios
from nexusd.core.model import Session
from nexusd.policy import gate
from nexusd.policy.memo import DecisionMemo
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo


def main(path: str) -> int:
    root = Path(tempfile.mkdtemp(prefix="nxv"))
    try:
        for d in ("config", "state", "managed", "workspace"):
            (root / d).mkdir(mode=0o700)
        ws = procs.make_project(root / "workspace")
        agent.populate(ws, agent.DEFAULT_SEED)
        (root / "config" / "policy.toml").write_text(procs.BENCH_POLICY)
        store = PolicyStore(config_dir=root / "config", state_dir=root / "state", managed_dir=root / "managed")
        store.load()
        corpus = scenarios.load_corpus()
        stream = [c for k in range(8) for c in agent.session_calls(agent.DEFAULT_SEED, k, 250, str(ws), corpus)]
        stream += [
            CallInfo(provider="claude", session="corpus", tool="Bash", input={"command": cmd}, cwd=str(ws))
            for cmd in corpus
        ]
        enc = msgspec.json.Encoder()
        with open(path, "wb") as out:
            for memo in (None, DecisionMemo()):
                sessions: dict[str, Session] = {}
                for call in stream:
                    s = sessions.setdefault(
                        call.session, Session(id=call.session, provider=call.provider, agent_mode=call.mode)
                    )
                    try:
                        v = gate.begin(call, store, s, memo=memo).verdict
                        line = enc.encode(v) if v is not None else b'"rounds"'
                    except Exception as e:  # the same failure on both sides is the same answer
                        line = repr(e).encode()
                    out.write(line.replace(str(root).encode(), b"ROOT") + b"\n")
        print(f"{2 * len(stream)} verdicts written to {path}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
