# SPDX-License-Identifier: MIT
"""test_procs.py - Python processes on one ring with a C process: pools of
4 (fork, spawn, forkserver) whose flows cross the C process py-c-hop,
drained by the collector, exported and checked in the Chrome DevTools trace
engine; and a Python worker SIGKILLed mid-span, exported post-mortem with
the span it died in unfinished."""
import collections
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import unittest

import shmtrace
import util

FLOWS = 40


_barrier = None


def pool_init(ring, barrier):
    global _barrier
    _barrier = barrier
    shmtrace.set_default(shmtrace.open(ring))
    shmtrace.set_process_name("pool-worker")


def pool_work(flow):
    # rounds of 4: a worker waiting here takes no other task, so every
    # round is served by all 4 processes of the pool
    _barrier.wait(timeout=60)
    with shmtrace.span("work", cat="rpc", flow=flow):
        n = sum(i * i for i in range(2000))
    return flow, os.getpid(), n


class TestPool(unittest.TestCase):
    def run_pool(self, method):
        ring = util.ring_name(method)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.addCleanup(util.unlink, ring)
        capture = os.path.join(tmp.name, "pool.capture")
        rfd, wfd = os.pipe()
        collector = subprocess.Popen(
            [os.path.join(util.BIN, "shmtrace-collector"), "--ring", ring, "--create",
             "--output", capture, "--ready-fd", str(wfd)], pass_fds=(wfd,))
        os.close(wfd)
        with os.fdopen(rfd) as ready:
            self.assertEqual(ready.readline().strip(), "ready")
        try:
            with shmtrace.open(ring) as t:
                pids, c_pid = self.traffic(t, ring, method)
        finally:
            collector.terminate()
            self.assertEqual(collector.wait(), 0)

        events, err, trace = util.export(tmp.name, capture)
        self.assertNotIn("records were lost", err)
        # every span exactly once
        count = collections.Counter(e["name"] for e in util.spans(events))
        self.assertEqual({n: count[n] for n in ("submit", "work", "c hop", "collect")},
                         dict.fromkeys(("submit", "work", "c hop", "collect"), FLOWS))
        workers = {p for p in pids.values()}
        self.assertEqual(workers & {os.getpid(), c_pid}, set())
        work_pids = {e["pid"] for e in util.spans(events, "work")}
        self.assertEqual(work_pids, workers)
        seen = util.devtools(trace, "--expect-flows", str(FLOWS))
        procs = {int(p): n for p, n in seen["processes"].items()}
        self.assertEqual(procs[os.getpid()], "py-parent")
        self.assertEqual(procs[c_pid], "c-hop")
        for p in workers:
            self.assertEqual(procs[p], "pool-worker")
        threads = {tuple(map(int, k.split(":"))): n for k, n in seen["threads"].items()}
        self.assertEqual(threads[(os.getpid(), os.getpid())], "MainThread")
        self.assertEqual(threads[(c_pid, c_pid)], "c-main")
        me = os.getpid()
        for flow in seen["flows"]:
            self.assertEqual([ev[3] for ev in flow], ["submit", "work", "c hop", "collect"])
            self.assertEqual(flow[0][0], me)
            self.assertIn(flow[1][0], workers)
            self.assertEqual(flow[2][0], c_pid)
            self.assertEqual(flow[3][0], me)
        return workers

    def traffic(self, t, ring, method):
        t.set_process_name("py-parent")
        ctx = multiprocessing.get_context(method)
        flows = [t.flow_new() for _ in range(FLOWS)]
        pids = {}
        barrier = ctx.Barrier(4)
        with ctx.Pool(4, initializer=pool_init, initargs=(ring, barrier)) as pool:
            pending = []
            for f in flows:
                with t.span("submit", cat="rpc", flow=f):
                    pending.append(pool.apply_async(pool_work, (f,)))
            for p in pending:
                f, pid, _ = p.get(timeout=60)
                pids[f] = pid
            pool.close()
            pool.join()
        hop = subprocess.run([os.path.join(util.BIN, "tests", "py-c-hop"), ring],
                             input="".join("%d\n" % f for f in flows), capture_output=True,
                             text=True, check=True, timeout=60)
        out = hop.stdout.split()
        self.assertEqual(out[1:], ["done", str(FLOWS)])
        for f in flows:
            with t.span("collect", cat="rpc", flow=f):
                pass
        return pids, int(out[0])

    def test_fork(self):
        self.assertEqual(len(self.run_pool("fork")), 4)

    def test_spawn(self):
        self.assertEqual(len(self.run_pool("spawn")), 4)

    def test_forkserver(self):
        self.assertEqual(len(self.run_pool("forkserver")), 4)


KILLED = r"""
import os, sys, shmtrace
t = shmtrace.open(sys.argv[1])
t.set_process_name("victim")
for i in range(int(sys.argv[2])):
    with t.span("returned", cat="rpc", flow=i + 1):
        pass
with t.span("never returns", cat="rpc"):
    os.write(1, b"inside\n")
    os.read(0, 1)  # blocks until SIGKILL
"""


class TestKilled(unittest.TestCase):
    def test_sigkill_mid_span(self):
        ring = util.ring_name("kill")
        shmtrace.create_ring(ring, capacity=4096)
        self.addCleanup(util.unlink, ring)
        n = 1000  # more than one staging block: some flushed, some staged
        p = subprocess.Popen([sys.executable, "-c", KILLED, ring, str(n)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.assertEqual(p.stdout.readline(), b"inside\n")
        p.send_signal(signal.SIGKILL)
        self.assertEqual(p.wait(), -signal.SIGKILL)
        p.stdin.close()
        p.stdout.close()
        with tempfile.TemporaryDirectory() as d:
            events, err, trace = util.export(d, "--ring", ring)
            self.assertNotIn("torn", err)
            got = util.spans(events, "returned", p.pid)
            self.assertEqual(len(got), n)
            self.assertFalse(any(e.get("args") for e in got))
            died_in = [e for e in util.spans(events, pid=p.pid) if e not in got]
            self.assertEqual([(e["name"], e["args"]) for e in died_in],
                             [("never returns", {"unfinished": True})])
            seen = util.devtools(trace, "--expect-flows", "0", "--expect-process",
                                 "%d=victim" % p.pid)
            self.assertEqual(seen["processes"][str(p.pid)], "victim")
        st = util.tool("stat", ring)
        self.assertEqual(st.returncode, 0, st.stderr)


if __name__ == "__main__":
    unittest.main()
