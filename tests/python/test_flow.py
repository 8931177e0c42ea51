# SPDX-License-Identifier: MIT
"""test_flow.py - the current flow (shmtrace.flow(), current_flow()): the
default flow of spans and instants, kept in a ContextVar, so it follows
`await`, asyncio tasks and contextvars.copy_context() into threads; and
@traced's per-call flow, computed from each call's arguments, which joins
the spans of a request into flows that the DevTools engine finds; flow
roles (flow_recv(), flow_end(), flow_reply()): a "wait reply" span that
receives and ends the flow comes after the handling it waited for."""
import asyncio
import collections
import contextvars
import queue
import threading

import shmtrace
import util
from util import RingTest

Request = collections.namedtuple("Request", "flow payload")


class TestCurrentFlow(RingTest):
    def test_flow_block_sets_and_restores(self):
        self.assertEqual(shmtrace.current_flow(), 0)
        with shmtrace.flow(5) as fid:
            self.assertEqual((fid, shmtrace.current_flow()), (5, 5))
            with shmtrace.flow(0):  # no flow inside
                self.assertEqual(shmtrace.current_flow(), 0)
            self.assertEqual(shmtrace.current_flow(), 5)
            with self.assertRaises(KeyError):
                with shmtrace.flow(6):
                    raise KeyError("x")
            self.assertEqual(shmtrace.current_flow(), 5)
        self.assertEqual(shmtrace.current_flow(), 0)
        block = shmtrace.flow(2 ** 64 - 1)
        with block:
            with self.assertRaises(RuntimeError):
                block.__enter__()
        with block:  # again, once it has exited
            self.assertEqual(shmtrace.current_flow(), 2 ** 64 - 1)
        for bad, exc in (("1", TypeError), (1.0, TypeError), (-1, OverflowError),
                         (2 ** 64, OverflowError)):
            with self.assertRaises(exc, msg=repr(bad)):
                shmtrace.flow(bad)

    def test_flow_without_an_id_makes_a_new_one(self):
        old = shmtrace.get_default()
        self.addCleanup(shmtrace.set_default, old)
        shmtrace.set_default(self.t)
        with shmtrace.flow() as a, shmtrace.flow(None) as b:
            self.assertNotIn(0, (a, b))
            self.assertNotEqual(a, b)
            self.assertEqual(shmtrace.current_flow(), b)
        shmtrace.set_default(None)
        with shmtrace.flow() as off:
            self.assertEqual(off, 0)  # flow_new() with tracing off

    def test_spans_and_instants_take_the_current_flow(self):
        t = self.t
        f, g = t.flow_new(), t.flow_new()
        with shmtrace.flow(f):
            with t.span("in flow", cat="rpc") as s:
                self.assertEqual(s.flow, f)
            with t.span("none", cat="rpc", flow=0) as s:
                self.assertEqual(s.flow, 0)
            with t.span("other", cat="rpc", flow=g) as s:
                self.assertEqual(s.flow, g)
            t.instant("mark", cat="rpc")
            with shmtrace.span("module-level", cat="rpc") as s:
                self.assertIn(s.flow, (f, 0))  # 0 when the default tracer is off
        with t.span("outside", cat="rpc") as s:
            self.assertEqual(s.flow, 0)
        ev = self.export()
        # "in flow" and "mark" are one flow; "other" alone is none
        flows = collections.Counter(e["id"] for e in ev if e.get("ph") in ("s", "t", "f"))
        self.assertEqual(sorted(flows.values()), [2])

    def test_flow_follows_await_and_tasks(self):
        t = self.t

        async def step(name):
            await asyncio.sleep(0)
            with t.span(name) as s:
                await asyncio.sleep(0)
                return shmtrace.current_flow(), s.flow

        async def request(fid):
            with shmtrace.flow(fid):
                first = await step("first")
                task = asyncio.create_task(step("task"))  # copies the context
            # the task keeps the flow it was made in after the block is left
            return first, await task, shmtrace.current_flow()

        async def main():
            return await asyncio.gather(request(11), request(22), request(0))

        got = asyncio.run(main())
        self.assertEqual(got, [((11, 11), (11, 11), 0), ((22, 22), (22, 22), 0),
                               ((0, 0), (0, 0), 0)])

    def test_flow_follows_copy_context_into_threads(self):
        seen = {}

        def work(key):
            with self.t.span("in thread") as s:
                seen[key] = (shmtrace.current_flow(), s.flow)

        with shmtrace.flow(33):
            ctx = contextvars.copy_context()
            plain = threading.Thread(target=work, args=("plain",))
            plain.start()
            plain.join()
        copied = threading.Thread(target=ctx.run, args=(work, "copied"))
        copied.start()
        copied.join()
        # a thread started without the context starts without the flow
        self.assertEqual(seen, {"copied": (33, 33), "plain": (0, 0)})


