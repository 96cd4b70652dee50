"""nexus-web: the web inbox, a UI client of nexusd served to a browser (see docs/WEB.md)."""
