"""Benchmark harness for ``nexusctl bench`` and ``benchmarks/``.

Not imported by the daemon or any client: it measures them from the outside, over the wire.

- ``stats``: percentiles and summaries (µs), never a timing assertion.
- ``wire``: a lean JSON-lines client for load generation (many requests per connection via ``ref``).
- ``echo``: the bare anyio JSON-lines echo server, the floor every round trip is compared with.
- ``procs``: start a daemon (or the echo server) on a temporary socket; RSS and start-to-ready.
- ``scenarios`` / ``load`` / ``runner`` / ``report``: the ``nexusctl bench`` scenarios and their output.
- ``hook`` / ``mcp`` / ``pending`` / ``startup`` / ``classify``: the standalone benchmarks of issue 8.
- ``burst``: ``nexusctl bench --scenario burst``, agents × asks at once answered by an automatic UI (issue 27).
"""
