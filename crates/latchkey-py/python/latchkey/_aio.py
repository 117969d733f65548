"""The coroutine every asyncio method of latchkey returns.

A real coroutine: nothing is sent to Redis until it runs (an acquire never
awaited takes nothing, and Python warns that it was never awaited);
``asyncio.create_task`` takes it; a task cancelled, by hand or by the
event loop's shutdown, drops the call in Rust, which gives back whatever it
took. ``async with lock.acquire(timeout=1):`` awaits it and enters what it
gives, as redis.asyncio's locks are used.
"""

import collections.abc


async def _started(start):
    # `start` (latchkey._native) begins the Rust call on latchkey's runtime
    # and returns its asyncio future; cancelling that future drops the call.
    return await start()


class Call(collections.abc.Coroutine):
    """A latchkey call in asyncio: await it, or ``asyncio.create_task`` it;
    ``async with`` it when it gives a hold (or a listener)."""

    __slots__ = ("_coro", "_entered")

    def __init__(self, start, qualname):
        coro = _started(start)
        # The name Python's "never awaited" warning and tracebacks show.
        coro.__qualname__ = qualname
        coro.__name__ = qualname.rpartition(".")[2]
        self._coro = coro
        self._entered = None

    def send(self, value):
        return self._coro.send(value)

    def throw(self, *args):
        return self._coro.throw(*args)

    def close(self):
        self._coro.close()

    def __await__(self):
        return self._coro.__await__()

    async def __aenter__(self):
        self._entered = await self._coro
        return await self._entered.__aenter__()

    async def __aexit__(self, *exc):
        return await self._entered.__aexit__(*exc)

    def __repr__(self):
        return f"<latchkey coroutine {self._coro.__qualname__}>"
