# SPDX-License-Identifier: MIT
"""shmtrace: record spans from Python processes into a shmtrace ring.

The same ring as the C library's (libshmtrace), so one trace shows a request
crossing C and Python processes. Start a collector (or create_ring()), run
with SHMTRACE_RING=<ring>, and::

    import shmtrace

    fid = shmtrace.flow_new()                   # send it along with a request
    with shmtrace.span("handle", cat="rpc", flow=fid) as s:
        s.set("bytes", len(request))            # an argument: int or str
        handle(request)

    with shmtrace.flow(req.flow):               # the current flow: spans and
        handle(request)                         # instants inside default to it

    with shmtrace.span("wait reply", flow=shmtrace.flow_reply(fid)):
        reply = receive()                       # receives and ends the flow

    @shmtrace.traced(cat="rpc", flow=lambda req: req.flow)  # sync and async def
    async def fetch(req): ...

A span is open from the moment its block is entered: a process killed
inside it exports it "unfinished". Module-level functions use the default
tracer (get_default()): the ring named by SHMTRACE_RING at import, or off.
With tracing off every call is a cheap no-op. shmtrace.open(ring) returns a
Tracer for another ring, with the same methods. Errors are shmtrace.Error
(an OSError with errno); records the ring cannot take are dropped and
counted (stats().dropped), never raised. Fork is handled: a child
(os.fork(), multiprocessing's fork, spawn and forkserver) records under its
own pid.
"""
import contextlib
import functools
import inspect

from ._shmtrace import (
    DEFAULT_CATEGORY,
    FLOW_ID_MASK,
    FLOW_RECEIVES,
    FLOW_TERMINATES,
    LIBRARY_VERSION,
    Error,
    Span,
    Stats,
    Tracer,
    counter,
    flow_var as _FLOW,
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
    trigger,
    unlink_ring,
)

__version__ = LIBRARY_VERSION
__all__ = [
    "DEFAULT_CATEGORY", "FLOW_ID_MASK", "FLOW_RECEIVES", "FLOW_TERMINATES", "Error", "Span",
    "Stats", "Tracer", "counter", "create_ring", "current_flow", "flow", "flow_end",
    "flow_id", "flow_new", "flow_recv", "flow_reply", "flush", "get_default", "instant",
    "now", "open", "set_default", "set_process_name", "set_thread_name", "span", "stats",
    "traced", "trigger", "unlink_ring",
]


_FLOW_MAX = 2 ** 64 - 1


def _check_flow(fid):
    """fid, checked as span() checks its flow=."""
    if not isinstance(fid, int):
        raise TypeError(f"flow must be int or None, not {type(fid).__name__}")
    if not 0 <= fid <= _FLOW_MAX:
        raise OverflowError("flow must be in 0..2**64-1")
    return fid


def flow_recv(fid):
    """fid marked for a step that receives: given as flow= to a span, the
    span is placed in its flow by its end, and the arrow arrives there.

        fid = shmtrace.flow_new()
        with shmtrace.span("send", flow=fid):
            send(request, fid)
        with shmtrace.span("wait reply", flow=shmtrace.flow_recv(fid)):
            reply = receive()       # begins before the server handles the
                                    # request, ends after: comes after it

    A step without a role is placed by its start (the step that sends).
    Roles are bits above the id (FLOW_RECEIVES, FLOW_TERMINATES; ids are
    below 2**53): flow_id() takes them off, and they combine with
    flow_end(). 0 (no flow) stays 0. On an instant the role changes
    nothing: its start is its end. The same as the C library's
    shmtrace_flow_recv().
    """
    fid = _check_flow(fid)
    return fid | FLOW_RECEIVES if fid & FLOW_ID_MASK else 0


def flow_end(fid):
    """fid marked for the step that ends its flow: no later step joins
    it, and a later record with the same id begins a new flow (so an id
    may be used again once its flow ended). 0 stays 0; combines with
    flow_recv(). shmtrace_flow_end() in C.
    """
    fid = _check_flow(fid)
    return fid | FLOW_TERMINATES if fid & FLOW_ID_MASK else 0


def flow_reply(fid):
    """flow_end(flow_recv(fid)): the step that gets the reply receives and
    ends the request's flow, as a client's "wait reply" span does."""
    return flow_end(flow_recv(fid))


def flow_id(fid):
    """The flow id of fid, its role (flow_recv(), flow_end()) taken off."""
    return _check_flow(fid) & FLOW_ID_MASK


