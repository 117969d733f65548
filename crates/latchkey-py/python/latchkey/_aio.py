"""The coroutine every asyncio method of latchkey returns.

A real coroutine: nothing is sent to Redis until it runs (an acquire never
awaited takes nothing, and Python warns that it was never awaited);
``asyncio.create_task`` takes it; a task cancelled, by hand or by the
event loop's shutdown, drops the call in Rust, which gives back whatever it
took. ``async with lock.acquire(timeout=1):`` awaits it and enters what it
gives, as redis.asyncio's locks are used.
"""

import asyncio
from typing import Any, Awaitable, Callable, Coroutine, Generator, Optional, TypeVar

_T = TypeVar("_T")


async def _started(start: Callable[[], Awaitable[_T]], turn_first: bool) -> _T:
    # `start` (latchkey._native) begins the Rust call on latchkey's runtime
    # and returns its asyncio future; cancelling that future drops the call.
    if turn_first:
        # A flush: one turn of the loop first, so that the done-callbacks
        # of a future cancelled just now (which start its Rust side's
        # cleanup) have run.
        await asyncio.sleep(0)
    return await start()


class Call(Coroutine[Any, Any, _T]):
    """A latchkey call in asyncio: await it, or ``asyncio.create_task`` it;
    ``async with`` it when it gives a hold (or a listener)."""

    __slots__ = ("_coro", "_entered")

    def __init__(self, start: Callable[[], Awaitable[_T]], qualname: str, turn_first: bool = False) -> None:
        coro: Any = _started(start, turn_first)
        # The name Python's "never awaited" warning and tracebacks show.
        coro.__qualname__ = qualname
        coro.__name__ = qualname.rpartition(".")[2]
        self._coro: Any = coro
        self._entered: Any = None

    def send(self, value: Any) -> Any:
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, _T]:
        return self._coro.__await__()

    async def __aenter__(self) -> _T:
        self._entered = await self._coro
        return await self._entered.__aenter__()  # type: ignore[no-any-return]

    async def __aexit__(self, *exc: Any) -> None:
        await self._entered.__aexit__(*exc)

    def __repr__(self) -> str:
        return f"<latchkey coroutine {self._coro.__qualname__}>"
