# SPDX-License-Identifier: MIT
"""test_api.py - every call of the shmtrace Python module, its bad
arguments, tracing off, and a ring removed under a tracer; each checked in
what `shmtrace export --ring` makes of the ring."""
import asyncio
import contextlib
import mmap
import os
import pydoc
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import shmtrace
import util
from util import RingTest


class LockWord:
    """The ring's lock word (the header's mutex: glibc's lock word first,
    docs/FORMAT.md), mapped, to play another process holding the lock."""
    AT = 256
    WAITERS = 0x80000000  # FUTEX_WAITERS: a thread waits for the lock

    def __init__(self, test):
        with open("/dev/shm/" + test.ring, "r+b") as f:
            self.map = mmap.mmap(f.fileno(), 4096)
        test.addCleanup(self.map.close)

    def get(self):
        return struct.unpack("<I", self.map[self.AT:self.AT + 4])[0]

    def set(self, tid):
        """tid 1 (pid 1, which runs: a waiter waits its whole bound,
        100 ms) holds it; 0 frees it."""
        self.map[self.AT:self.AT + 4] = struct.pack("<I", tid)

    def wait_for_a_waiter(self, going=lambda: True):
        """Until a thread waits for the lock (True), or going() says no
        more (False)."""
        while going():
            if self.get() & self.WAITERS:
                return True
            time.sleep(0.0002)  # a poll: the word signals nothing
        return False


