"""A blocking latchkey call under gevent's monkey-patching: the calling
greenlet waits on an async watcher, which the Rust side sends (from any
thread) when the call is done, so that the hub runs every other greenlet
meanwhile (crates/latchkey-py/src/runtime/green.rs)."""

from typing import Any, Callable


def wait(start: Callable[[Callable[[], None]], None]) -> None:
    from gevent.hub import Waiter, get_hub  # type: ignore

    hub = get_hub()
    watcher: Any = hub.loop.async_()
    waiter = Waiter(hub)
    # Started before the call, so that a send as early as it may come wakes us.
    watcher.start(waiter.switch, None)
    try:
        start(watcher.send)
        waiter.get()
    finally:
        watcher.stop()
        watcher.close()