def current_flow():
    """The current flow id: the one the innermost `with shmtrace.flow(fid)`
    around this point set, 0 outside any. Spans and instants given no flow
    (flow=None) take it.

    It lives in a contextvars.ContextVar, so it follows the code that runs
    on behalf of one request: across `await`, into the asyncio tasks made
    inside the block (each starts with a copy of its creator's context), and
    into what runs under contextvars.copy_context().run(), such as a thread
    started with it. A plain threading.Thread starts without it.
    """
    return _FLOW.get()


class flow:
    """Context manager: makes fid the current flow inside its block.

        with shmtrace.flow(request.flow):          # received with the request
            handle(request)                        # its spans join the flow

        with shmtrace.flow() as fid:               # a new flow: send fid on
            send(request, fid)

    fid: a flow id (int in 0..2**64-1; 0: no flow inside the block); None or
    no argument: a new one, flow_new() of the default tracer (0 when tracing
    is off). __enter__ returns it. Blocks nest; leaving one restores the
    flow of the block around it, also on an exception. See current_flow()
    for where the flow follows. An object may be entered again after it has
    exited, but not while it is active (RuntimeError).
    """
    __slots__ = ("fid", "_token")

    def __init__(self, fid=None):
        self.fid = flow_new() if fid is None else _check_flow(fid)
        self._token = None

    def __enter__(self):
        if self._token is not None:
            raise RuntimeError("this flow block is already active")
        self._token = _FLOW.set(self.fid)
        return self.fid

    def __exit__(self, *exc):
        token, self._token = self._token, None
        _FLOW.reset(token)

    def __repr__(self):
        return f"shmtrace.flow({self.fid})"


_flow_block = flow  # traced()'s parameter flow hides the class
_NO_FLOW = contextlib.nullcontext()


def traced(name=None, *, cat=None, flow=None, tracer=None):
    """Decorator: records a span around each call of the function.

        @shmtrace.traced(cat="rpc")
        def handle(req): ...

        @shmtrace.traced("fetch page", cat="http", flow=lambda url, req: req.flow)
        async def fetch(url, req): ...

    name: the span's name (default: the function's __qualname__); cat: as
    for span(); tracer: a Tracer (default: get_default() at each call, so
    set_default() after decoration is seen). flow: the span's flow, one of
      - None: the current flow (current_flow(), that of the caller);
      - an int: that flow id, for every call;
      - a callable: called with the arguments of each call (the same
        positional and keyword arguments), it returns the call's flow id
        (an int), or None for the current flow.
    A call with a flow id (not None) runs as inside `with shmtrace.flow(fid)`:
    the spans and instants inside it, and the tasks it starts, default to its
    flow. Works bare (@traced) too. For an async def the span covers the
    whole await of the coroutine, suspensions included, and the flow
    callable is called when the coroutine starts; a generator function's
    span covers only the call that makes the generator. Arguments are
    checked at decoration time: a bad type raises TypeError there, not at
    each call.
    """
    if callable(name) and cat is None and flow is None and tracer is None:
        return traced()(name)  # bare @traced
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be str or None, not {type(name).__name__}")
    if cat is not None and not isinstance(cat, str):
        raise TypeError(f"cat must be str or None, not {type(cat).__name__}")
    if flow is not None and not callable(flow):
        _check_flow(flow)
    if tracer is not None and not isinstance(tracer, Tracer):
        raise TypeError(f"tracer must be a Tracer or None, not {type(tracer).__name__}")

    def decorate(fn):
        label = name if name is not None else getattr(fn, "__qualname__", repr(fn))
        opener = tracer.span if tracer is not None else span

        def flow_block(args, kwargs):
            """(the span's flow=, the block that makes it the current flow)"""
            fid = flow(*args, **kwargs) if callable(flow) else flow
            return (None, _NO_FLOW) if fid is None else (fid, _flow_block(fid))

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                if flow is None:
                    with opener(label, cat):
                        return await fn(*args, **kwargs)
                fid, block = flow_block(args, kwargs)
                with block, opener(label, cat, fid):
                    return await fn(*args, **kwargs)
            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if flow is None:
                with opener(label, cat):
                    return fn(*args, **kwargs)
            fid, block = flow_block(args, kwargs)
            with block, opener(label, cat, fid):
                return fn(*args, **kwargs)
        return wrapper

    return decorate
