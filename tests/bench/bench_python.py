#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_python.py - what `with shmtrace.span(...)` costs in CPython, next
to an empty `with` block and a time.perf_counter_ns() pair, on a ring of
its own (run by tests/bench/run.sh; needs `make python`).

    bench_python.py [--runs R] [--n N] [--prefix P]

Each figure is ns per iteration of a loop of N, the median of R runs after
a warm-up run; the empty loop's time is subtracted from all. Prints one
line: RESULT case=python span=.. empty_with=.. perf_pair=.. off=.. loop=..
"""
import argparse
import os
import statistics
import sys
import time

import shmtrace


class Empty:
    """The cheapest Python context manager: what `with` itself costs."""
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def loop_empty(n):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        pass
    return time.perf_counter_ns() - t0


def loop_span(n, span=shmtrace.span):
    fid = 12345
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with span("handle", cat="rpc", flow=fid):
            pass
    return time.perf_counter_ns() - t0


def loop_with(n):
    e = Empty()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with e:
            pass
    return time.perf_counter_ns() - t0


def loop_pair(n, clock=time.perf_counter_ns):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        a = clock()
        b = clock()
    return time.perf_counter_ns() - t0


def median_ns(fn, n, runs):
    fn(n)  # warm-up
    return statistics.median(fn(n) for _ in range(runs)) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n", type=int, default=1000000)
    ap.add_argument("--prefix", default="shmtbench-py-")
    a = ap.parse_args()
    ring = "%s%d" % (a.prefix, os.getpid())
    # a ring large enough for every span: none dropped, none flushed early
    shmtrace.create_ring(ring, capacity=1 << 20, mode="overwrite")
    try:
        res = {"off": median_ns(loop_span, a.n, a.runs)}  # no default tracer yet
        shmtrace.set_default(shmtrace.open(ring))
        res["span"] = median_ns(loop_span, a.n, a.runs)
        res["empty_with"] = median_ns(loop_with, a.n, a.runs)
        res["perf_pair"] = median_ns(loop_pair, a.n, a.runs)
        loop = median_ns(loop_empty, a.n, a.runs)
        dropped = shmtrace.stats().dropped
        shmtrace.get_default().close()
    finally:
        shmtrace.unlink_ring(ring)
    print("RESULT case=python " + " ".join("%s=%.1f" % (k, v - loop) for k, v in res.items()) +
          " loop=%.1f dropped=%d n=%d runs=%d python=%s" % (
              loop, dropped, a.n, a.runs, sys.version.split()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
