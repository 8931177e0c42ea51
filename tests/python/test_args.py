# SPDX-License-Identifier: MIT
"""test_args.py - arguments of Python spans and instants (span(args=),
Span.set(), instant(args=)): int and str values reach the Chrome JSON's
"args" and the OTLP attributes; a key set again takes its new value; more
than a record holds is refused (args=) or warned about (set()); bad types
raise, with tracing on and off alike; str values go with their records,
so distinct per-request values never use up the ring's string table."""
import collections
import json
import os
import types
import unittest
import warnings

import shmtrace
import util
from util import RingTest


def otlp_spans(path):
    """{name: (attributes, events)} of the OTLP JSON lines file, with the
    attributes' values as Python values and the exporter's prefix of
    argument keys taken off."""
    def value(v):
        if "intValue" in v:
            return int(v["intValue"])  # an int64 is a JSON string in OTLP
        return v.get("stringValue")

    def attrs(lst):
        return {a["key"].removeprefix("shmtrace.arg."): value(a["value"]) for a in lst}

    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for sp in ss["spans"]:
                        out[sp["name"]] = (attrs(sp["attributes"]),
                                           {e["name"]: attrs(e["attributes"])
                                            for e in sp.get("events", [])})
    return out


class TestTextValues(RingTest):
    def strings_used(self):
        st = json.loads(util.tool("stat", self.ring, "--json").stdout)
        return st["strings"], st["string_bytes_used"]

    def test_distinct_str_values_leave_the_string_table_alone(self):
        t = self.t
        with t.span("request", cat="rpc", args={"url": "/"}):  # name and key interned
            pass
        before = self.strings_used()
        for i in range(2000):
            with t.span("request", cat="rpc", args={"url": f"/items/{i}?q=\u00e9\"x"}):
                pass
        t.flush()
        self.assertEqual(self.strings_used(), before)
        urls = {e["args"]["url"] for e in util.spans(self.export(), "request")}
        self.assertEqual(urls - {"/"}, {f"/items/{i}?q=\u00e9\"x" for i in range(2000)})

    def test_long_str_value_is_cut_with_a_marker(self):
        with self.t.span("big", args={"body": "\u00e9" * 2000}):
            pass
        body = util.spans(self.export(), "big")[0]["args"]["body"]
        self.assertTrue(body.startswith("\u00e9" * 100))
        self.assertIn("[cut ", body)
        self.assertLessEqual(len(body.split("\u2026[cut")[0].encode()), 1024)


