"""Running nexusd as a user service: systemd units, the launchd agent, and the installer that writes them."""
