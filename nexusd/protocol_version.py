"""The wire protocol's version, alone in a stdlib-only module.

Both the msgspec wire types (`nexusd.protocol`) and the stdlib-only client conversation
(`nexusd.conversation`, which the hook imports within its start-up budget) need it, and the
wire types must import nothing else of nexusd: so the one fact lives here, below both.
"""

TYPE_CHECKING = False  # typing costs the per-call hook ~2 ms of imports
if TYPE_CHECKING:
    from typing import Final

PROTOCOL_VERSION: "Final" = 1