class TestArgs(RingTest):
    def record(self):
        t = self.t
        with t.span("request", cat="rpc", flow=t.flow_new(),
                    args={"bytes": 512, "method": "GET"}) as s:
            s.set("status", "ok")
            s.set("bytes", 2 ** 63 - 1)  # again: the new value
            s.set("delta", -2 ** 63)
            # any mapping, not only a dict: one written in Python too
            t.instant("retry", cat="rpc",
                      args=types.MappingProxyType({"attempt": 2, "why": "busy"}))
            t.instant("chained", cat="rpc",
                      args=collections.ChainMap({"attempt": 3}, collections.UserDict(why="down")))

    def test_args_in_chrome_json(self):
        self.record()
        ev = self.export()
        self.assertEqual(util.spans(ev, "request")[0]["args"],
                         {"bytes": 2 ** 63 - 1, "method": "GET", "status": "ok",
                          "delta": -2 ** 63})
        inst = [e for e in ev if e.get("ph") == "i" and e["name"] == "retry"]
        self.assertEqual(inst[0]["args"], {"attempt": 2, "why": "busy"})
        inst = [e for e in ev if e.get("ph") == "i" and e["name"] == "chained"]
        self.assertEqual(inst[0]["args"], {"attempt": 3, "why": "down"})

    def test_args_in_otlp_attributes(self):
        self.record()
        self.t.flush()
        out = os.path.join(self.tmp.name, "spans.jsonl")
        r = util.tool("export", "--ring", self.ring, "--format", "otlp", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        attrs, events = otlp_spans(out)["request"]
        for k, v in {"bytes": 2 ** 63 - 1, "method": "GET", "status": "ok",
                     "delta": -2 ** 63}.items():
            self.assertEqual(attrs.get(k), v, k)
        self.assertEqual({k: events["retry"].get(k) for k in ("attempt", "why")},
                         {"attempt": 2, "why": "busy"})

    def test_args_stay_with_a_span_entered_again(self):
        s = self.t.span("twice", args={"n": 1})
        with s:
            pass
        with s:
            s.set("n", 2)
        self.assertEqual([e["args"] for e in util.spans(self.export(), "twice")],
                         [{"n": 1}, {"n": 2}])

    def test_a_str_value_stays_with_a_span_entered_again(self):
        # the span holds the only reference to the value, larger than
        # malloc's largest mmap threshold (32 MiB), so that a str freed
        # too early is unmapped, and reading it faults
        s = self.t.span("twice-str")
        with s:
            s.set("k", "v" * (40 << 20) + "!")
        with s:
            pass
        got = [e["args"]["k"] for e in util.spans(self.export(), "twice-str")]
        self.assertEqual(len(got), 2)
        self.assertEqual(got[0], got[1])
        self.assertTrue(got[0].startswith("vvvv"))

    def test_a_fifth_key_is_warned_about_and_not_kept(self):
        with self.t.span("full", args={"a": 1, "b": 2, "c": 3}) as s:
            s.set("d", 4)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                s.set("e", 5)
                s.set("a", 10)  # a key it has: replaced, no warning
            self.assertEqual([(x.category, str(x.message)) for x in w],
                             [(RuntimeWarning, "argument 'e' not kept: a record has at "
                               "most 4 arguments")])
        with self.assertRaises(ValueError):
            self.t.span("too many", args=dict.fromkeys("abcde", 1))
        with self.assertRaises(ValueError):
            self.t.instant("too many", args=dict.fromkeys("abcde", 1))
        ev = self.export()
        self.assertEqual(util.spans(ev, "full")[0]["args"], {"a": 10, "b": 2, "c": 3, "d": 4})
        self.assertEqual(util.spans(ev, "too many"), [])

    def test_bad_args(self):
        t = self.t
        with t.span("s") as s:
            for bad, exc in (((1, 1), TypeError), (("k", 1.5), TypeError),
                             (("k", None), TypeError), (("k", b"x"), TypeError),
                             (("k", 2 ** 63), OverflowError),
                             (("k", -2 ** 63 - 1), OverflowError)):
                with self.assertRaises(exc, msg=repr(bad)):
                    s.set(*bad)
            with self.assertRaises(TypeError):
                s.set("k")

        class KeysOnly:  # pylint: disable=too-few-public-methods
            def keys(self):
                return ["k"]

        for bad, exc in (([("k", 1)], TypeError), ({1: 1}, TypeError), (KeysOnly(), TypeError),
                         ({"k": 1.0}, TypeError), ({"k": 2 ** 64}, OverflowError)):
            with self.assertRaises(exc, msg=repr(bad)):
                t.span("x", args=bad)
            with self.assertRaises(exc, msg=repr(bad)):
                t.instant("x", args=bad)
        self.assertEqual([e.get("args") for e in util.spans(self.export(), "s")], [None])


class TestArgsOff(unittest.TestCase):
    def test_types_checked_with_tracing_off(self):
        t = shmtrace.open()  # tests/e2e/python.sh unsets SHMTRACE_RING: off
        self.assertFalse(t.enabled)
        with t.span("x", args={"k": 1, "s": "v"}) as s:
            s.set("k", 2)
            s.set("s", "w")
            with self.assertRaises(TypeError):
                s.set("k", 1.5)
        with self.assertRaises(TypeError):
            t.span("x", args={"k": []})
        with self.assertRaises(ValueError):
            t.span("x", args=dict.fromkeys("abcde", 1))
        self.assertIsNone(t.instant("i", args={"k": 1}))
        with self.assertRaises(TypeError):
            t.instant("i", args={"k": 1.5})


if __name__ == "__main__":
    unittest.main()
