"""The library's events in the standard ``logging`` module: logger
``latchkey`` and its children by the Rust module that logs
(``latchkey.primitives.lease.renew``, ...). As every library's logger, it
has a ``NullHandler`` and no other: nothing is printed until the
application configures logging (``logging.basicConfig()``, or a handler
on ``latchkey``).

The extension asks ``_wanted`` which levels are wanted (when a client is
made, and once a second while a client's runtime runs) and forwards only
those events, from a thread of its own (src/observe/log.rs).
"""

import logging

# Below DEBUG: the Rust library's TRACE events (every renewal).
TRACE = 5
logging.addLevelName(TRACE, "TRACE")

logging.getLogger("latchkey").addHandler(logging.NullHandler())

# The extension's ranks: 0 nothing, 1 ERROR, ..., 5 TRACE.
_RANKS = ((5, TRACE), (4, logging.DEBUG), (3, logging.INFO), (2, logging.WARNING), (1, logging.ERROR))


def _wanted() -> int:
    """The most verbose rank any ``latchkey`` logger is enabled for."""
    manager = logging.Logger.manager
    loggers = [logging.getLogger("latchkey")]
    loggers += [
        logger
        for name, logger in list(manager.loggerDict.items())
        if name.startswith("latchkey.") and isinstance(logger, logging.Logger)
    ]
    for rank, level in _RANKS:
        if any(logger.isEnabledFor(level) for logger in loggers):
            return rank
    return 0
