"""What the API's routers share: the authenticated principal (a FastAPI dependency), the path
parameters, and ``pooled``: an endpoint's store calls run in the API's threads, never on the
event loop (``hub/worker.py``)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from fastapi import Path as PathParam
from fastapi import Request

from ..auth import Principal, Unauthorized
from ..gate import PRINCIPAL

P = ParamSpec("P")
T = TypeVar("T")

Run = Callable[..., Awaitable[Any]]
"""Await ``fn(*args, **kwargs)`` in the API's threads."""

DB = PathParam(description="A database name", pattern=r"^[a-z][a-z0-9_-]{0,63}$")
DOC_ID = PathParam(description="A document id (up to 512 characters)", min_length=1, max_length=512)


async def principal(request: Request) -> Principal:
    """The authenticated person or device: the gate put it in the request's scope."""
    who = request.scope.get(PRINCIPAL)
    if who is None:  # the gate lets no such request through; this is the second lock
        raise Unauthorized("no credential: send 'Authorization: Bearer <token>' or a signed device request")
    return who  # type: ignore[no-any-return]


def pooled(run: Run) -> Callable[[Callable[P, T]], Callable[P, Awaitable[T]]]:
    """A decorator: the endpoint, run by ``run`` (FastAPI reads its signature through ``__wrapped__``)."""

    def wrap(endpoint: Callable[P, T]) -> Callable[P, Awaitable[T]]:
        @functools.wraps(endpoint)
        async def in_pool(*args: P.args, **kwargs: P.kwargs) -> T:
            result: T = await run(endpoint, *args, **kwargs)
            return result

        return in_pool

    return wrap