class TestCalls(RingTest):
    def trying_tracer(self):
        """self.t closed, and a tracer on the ring in its place that only
        tries the ring lock (SHMTRACE_LOCK_TIMEOUT_MS=0)."""
        self.t.close()
        os.environ["SHMTRACE_LOCK_TIMEOUT_MS"] = "0"
        try:
            t = shmtrace.open(self.ring)
        finally:
            del os.environ["SHMTRACE_LOCK_TIMEOUT_MS"]
        self.addCleanup(t.close)
        return t

    def test_span_instant_counter_flow(self):
        t = self.t
        self.assertTrue(t.enabled)
        self.assertEqual(t.ring, self.ring)
        fid = t.flow_new()
        self.assertGreater(fid, 0)
        self.assertLess(fid, 2 ** 53)
        self.assertNotEqual(t.flow_new(), fid)
        with t.span("handle", cat="rpc", flow=fid) as s:
            self.assertEqual(s.flow, fid)
            self.assertTrue(s.enabled)
        with t.span("plain"):
            pass
        t.instant("mark", cat="rpc", flow=fid)
        t.counter("depth", -42)
        t.counter(name="big", value=2 ** 63 - 1, cat="ctr")
        ev = self.export()
        x = util.spans(ev, "handle")
        self.assertEqual(len(x), 1)
        self.assertEqual(x[0]["cat"], "rpc")
        self.assertEqual(x[0]["pid"], os.getpid())
        self.assertEqual(util.spans(ev, "plain")[0]["cat"], shmtrace.DEFAULT_CATEGORY)
        # the export renumbers flows 1..N: the only flow here
        flows = [e for e in ev if e.get("ph") in ("s", "t", "f")]
        self.assertEqual(len(flows), 2)  # the span and the instant, one flow
        inst = [e for e in ev if e.get("ph") == "i" and e["name"] == "mark"]
        self.assertEqual(len(inst), 1)
        ctr = {e["name"]: e["args"][e["name"]] for e in ev if e.get("ph") == "C"}
        self.assertEqual(ctr, {"depth": -42, "big": 2 ** 63 - 1})

    def test_trigger(self):
        # a trigger: an instant "trigger: NAME" of this thread, for a
        # flight recorder to answer; as the module's call and the tracer's
        self.t.trigger("slow reply")
        with self.assertRaises(TypeError):
            self.t.trigger(5)
        with self.assertRaises(TypeError):
            self.t.trigger()
        ev = self.export()
        trig = [e for e in ev if e.get("ph") == "i" and e["name"] == "trigger: slow reply"]
        self.assertEqual(len(trig), 1)
        self.assertEqual(trig[0]["args"], {"trigger": "slow reply"})
        self.assertEqual(trig[0]["cat"], "shmtrace")
        self.assertEqual(trig[0]["pid"], os.getpid())
        # a name past the library's 1024 bytes is cut at a character, as
        # every name is (the euro sign is 3 bytes: 341 of them fit)
        self.t.trigger("\u20ac" * 1000)
        ev = self.export()
        self.assertEqual(len([e for e in ev if e.get("ph") == "i" and
                              e["name"] == "trigger: " + "\u20ac" * 341]), 1)

    def test_exception_leaves_span_recorded(self):
        with self.assertRaises(KeyError):
            with self.t.span("failing"):
                raise KeyError("x")
        self.assertEqual(len(util.spans(self.export(), "failing")), 1)

    def test_span_reuse(self):
        s = self.t.span("again")
        with s:
            with self.assertRaises(RuntimeError):
                s.__enter__()
        with s:
            pass
        self.assertEqual(len(util.spans(self.export(), "again")), 2)

    def test_names(self):
        self.t.set_process_name("py-test-proc")
        seen = []

        def work():
            with self.t.span("in thread"):
                pass
            seen.append(threading.get_native_id())

        th = threading.Thread(target=work, name="worker-α")
        th.start()
        th.join()

        def named():
            self.t.set_thread_name("explicit")
            with self.t.span("in named thread"):
                pass
            seen.append(threading.get_native_id())

        th = threading.Thread(target=named, name="ignored")
        th.start()
        th.join()
        with self.t.span("main"):
            pass
        ev = self.export()
        self.assertEqual(util.names(ev, "process_name")[os.getpid()], "py-test-proc")
        tn = util.names(ev, "thread_name")
        self.assertEqual(tn[(os.getpid(), seen[0])], "worker-α")
        self.assertEqual(tn[(os.getpid(), seen[1])], "explicit")
        self.assertEqual(tn[(os.getpid(), threading.get_native_id())], "MainThread")

    def test_naming_never_raises_for_a_full_name_table(self):
        # a worker naming its thread for every task: the same name again
        # takes no slot, and names past the table's 1,024 slots are
        # counted in the ring (names_dropped), not raised (ENOSPC was)
        tids = []

        def worker():  # a thread of its own: a name is the thread's for good
            for _ in range(2000):
                self.t.set_thread_name("same")
            for i in range(1100):
                self.t.set_thread_name("task %d" % i)
            with self.t.span("named"):
                pass
            self.t.flush()
            tids.append(threading.get_native_id())

        th = threading.Thread(target=worker)
        th.start()
        th.join()
        ev, _, trace = util.export(self.tmp.name, "--ring", self.ring)
        # 1,100 new names, the 2,000 "same" in one of the 1,024 slots: at
        # most 1,023 left for them (the 2,000 took them all before)
        self.assertIn(util.metadata(trace)["names_dropped"], range(1100 - 1023, 100))
        self.assertTrue(util.names(ev, "thread_name")[(os.getpid(), tids[0])].startswith("task "))

    def test_naming_never_raises_for_a_lock_not_had(self):
        # the lock held by another process: a naming waits in vain, or,
        # within a second of a wait in vain, only tries it; each name
        # counted in the ring's names_dropped, none raised
        t = self.trying_tracer()
        word = LockWord(self)
        word.set(1)
        errors = []

        def worker():  # a thread of its own: a name is the thread's for good
            try:
                for i in range(3):
                    t.set_thread_name("held %d" % i)
            except shmtrace.Error as e:
                errors.append(e)

        th = threading.Thread(target=worker)
        th.start()
        th.join()
        word.set(0)
        self.assertEqual(errors, [])
        t.flush()
        _, _, trace = util.export(self.tmp.name, "--ring", self.ring)
        self.assertEqual(util.metadata(trace)["names_dropped"], 3)

    def test_long_names_cut_at_a_character(self):
        def named():  # not the main thread: its name is the other tests'
            self.t.set_thread_name("é" * 40)  # 80 bytes: 15 characters fit in 31
            with self.t.span("é" * 600):  # 1200 bytes: 512 characters fit in 1024
                pass

        th = threading.Thread(target=named)
        th.start()
        th.join()
        with self.t.span("x" * (10 << 20)):
            pass
        ev = self.export()
        self.assertEqual(len(util.spans(ev, "é" * 512)), 1)
        self.assertEqual(len(util.spans(ev, "x" * 1024)), 1)
        self.assertIn("é" * 15, util.names(ev, "thread_name").values())

    def test_name_that_could_not_be_interned_is_interned_later(self):
        # the ring's lock held (its lock word set to another's tid, as a
        # holder's is) and a tracer that only tries it: the new names of a
        # span cannot be interned and it is named "?"; once the lock is
        # free, a span of the same names has them: what failed is not kept
        t = self.trying_tracer()
        word = LockWord(self)
        word.set(1)
        with t.span("later", cat="lockcat"):
            pass
        word.set(0)
        with t.span("later", cat="lockcat"):
            pass
        t.instant("later-instant", cat="lockcat")
        t.flush()
        ev, _, _ = util.export(self.tmp.name, "--ring", self.ring)
        self.assertEqual(len(util.spans(ev, "later")), 1)
        self.assertEqual(len(util.spans(ev, "?")), 1)
        self.assertEqual([e["cat"] for e in util.spans(ev, "later")], ["lockcat"])

    def test_a_wait_for_the_ring_lock_lets_other_threads_run(self):
        # the ring's lock word holds another's tid (pid 1, which runs: a
        # waiter waits its whole bound, 100 ms) and a thread interns a new
        # name: it waits for the lock without the GIL, so this thread runs
        # meanwhile, sees the waiter's bit (FUTEX_WAITERS) in the lock word
        # and frees the lock; the waiter then takes it and the name is kept.
        # Holding the GIL, it would time out first and record "?"
        word = LockWord(self)
        word.set(1)
        done = []

        def worker():
            with self.t.span("named while waiting", cat="waitcat"):
                pass
            done.append(True)

        th = threading.Thread(target=worker)
        th.start()
        seen = word.wait_for_a_waiter(lambda: not done)
        word.set(0)
        th.join()
        self.assertTrue(seen, "the waiter finished before this thread ran")
        ev = self.export()
        self.assertEqual([e["cat"] for e in util.spans(ev, "named while waiting")], ["waitcat"])
        self.assertEqual(util.spans(ev, "?"), [])

    def test_close_waits_for_a_call_waiting_for_the_lock(self):
        # a thread waits for the lock (a new name) without the GIL; this
        # one closes the tracer meanwhile: the close waits for that call
        # before the handle goes, and the span it was naming is recorded
        # or not, never written through a closed handle
        word = LockWord(self)
        word.set(1)
        errors = []

        def worker():
            try:
                with self.t.span("closed while waiting"):
                    pass
                self.t.instant("after the close")
            except Exception as e:  # pylint: disable=broad-except
                errors.append(e)

        th = threading.Thread(target=worker)
        th.start()
        word.wait_for_a_waiter()
        closer = threading.Thread(target=self.t.close)
        closer.start()
        word.set(0)
        closer.join()
        th.join()
        self.assertEqual(errors, [])
        self.assertFalse(self.t.enabled)
        ev, _, _ = util.export(self.tmp.name, "--ring", self.ring)
        self.assertEqual(util.spans(ev, "?"), [])
        self.assertEqual([e for e in ev if e.get("name") == "after the close"], [])

    def test_a_second_close_returns_after_the_first(self):
        # a thread waits for the lock (a new name) without the GIL, and a
        # close waits for that call; a second close meanwhile must not
        # return before the first is done: the lock word is still another
        # process's while the first waits, and free once it is done
        word = LockWord(self)
        word.set(1)
        entered, owners = [], []

        def worker():
            with self.t.span("waits for the lock"):
                pass

        def closer(tag):
            entered.append(tag)
            self.t.close()
            owners.append(word.get() & 0x3fffffff)

        th = threading.Thread(target=worker)
        th.start()
        word.wait_for_a_waiter()
        closers = [threading.Thread(target=closer, args=(i,)) for i in range(2)]
        for i, c in enumerate(closers):
            c.start()
            while len(entered) <= i:
                time.sleep(0.0002)  # a poll: entering close() signals nothing
        word.set(0)
        for c in closers:
            c.join()
        th.join()
        self.assertEqual(owners, [0, 0], "a close returned while the lock was another's")

    def test_a_flush_waiting_for_the_ring_lock_lets_other_threads_run(self):
        # flush() may wait for the lock (100 ms while another process
        # holds it): without the GIL, so this thread sees the waiter's bit
        # and frees the lock, and the flush takes it. Holding the GIL, it
        # timed out first and raised ETIMEDOUT
        self.t.instant("staged")
        word = LockWord(self)
        errors = []

        def worker():
            self.t.instant("staged by the worker")
            word.set(1)
            try:
                self.t.flush()
            except shmtrace.Error as e:
                errors.append(e)

        th = threading.Thread(target=worker)
        th.start()
        word.wait_for_a_waiter(th.is_alive)
        word.set(0)
        th.join()
        self.assertEqual(errors, [])

    def test_a_close_at_the_interpreters_end_waits_for_no_daemon_thread_for_good(self):
        # a daemon thread waits for the lock without the GIL when the
        # interpreter ends; a tracer closed then (by a module's object)
        # waits for that call, which returns but never gets the GIL back:
        # its hold of the handle must end without the GIL, or the close
        # waits for good
        mod = os.path.join(self.tmp.name, "holder_at_exit.py")
        with open(mod, "w", encoding="utf-8") as f:
            f.write("import os\n"
                    "class Holder:\n"
                    "    def __init__(self, t):\n"
                    "        self.t = t\n"
                    "    def __del__(self, w=os.write):\n"
                    "        self.t.close()\n"
                    "        w(1, b'closed\\n')\n")
        code = """
import mmap, struct, sys, threading, time
import shmtrace, holder_at_exit
t = shmtrace.open(%r)
with open("/dev/shm/" + %r, "r+b") as f:
    word = mmap.mmap(f.fileno(), 4096)
word[%d:%d + 4] = struct.pack("<I", 1)
holder_at_exit.h = holder_at_exit.Holder(t)
def daemon():
    i = 0
    while True:
        t.instant("new name %%d" %% i)
        i += 1
threading.Thread(target=daemon, daemon=True).start()
while not struct.unpack("<I", word[%d:%d + 4])[0] & %d:
    time.sleep(0.0002)
del t
""" % (self.ring, self.ring, LockWord.AT, LockWord.AT, LockWord.AT, LockWord.AT,
       LockWord.WAITERS)
        env = dict(os.environ, PYTHONPATH=self.tmp.name + os.pathsep + os.environ["PYTHONPATH"])
        env.pop("SHMTRACE_RING", None)
        try:
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                               text=True, check=False, timeout=60)
        except subprocess.TimeoutExpired:
            self.fail("the interpreter's end waited for good")
        self.assertEqual((r.returncode, r.stdout), (0, "closed\n"), r.stderr)

    def test_span_enters_an_exit_stack(self):
        # contextlib.ExitStack (and unittest's enterContext) call the
        # class's __enter__ and __exit__ with the span
        with contextlib.ExitStack() as st:
            self.assertIs(type(st.enter_context(self.t.span("stacked"))), shmtrace.Span)
        s = self.t.span("by-class")
        self.assertIs(shmtrace.Span.__enter__(s), s)
        self.assertIsNone(shmtrace.Span.__exit__(s, None, None, None))
        with self.assertRaises(TypeError):
            shmtrace.Span.__enter__(object())
        ev = self.export()
        self.assertEqual(len(util.spans(ev, "stacked")), 1)
        self.assertEqual(len(util.spans(ev, "by-class")), 1)

    def test_interning_is_cached(self):
        with self.t.span("once", cat="c"):
            pass
        before = self.t.stats().strings
        for _ in range(1000):
            with self.t.span("once", cat="c"):
                pass
        self.assertEqual(self.t.stats().strings, before)

    def test_name_pairs_cached_by_identity(self):
        # more (name, cat) pairs than the identity cache has slots, each
        # entered twice in a shuffled order, and equal strings that are not
        # the same object: every span must keep its own name and category
        pairs = [("n%d" % i, "c%d" % (i % 7)) for i in range(300)]
        order = [p for p in pairs for _ in range(2)]
        order = order[::3] + order[1::3] + order[2::3]
        for name, cat in order:
            with self.t.span(name, cat=cat):
                pass
        for name, cat in pairs[:10]:
            with self.t.span("".join(list(name)), cat="".join(list(cat))):
                pass
        ev = self.export()
        got = {}
        for e in util.spans(ev):
            got.setdefault(e["name"], []).append(e["cat"])
        for i, (name, cat) in enumerate(pairs):
            self.assertEqual(got.get(name), [cat] * (3 if i < 10 else 2), name)

    def test_spans_reused_carry_no_state(self):
        s = self.t.span("left", flow=5)
        s.__enter__()
        del s  # never exited: its object may be reused
        with self.t.span("next") as s2:
            self.assertEqual(s2.flow, 0)
        # nested deeper than the spans kept for reuse
        spans = [self.t.span("deep%d" % i, flow=i + 1) for i in range(40)]
        for s in spans:
            s.__enter__()
        for s in reversed(spans):
            self.assertIsNone(s.__exit__(None, None, None))
        del spans, s
        ev = self.export()
        # never exited: not recorded, and shown open, as a C span never ended
        self.assertEqual([e["args"] for e in util.spans(ev, "left")], [{"unfinished": True}])
        self.assertEqual(len(util.spans(ev, "next")), 1)
        for i in range(40):
            self.assertEqual(len(util.spans(ev, "deep%d" % i)), 1)

    def test_span_enter_exit_are_the_span(self):
        s = self.t.span("called")
        self.assertIs(s.__enter__(), s)
        for nargs in (1, 2, 4):
            with self.assertRaises(TypeError):
                s(*[None] * nargs)
        with self.assertRaises(TypeError):
            s(exc=None)
        self.assertIsNone(s.__exit__(KeyError, KeyError("x"), None))  # not swallowed
        self.assertIn("__enter__", pydoc.render_doc(shmtrace.Span))
        self.assertEqual(len(util.spans(self.export(), "called")), 1)

    def test_stats_and_flush(self):
        st = self.t.stats()
        self.assertIsInstance(st, shmtrace.Stats)
        self.assertEqual(st.capacity, 65536)
        self.assertEqual(st.mode, "discard")
        for _ in range(10):
            self.t.instant("i")
        self.t.flush()
        st = self.t.stats()
        self.assertEqual((st.head, st.dropped, st.overwritten, st.lock_timeouts), (10, 0, 0, 0))
        self.assertEqual(tuple(st)[:3], (65536, 10, 0))

    def test_traced(self):
        @shmtrace.traced(cat="rpc", tracer=self.t)
        def add(a, b):
            return a + b

        @shmtrace.traced("named", tracer=self.t)
        async def later(x):
            await asyncio.sleep(0)
            return x * 2

        @shmtrace.traced(tracer=self.t)
        def boom():
            raise ValueError("boom")

        self.assertEqual(add(1, b=2), 3)
        self.assertEqual(add.__name__, "add")
        self.assertEqual(asyncio.run(later(21)), 42)
        self.assertTrue(asyncio.iscoroutinefunction(later))
        with self.assertRaises(ValueError):
            boom()
        ev = self.export()
        q = TestCalls.test_traced.__qualname__ + ".<locals>."
        self.assertEqual(util.spans(ev, q + "add")[0]["cat"], "rpc")
        self.assertEqual(len(util.spans(ev, "named")), 1)
        self.assertEqual(len(util.spans(ev, q + "boom")), 1)

    def test_default_tracer(self):
        old = shmtrace.get_default()
        self.addCleanup(shmtrace.set_default, old)
        shmtrace.set_default(self.t)
        self.assertIs(shmtrace.get_default(), self.t)

        @shmtrace.traced
        def bare():
            return 7

        self.assertEqual(bare(), 7)
        with shmtrace.span("module span", flow=shmtrace.flow_new()):
            pass
        shmtrace.instant("module instant")
        shmtrace.counter("module counter", 3)
        th = threading.Thread(target=shmtrace.set_thread_name, args=("module-thread",))
        th.start()
        th.join()
        shmtrace.set_process_name("module-proc")
        shmtrace.flush()
        self.assertGreater(shmtrace.stats().head, 0)
        ev = self.export()
        for n in ("module span", TestCalls.test_default_tracer.__qualname__ + ".<locals>.bare"):
            self.assertEqual(len(util.spans(ev, n)), 1, n)
        shmtrace.set_default(None)
        self.assertFalse(shmtrace.get_default().enabled)
        with self.assertRaises(TypeError):
            shmtrace.set_default("ring")

    def test_default_replaced_by_the_arguments_own_code(self):
        # an argument's __index__ (user code) that calls set_default(None)
        # while a module-level call uses the default tracer: the call
        # keeps the tracer alive till it returns. With freed memory
        # poisoned (PYTHONMALLOC=debug), a call that did not would crash.
        code = f"""
import shmtrace
shmtrace.set_default(shmtrace.open({self.ring!r}))
class Index:
    def __index__(self):
        shmtrace.set_default(None)
        return 5
shmtrace.counter("replaced", Index())
print("ok")
"""
        env = dict(os.environ, PYTHONMALLOC="debug")
        env.pop("SHMTRACE_RING", None)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=False)
        self.assertEqual((r.returncode, r.stdout.strip(), r.stderr), (0, "ok", ""))
        ctr = [e for e in self.export() if e.get("ph") == "C" and e["name"] == "replaced"]
        self.assertEqual([e["args"]["replaced"] for e in ctr], [5])

    def test_close(self):
        with shmtrace.open(self.ring) as t2:
            self.assertTrue(t2.enabled)
            s = t2.span("open across close")
            s.__enter__()
        self.assertFalse(t2.enabled)
        s.__exit__(None, None, None)  # its handle is gone: nothing recorded
        t2.close()
        with t2.span("after close"):
            pass
        t2.instant("after close")
        self.assertEqual(t2.flow_new(), 0)
        self.assertIsNone(t2.stats())
        ev = self.export()
        self.assertEqual(util.spans(ev, "open across close"), [])
        self.assertEqual(util.spans(ev, "after close"), [])

    def test_fork(self):
        with self.t.span("before fork"):
            pass
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                with self.t.span("in child"):
                    pass
                code = 0
            finally:
                os._exit(code)
        _, st = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(st), 0)
        ev = self.export()
        self.assertEqual([e["pid"] for e in util.spans(ev, "in child")], [pid])
        self.assertEqual([e["pid"] for e in util.spans(ev, "before fork")], [os.getpid()])
        self.assertEqual(util.names(ev, "thread_name").get((pid, pid)), "MainThread")

    def test_ring_removed_under_it(self):
        with self.t.span("before"):
            pass
        shmtrace.unlink_ring(self.ring)
        for _ in range(200):
            with self.t.span("after unlink"):
                pass
        self.t.flush()
        # no collector drains the removed ring: the spans are refused,
        # never written where nobody reads them
        self.assertEqual(self.t.stats().head, 1)
        with self.assertRaises(shmtrace.Error) as cm:
            shmtrace.open(self.ring)
        self.assertEqual(cm.exception.errno, 2)
        with self.assertRaises(shmtrace.Error):
            shmtrace.unlink_ring(self.ring)
        # ... and counted into the ring made next, once the tracer moves
        shmtrace.create_ring(self.ring, capacity=65536)
        for _ in range(65):     # a look at the name within 64 calls
            with self.t.span("made again"):
                pass
        self.t.flush()
        st = self.t.stats()
        self.assertEqual(st.head + st.dropped, 200 + 65)
        self.assertGreaterEqual(st.dropped, 200)


