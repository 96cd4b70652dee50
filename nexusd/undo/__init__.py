"""Undo for every agent: a checkpoint of the workspace before each call that can change it, reviewable and
reversible (docs/UNDO.md).

- ``shadow``: one shadow git repository per workspace in the daemon's state directory (git's object
  store and index; the workspace is only its work tree), snapshots and diffs;
- ``restore``: rewinding a workspace to a snapshot without ever following a symlink, streaming blobs;
- ``history``: the per-call records (session, agent, tool, summary, checkpoint) and retention;
- ``settings``: ``undo.toml`` in the configuration directory;
- ``service``: the daemon's side: checkpoints off the event loop, the history and rewind queries.
"""
