"""The sandbox: capability probe, bubblewrap plans, and the runner behind ``nexusctl run``."""