class TestBadArguments(RingTest):
    def test_types(self):
        t = self.t
        bad = [
            lambda: t.span(1),
            lambda: t.span(b"bytes"),
            lambda: t.span("x", cat=1),
            lambda: t.span("x", flow="1"),
            lambda: t.span("x", flow=1.0),
            lambda: t.span(),
            lambda: t.span("x", "c", 1, 2),
            lambda: t.span("x", bogus=1),
            lambda: t.span("x", "c", cat="d"),
            lambda: t.instant(None),
            lambda: t.counter("c"),
            lambda: t.counter("c", 1.5),
            lambda: t.counter("c", "1"),
            lambda: t.set_thread_name(None),
            lambda: t.set_process_name(7),
            lambda: shmtrace.open(123),
            lambda: shmtrace.unlink_ring(None),
            lambda: shmtrace.traced(cat=1),
        ]
        for i, f in enumerate(bad):
            with self.assertRaises(TypeError, msg="case %d" % i):
                f()

    def test_ranges(self):
        for f in (lambda: self.t.span("x", flow=-1), lambda: self.t.span("x", flow=2 ** 64),
                  lambda: self.t.counter("c", 2 ** 63), lambda: self.t.counter("c", -2 ** 63 - 1)):
            with self.assertRaises(OverflowError):
                f()
        with self.t.span("max flow", flow=2 ** 64 - 1):
            pass

    def test_capacity_never_wraps(self):
        # cut to 32 bits, 2**64 was 0 (the default ring) and 2**32 + 4096
        # a ring of 4096 records: both refused, and no ring made
        other = self.ring + "-cap"
        self.addCleanup(util.unlink, other)
        for cap, exc in ((2 ** 64, OverflowError), (2 ** 32 + 4096, OverflowError),
                         (-4096, OverflowError), (1, ValueError), (3 * 4096, ValueError),
                         (2 ** 25, ValueError)):
            with self.assertRaises(exc, msg="capacity %d" % cap) as cm:
                shmtrace.create_ring(other, capacity=cap)
            self.assertIn("capacity must be 0 (262144) or a power of two from 2 to 16777216",
                          str(cm.exception))
            self.assertFalse(os.path.exists("/dev/shm/" + other), "capacity %d" % cap)
        with self.assertRaises(TypeError):
            shmtrace.create_ring(other, capacity=4096.0)
        shmtrace.create_ring(other, capacity=2)
        with shmtrace.open(other) as t:
            self.assertEqual(t.stats().capacity, 2)

    def test_invalid_unicode(self):
        for f in (lambda: self.t.span("\udc80"), lambda: self.t.span("x", cat="a\ud800"),
                  lambda: self.t.instant("\udfff"), lambda: self.t.set_thread_name("\udc80"),
                  lambda: shmtrace.open("\udc80")):
            with self.assertRaises(UnicodeEncodeError):
                f()
        with self.assertRaises(ValueError):
            self.t.span("nul\0inside")
        with self.assertRaises(ValueError):
            shmtrace.create_ring(self.ring + "x", mode="sideways")
        # nothing of it reached the ring, and the tracer still works
        with self.t.span("still fine"):
            pass
        ev = self.export()
        self.assertEqual([e["name"] for e in util.spans(ev)], ["still fine"])

    def test_errors_are_oserrors(self):
        with self.assertRaises(shmtrace.Error) as cm:
            shmtrace.open(self.ring + "-missing")
        e = cm.exception
        self.assertIsInstance(e, OSError)
        self.assertEqual(e.errno, 2)
        self.assertEqual(e.strerror, "No such file or directory")
        self.assertEqual(e.filename, self.ring + "-missing")
        with self.assertRaises(shmtrace.Error) as cm:
            shmtrace.open("a/b")
        self.assertEqual(cm.exception.errno, 22)
        with self.assertRaises(shmtrace.Error) as cm:
            shmtrace.create_ring(self.ring)
        self.assertEqual(cm.exception.errno, 17)
        self.assertEqual(cm.exception.filename, self.ring)
        with self.assertRaises(shmtrace.Error) as cm:
            shmtrace.create_ring(ring=self.ring)
        self.assertEqual((cm.exception.errno, cm.exception.filename), (17, self.ring))
        path = "/dev/shm/" + self.ring + "-junk"
        with open(path, "wb") as f:
            f.write(b"\0" * 4096)
        self.addCleanup(os.unlink, path)
        os.chmod(path, 0o600)
        with self.assertRaises(shmtrace.Error) as cm:
            shmtrace.open(self.ring + "-junk")
        self.assertIn(cm.exception.errno, (71, 74))  # EPROTO, EBADMSG


