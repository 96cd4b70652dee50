"""The daemon shell: listener, connections, pending table, timers, audit. It drives the core; it never decides."""