class TestTracedFlow(RingTest):
    def test_per_call_flow_joins_a_flow_devtools_finds(self):
        t = self.t
        inside = []

        @shmtrace.traced("handle", cat="rpc", tracer=t, flow=lambda req, *, retry=False: req.flow)
        def handle(req, *, retry=False):
            inside.append(shmtrace.current_flow())
            with t.span("db", cat="rpc"):  # the call's flow: the current one
                pass
            return req.payload

        @shmtrace.traced("reply", cat="rpc", tracer=t, flow=lambda req: req.flow)
        async def reply(req):
            await asyncio.sleep(0)
            with t.span("send", cat="rpc"):
                await asyncio.sleep(0)
            return req.payload

        async def replies(reqs):
            return await asyncio.gather(*(reply(r) for r in reqs))

        reqs = [Request(t.flow_new(), i) for i in range(3)]
        for r in reqs:
            with t.span("submit", cat="rpc", flow=r.flow):
                pass
        self.assertEqual([handle(r, retry=True) for r in reqs], [0, 1, 2])
        self.assertEqual(inside, [r.flow for r in reqs])
        self.assertEqual(shmtrace.current_flow(), 0)  # restored after each call
        self.assertEqual(asyncio.run(replies(reqs)), [0, 1, 2])
        self.t.flush()
        _, _, trace = util.export(self.tmp.name, "--ring", self.ring)
        seen = util.devtools(trace, "--expect-flows", "3")
        for flow in seen["flows"]:
            self.assertEqual([ev[3] for ev in flow], ["submit", "handle", "db", "reply", "send"])

    def test_static_none_and_computed_flows(self):
        t = self.t
        flows = []

        def traced(flow):
            @shmtrace.traced("f", tracer=t, flow=flow)
            def f():
                with t.span("inner") as s:
                    flows.append(s.flow)
            return f

        traced(7)()
        traced(None)()
        traced(lambda: None)()  # None from the callable: the current flow
        with shmtrace.flow(9):
            traced(None)()
            traced(lambda: None)()
            traced(lambda: 0)()  # 0: no flow inside the call
        self.assertEqual(flows, [7, 0, 0, 9, 9, 0])

    def test_bad_flows(self):
        for bad, exc in (("1", TypeError), (1.5, TypeError), (-1, OverflowError),
                         (2 ** 64, OverflowError)):
            with self.assertRaises(exc, msg=repr(bad)):
                shmtrace.traced(flow=bad)
        for bad, exc in (("1", TypeError), (-1, OverflowError)):
            @shmtrace.traced(tracer=self.t, flow=lambda: bad)
            def f():
                raise AssertionError("called")
            with self.assertRaises(exc, msg=repr(bad)):
                f()
        self.assertEqual(shmtrace.current_flow(), 0)


class TestFlowRoles(RingTest):
    def test_role_helpers(self):
        fid = self.t.flow_new()
        recv, term = shmtrace.FLOW_RECEIVES, shmtrace.FLOW_TERMINATES
        self.assertEqual((recv, term, shmtrace.FLOW_ID_MASK), (1 << 53, 1 << 54, (1 << 53) - 1))
        self.assertEqual(shmtrace.flow_recv(fid), fid | recv)
        self.assertEqual(shmtrace.flow_end(fid), fid | term)
        self.assertEqual(shmtrace.flow_reply(fid), fid | recv | term)
        self.assertEqual(shmtrace.flow_end(shmtrace.flow_recv(fid)), shmtrace.flow_reply(fid))
        self.assertEqual(shmtrace.flow_id(shmtrace.flow_reply(fid)), fid)
        for helper in (shmtrace.flow_recv, shmtrace.flow_end, shmtrace.flow_reply):
            self.assertEqual(helper(0), 0)  # no flow stays none
            self.assertEqual(helper(recv), 0)  # a role without an id is none
            for bad, exc in (("1", TypeError), (-1, OverflowError), (2 ** 64, OverflowError)):
                with self.assertRaises(exc, msg=repr(bad)):
                    helper(bad)
        with self.t.span("s", flow=shmtrace.flow_reply(fid)) as s:
            self.assertEqual(s.flow, fid | recv | term)  # recorded as given

    def test_wait_reply_comes_back(self):
        """A request and its reply, twice with one flow id: the server
        thread handles inside the client's "wait reply" span, which
        receives and ends the flow, so each flow goes send, handle, wait
        reply, and the id's second use is a second flow."""
        t = self.t
        fid = t.flow_new()
        requests, replies = queue.Queue(), queue.Queue()

        def server():
            while (f := requests.get()) is not None:
                with t.span("handle", cat="rpc", flow=f):
                    pass
                replies.put(f)

        th = threading.Thread(target=server)
        th.start()
        for _ in range(2):
            with t.span("send", cat="rpc", flow=fid):
                pass
            with t.span("wait reply", cat="rpc", flow=shmtrace.flow_reply(fid)):
                requests.put(fid)
                replies.get()
        requests.put(None)
        th.join()
        t.flush()
        events, _, trace = util.export(self.tmp.name, "--ring", self.ring)
        ends = [e for e in events if e.get("ph") == "i" and e["name"] == "wait reply"]
        self.assertEqual([e["args"] for e in ends], [{"receives": True}] * 2)
        seen = util.devtools(trace, "--expect-flows", "2")
        for flow in seen["flows"]:
            self.assertEqual([ev[3] for ev in flow], ["send", "handle", "wait reply"])