class TestOff(unittest.TestCase):
    def test_no_ring(self):
        # a fresh interpreter without SHMTRACE_RING: the default tracer is off
        code = r"""
import shmtrace
t = shmtrace.get_default()
assert not t.enabled and t.ring is None, t
assert not shmtrace.open().enabled
s = shmtrace.span("x", cat="rpc", flow=5)
assert not s.enabled and s is shmtrace.span("y")
with s:
    with s:  # the no-op span nests
        pass
assert shmtrace.instant("i") is None and shmtrace.counter("c", 1) is None
assert shmtrace.trigger("t") is None
assert shmtrace.flow_new() == 0 and shmtrace.stats() is None
shmtrace.set_thread_name("t"); shmtrace.set_process_name("p"); shmtrace.flush()
for bad in (lambda: shmtrace.span(1), lambda: shmtrace.counter("c", 1.5)):
    try:
        bad()
    except TypeError:
        pass
    else:
        raise AssertionError("no TypeError")
@shmtrace.traced(cat="rpc")
def f():
    return 1
assert f() == 1
print("ok")
"""
        env = dict(os.environ)
        env.pop("SHMTRACE_RING", None)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=False)
        self.assertEqual((r.returncode, r.stdout.strip(), r.stderr), (0, "ok", ""))

    def run_before_its_ring(self, what, code):
        """Runs code (which prints "ok") in a Python whose SHMTRACE_RING
        names a ring not made yet, RING in code; returns the ring's export."""
        ring = util.ring_name(what)
        self.addCleanup(util.unlink, ring)
        env = dict(os.environ, SHMTRACE_RING=ring)
        r = subprocess.run([sys.executable, "-c", "RING = %r\n" % ring + code],
                           env=env, capture_output=True, text=True, check=False)
        self.assertEqual((r.returncode, r.stdout.strip(), r.stderr), (0, "ok", ""))
        with tempfile.TemporaryDirectory() as tmp:
            events, _, _ = util.export(tmp, "--ring", ring)
        return events

    def test_env_ring_missing(self):
        # off while the ring is missing, on once it appears (late attach)
        events = self.run_before_its_ring("absent", """
import shmtrace
assert not shmtrace.get_default().enabled
shmtrace.span('x').__enter__()
shmtrace.create_ring(RING)
while not shmtrace.get_default().enabled:
    with shmtrace.span('waiting'):
        pass
for i in range(10):
    with shmtrace.span('after'):
        pass
print('ok')
""")
        self.assertEqual(len(util.spans(events, "after")), 10)

    def test_env_ring_closed_before_it_appears_stays_closed(self):
        # the default tracer closed while SHMTRACE_RING's ring is missing:
        # the ring made after, the tracer stays off (the library looks for
        # the ring every 100 ms: a second is ten looks it does not make)
        events = self.run_before_its_ring("closedfirst", """
import time, shmtrace
shmtrace.get_default().close()
shmtrace.create_ring(RING)
end = time.monotonic() + 1
while time.monotonic() < end:
    assert not shmtrace.get_default().enabled
    with shmtrace.span('after close'):
        pass
print('ok')
""")
        self.assertEqual(len(util.spans(events, "after close")), 0)

    def test_env_ring(self):
        ring = util.ring_name("env")
        shmtrace.create_ring(ring)
        self.addCleanup(util.unlink, ring)
        env = dict(os.environ, SHMTRACE_RING=ring)
        r = subprocess.run([sys.executable, "-c",
                            "import shmtrace\nassert shmtrace.get_default().enabled\n"
                            "with shmtrace.span('from env'): pass\n"],
                           env=env, capture_output=True, text=True, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        with tempfile.TemporaryDirectory() as d:
            ev, _, _ = util.export(d, "--ring", ring)
        self.assertEqual(len(util.spans(ev, "from env")), 1)


class TestLoadedLate(unittest.TestCase):
    def test_imports_after_modules_that_took_the_static_tls(self):
        # a process has a few hundred bytes of static TLS for modules it
        # loads after its start; another module's initial-exec TLS (here
        # 1,200 bytes) may take them all. The extension's thread state is
        # not in it: the import failed ("cannot allocate memory in static
        # TLS block")
        with tempfile.TemporaryDirectory() as d:
            src, lib = os.path.join(d, "bigtls.c"), os.path.join(d, "libbigtls.so")
            with open(src, "w", encoding="utf-8") as f:
                f.write('__thread char big[1200] __attribute__((tls_model("initial-exec")));\n'
                        "int touch(void) { return ++big[0]; }\n")
            subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-o", lib, src],
                           check=True)
            code = "import ctypes\nctypes.CDLL(%r)\nimport shmtrace\nprint('imported')\n" % lib
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=False)
        self.assertEqual((r.returncode, r.stdout), (0, "imported\n"), r.stderr)


class TestDocs(unittest.TestCase):
    def test_help_is_the_manual(self):
        text = pydoc.render_doc(shmtrace.span)
        self.assertIn('with shmtrace.span("handle", cat="rpc", flow=fid)', text)
        self.assertIn("flow_new()", text)
        for name in shmtrace.__all__:
            self.assertTrue(getattr(shmtrace, name).__doc__, name)
        stub = os.path.join(os.path.dirname(shmtrace.__file__), "__init__.pyi")
        self.assertTrue(os.path.exists(stub))


if __name__ == "__main__":
    unittest.main()
