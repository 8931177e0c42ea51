# SPDX-License-Identifier: MIT
"""test_open.py - `with shmtrace.span()` is open from the moment its block is
entered: a Python process SIGKILLed inside nested blocks exports them
"unfinished", nested, as C's shmtrace_begin() spans; and blocks left out of
order (coroutines interleaving, a generator left suspended, a block left on
another thread) are recorded once and leave nothing shown open after them."""
import os
import signal
import subprocess
import sys
import tempfile
import unittest

import shmtrace
import util

# The child's program: argv[1] the ring, then the body of the test (code run
# before the blocks it dies in); it writes "inside" on stdout from within
# the innermost block and blocks reading stdin until it is killed.
CHILD = r"""
import asyncio, os, sys, threading, shmtrace
t = shmtrace.open(sys.argv[1])
t.set_process_name("victim")

def die_inside(*names):
    if not names:
        os.write(1, b"inside\n")
        os.read(0, 1)  # blocks until SIGKILL
        raise SystemExit("not killed")
    with t.span(names[0], cat="rpc", flow=7 if names[0] == "outer" else None):
        die_inside(*names[1:])
"""


class KilledChild(unittest.TestCase):
    def kill_inside(self, body, *names):
        """Runs CHILD + body, then die_inside(*names); SIGKILLs it once it
        is inside; returns (events, trace path, metadata, pid)."""
        ring = util.ring_name("open")
        shmtrace.create_ring(ring, capacity=65536)
        self.addCleanup(util.unlink, ring)
        code = CHILD + body + "\ndie_inside(%s)\n" % ", ".join(map(repr, names))
        p = subprocess.Popen([sys.executable, "-c", code, ring], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        self.addCleanup(p.stdin.close)
        self.addCleanup(p.stdout.close)
        line = p.stdout.readline()
        if line != b"inside\n":
            p.kill()
            p.wait()
            self.fail("the child did not get inside: %r" % line)
        p.send_signal(signal.SIGKILL)
        self.assertEqual(p.wait(), -signal.SIGKILL)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        events, err, trace = util.export(tmp.name, "--ring", ring)
        self.assertNotIn("torn", err)
        return events, trace, util.metadata(trace), p.pid

    def unfinished(self, events, pid):
        return [e for e in util.spans(events, pid=pid) if e.get("args", {}).get("unfinished")]

    def test_killed_inside_two_blocks_shows_both_unfinished(self):
        events, trace, meta, pid = self.kill_inside("", "outer", "inner")
        self.assertEqual(meta["unfinished"], 2)
        got = sorted(self.unfinished(events, pid), key=lambda e: e["ts"])
        self.assertEqual([e["name"] for e in got], ["outer", "inner"])
        outer, inner = got
        self.assertEqual({e["cat"] for e in got}, {"rpc"})
        # nested: the inner one inside the outer one, both to the same end
        self.assertLessEqual(outer["ts"], inner["ts"])
        self.assertAlmostEqual(outer["ts"] + outer["dur"], inner["ts"] + inner["dur"],
                               delta=0.002)  # us, printed to the ns
        self.assertEqual(len(util.spans(events, pid=pid)), 2)
        seen = util.devtools(trace, "--expect-process", "%d=victim" % pid)
        self.assertEqual(seen["processes"][str(pid)], "victim")

    def test_killed_inside_keeps_the_arguments_given(self):
        # args= at the span, set() inside it (a key set again: the crash
        # shows its first value), a text
        body = r"""
def die_inside(*names):
    with t.span("outer", cat="rpc", args={"req": 42}) as s:
        s.set("url", "/items/7?q=\u00e9")
        s.set("status", "started")
        s.set("status", "later")
        os.write(1, b"inside\n")
        os.read(0, 1)
        raise SystemExit("not killed")
"""
        events, _, meta, pid = self.kill_inside(body)
        self.assertEqual(meta["unfinished"], 1)
        outer, = self.unfinished(events, pid)
        self.assertEqual(outer["name"], "outer")
        self.assertEqual(outer["args"], {"req": 42, "url": "/items/7?q=\u00e9",
                                         "status": "started", "unfinished": True})

    def test_argument_of_a_span_popped_out_of_order_leaves_others_alone(self):
        # b began inside a, then a ended first (coroutines do that): b is
        # off the ring's stack, and c and d, begun after, are where a and b
        # were; b's argument goes with b's end, and leaves d's as they are
        body = r"""
def die_inside(*names):
    a = t.span("a"); a.__enter__()
    b = t.span("b"); b.__enter__()
    a.__exit__(None, None, None)
    with t.span("c"):
        with t.span("d", args={"mine": 1}):
            b.set("other", 2)
            os.write(1, b"inside\n")
            os.read(0, 1)
            raise SystemExit("not killed")
"""
        events, _, meta, pid = self.kill_inside(body)
        self.assertEqual(sorted(e["name"] for e in self.unfinished(events, pid)), ["c", "d"])
        d, = [e for e in self.unfinished(events, pid) if e["name"] == "d"]
        self.assertEqual(d["args"], {"mine": 1, "unfinished": True})

    def test_spans_that_returned_are_not_shown_open(self):
        body = r"""
for i in range(1000):  # more than a staging block: some flushed, some staged
    with t.span("returned", cat="rpc", args={"i": i}):
        with t.span("returned inner", cat="rpc"):
            pass
"""
        events, _, meta, pid = self.kill_inside(body, "outer", "inner")
        self.assertEqual(meta["unfinished"], 2)
        self.assertEqual(len(util.spans(events, "returned", pid)), 1000)
        self.assertEqual(len(util.spans(events, "returned inner", pid)), 1000)
        self.assertEqual(sorted(e["name"] for e in self.unfinished(events, pid)),
                         ["inner", "outer"])

    def test_only_the_four_outermost_are_shown_as_in_c(self):
        names = ["outer"] + ["level%d" % i for i in range(1, 7)]
        events, _, meta, pid = self.kill_inside("", *names)
        self.assertEqual(meta["unfinished"], 4)
        self.assertEqual(sorted(e["name"] for e in self.unfinished(events, pid)),
                         sorted(names[:4]))

    def test_tracers_closed_on_another_thread_leave_this_ones_stack_free(self):
        # four tracers, each with a span left open on this thread, closed
        # by another thread: their mirrors of this thread's stack go with
        # them, so spans of the tracer opened before (more than the four a
        # thread mirrors) are on the ring's stack, shown when it dies
        body = r"""
left = []
for i in range(4):
    u = shmtrace.open(sys.argv[1])
    s = u.span("left open %d" % i)
    s.__enter__()
    left.append((u, s))
th = threading.Thread(target=lambda: [u.close() for u, _ in left])
th.start()
th.join()
"""
        events, _, meta, pid = self.kill_inside(body, "outer", "inner")
        self.assertEqual(sorted(e["name"] for e in self.unfinished(events, pid)),
                         ["inner", "outer"])
        self.assertEqual(meta["unfinished"], 2)

    def test_interleaved_coroutines_leave_nothing_open(self):
        # two tasks of one event loop, each inside a span across an await:
        # the first to enter leaves first, out of the library's order
        body = r"""
async def task(name, entered, other_entered, leave_first):
    with t.span(name, cat="rpc"):
        entered.set()
        await other_entered.wait()
        if not leave_first:
            await asyncio.sleep(0)
        with t.span(name + " inner", cat="rpc"):
            await asyncio.sleep(0)

async def main():
    a, b = asyncio.Event(), asyncio.Event()
    await asyncio.gather(task("a", a, b, True), task("b", b, a, False))
    for _ in range(3):
        await asyncio.gather(task("c", a, b, False), task("d", b, a, True))

asyncio.run(main())
"""
        events, _, meta, pid = self.kill_inside(body, "outer", "inner")
        for name in ("a", "b", "a inner", "b inner"):
            self.assertEqual(len(util.spans(events, name, pid)), 1, name)
        for name in ("c", "d", "c inner", "d inner"):
            self.assertEqual(len(util.spans(events, name, pid)), 3, name)
        # only the blocks it died in: none of the tasks' is shown open
        self.assertEqual(sorted(e["name"] for e in self.unfinished(events, pid)),
                         ["inner", "outer"])
        self.assertEqual(meta["unfinished"], 2)

    def test_generator_left_suspended_and_closed_elsewhere(self):
        # a generator suspended inside a span, the caller's span left first;
        # one finished on another thread, one after the thread that
        # entered it ended
        body = r"""
def gen(name):
    with t.span(name, cat="rpc"):
        yield 1
        yield 2

g = gen("suspended")
with t.span("caller", cat="rpc"):
    next(g)
g.close()

g2 = gen("moved")
next(g2)
th = threading.Thread(target=g2.close)
th.start()
th.join()

g3 = gen("thread ended")
th = threading.Thread(target=next, args=(g3,))
th.start()
th.join()
# join() returns when the thread's Python state is gone; the library frees
# its staging block (and the stack in it) when the thread itself exits,
# after which the kernel drops its task
while os.path.exists("/proc/self/task/%d" % th.native_id):
    os.sched_yield()
g3.close()
"""
        events, _, meta, pid = self.kill_inside(body, "outer", "inner")
        for name in ("suspended", "caller", "moved", "thread ended"):
            self.assertEqual(len(util.spans(events, name, pid)), 1, name)
        self.assertEqual(sorted(e["name"] for e in self.unfinished(events, pid)),
                         ["inner", "outer"])


if __name__ == "__main__":
    unittest.main()
