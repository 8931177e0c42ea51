# SPDX-License-Identifier: MIT
"""shmtrace: record spans from Python processes into a shmtrace ring.

The same ring as the C library's (libshmtrace), so one trace shows a request
crossing C and Python processes. Start a collector (or create_ring()), run
with SHMTRACE_RING=<ring>, and::

    import shmtrace

    fid = shmtrace.flow_new()                   # send it along with a request
    with shmtrace.span("handle", cat="rpc", flow=fid):
        handle(request)

    @shmtrace.traced(cat="rpc")                 # sync and async def
    async def fetch(url): ...

Module-level functions use the default tracer (get_default()): the ring named
by SHMTRACE_RING at import, or off. With tracing off every call is a cheap
no-op. shmtrace.open(ring) returns a Tracer for another ring, with the same
methods. Errors are shmtrace.Error (an OSError with errno); records the ring
cannot take are dropped and counted (stats().dropped), never raised. Fork is
handled: a child (os.fork(), multiprocessing's fork, spawn and forkserver)
records under its own pid.
"""
import functools
import inspect

from ._shmtrace import (
    DEFAULT_CATEGORY,
    LIBRARY_VERSION,
    Error,
    Span,
    Stats,
    Tracer,
    counter,
    create_ring,
    flow_new,
    flush,
    get_default,
    instant,
    now,
    open,
    set_default,
    set_process_name,
    set_thread_name,
    span,
    stats,
    unlink_ring,
)

__version__ = LIBRARY_VERSION
__all__ = [
    "DEFAULT_CATEGORY", "Error", "Span", "Stats", "Tracer", "counter", "create_ring",
    "flow_new", "flush", "get_default", "instant", "now", "open", "set_default",
    "set_process_name", "set_thread_name", "span", "stats", "traced", "unlink_ring",
]


def traced(name=None, *, cat=None, flow=None, tracer=None):
    """Decorator: records a span around each call of the function.

        @shmtrace.traced(cat="rpc")
        def handle(req): ...

        @shmtrace.traced("fetch page", cat="http")
        async def fetch(url): ...

    name: the span's name (default: the function's __qualname__); cat, flow:
    as for span(); tracer: a Tracer (default: get_default() at each call, so
    set_default() after decoration is seen). Works bare (@traced) too. For an
    async def the span covers the whole await of the coroutine, suspensions
    included; a generator function's span covers only the call that makes the
    generator. Arguments are checked at decoration time: a bad type raises
    TypeError there, not at each call.
    """
    if callable(name) and cat is None and flow is None and tracer is None:
        return traced()(name)  # bare @traced
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be str or None, not {type(name).__name__}")
    if cat is not None and not isinstance(cat, str):
        raise TypeError(f"cat must be str or None, not {type(cat).__name__}")
    if flow is not None and not isinstance(flow, int):
        raise TypeError(f"flow must be int or None, not {type(flow).__name__}")
    if tracer is not None and not isinstance(tracer, Tracer):
        raise TypeError(f"tracer must be a Tracer or None, not {type(tracer).__name__}")

    def decorate(fn):
        label = name if name is not None else getattr(fn, "__qualname__", repr(fn))
        opener = tracer.span if tracer is not None else span

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                with opener(label, cat, flow):
                    return await fn(*args, **kwargs)
            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with opener(label, cat, flow):
                return fn(*args, **kwargs)
        return wrapper

    return decorate
