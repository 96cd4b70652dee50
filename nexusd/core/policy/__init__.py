"""The policy model as data: rules, modes, the policy object, rule suggestions (pure, like the rest of the core)."""
