"""Loading, persisting and applying policy: the I/O beside the pure engine."""
