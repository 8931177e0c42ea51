# SPDX-License-Identifier: MIT
"""check-tree.py - checks the OTLP/JSON export of a tests/otlp/prefork.c
capture: the spans nest as the threads ran them, and each request is one
trace whose hops follow each other.

Usage: check-tree.py FILE REQUESTS TRACEPARENT [--flows-only]
  FILE         the export (one ExportTraceServiceRequest a line)
  REQUESTS     the requests of new flows the client sent
  TRACEPARENT  the header of the one request a caller passed on
  --flows-only the export was made with --flows-only: the hops alone,
               each a child of the one before
Exits 0 when all holds, 1 with the reasons on stderr.

Read with Python's own json module, apart from the exporter's code: the
parents are checked against the times alone (the innermost span of the
thread that encloses a span), the flows against the flow ids.
"""
import collections
import json
import sys

errors = []


def fail(msg):
    if len(errors) < 30:
        errors.append(msg)


def load(path):
    spans = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            for rs in json.loads(line)["resourceSpans"]:
                res = {a["key"]: list(a["value"].values())[0] for a in rs["resource"]["attributes"]}
                for ss in rs["scopeSpans"]:
                    for s in ss["spans"]:
                        s["attr"] = {a["key"]: list(a["value"].values())[0] for a in s["attributes"]}
                        s["pid"] = res["process.pid"]
                        s["service"] = res["service.name"]
                        s["thread"] = (res["process.pid"], s["attr"]["thread.id"])
                        s["t0"] = int(s["startTimeUnixNano"])
                        s["t1"] = int(s["endTimeUnixNano"])
                        s["flow"] = s["attr"].get("shmtrace.flow.id")
                        spans.append(s)
    return spans


def enclosing(spans):
    """Each span's innermost enclosing span of its thread, from the times."""
    out, per = {}, collections.defaultdict(list)
    for s in spans:
        per[s["thread"]].append(s)
    for v in per.values():
        v.sort(key=lambda s: (s["t0"], -s["t1"]))
        stack = []
        for s in v:
            while stack and s["t1"] > stack[-1]["t1"]:
                stack.pop()
            out[s["spanId"]] = stack[-1] if stack else None
            stack.append(s)
    return out


def links(s, why):
    return [l for l in s["links"]
            if {"key": "shmtrace.link", "value": {"stringValue": why}} in l["attributes"]]


def check_nesting(spans, enc, by_id):
    """Every span inside another on its thread is its child, in its trace."""
    nested = 0
    for s in spans:
        e = enc[s["spanId"]]
        if e is None:
            continue
        nested += 1
        if s.get("parentSpanId") != e["spanId"]:
            p = by_id.get(s.get("parentSpanId"), {}).get("name", s.get("parentSpanId"))
            fail(f"{s['name']} (thread {s['thread']}): parent {p}, not {e['name']}, which encloses it")
        if s["traceId"] != e["traceId"]:
            fail(f"{s['name']}: in another trace than {e['name']}, which encloses it")
    return nested


def check_request(hops, by_trace, enc, requests):
    """A request of a new flow: one trace of request > send, recv on the
    client; send > handle > decode, compute on a worker thread; recv
    follows handle by a link, its parent being request."""
    names = {h["name"]: h for h in hops}
    trace = by_trace[hops[0]["traceId"]]
    if sorted(s["name"] for s in trace) != ["compute", "decode", "handle", "recv", "request", "send"]:
        fail(f"flow {hops[0]['flow']}: its trace holds {sorted(s['name'] for s in trace)}")
        return
    send, handle, recv = names["send"], names["handle"], names["recv"]
    if enc[handle["spanId"]] is not None or handle.get("parentSpanId") != send["spanId"]:
        fail(f"flow {send['flow']}: handle is no child of send, the hop before it")
    if send["links"] or handle["links"]:
        fail(f"flow {send['flow']}: send or handle has a link")
    prev = links(recv, "previous_hop")
    if len(recv["links"]) != 1 or not prev or prev[0]["spanId"] != handle["spanId"] or \
            prev[0]["traceId"] != handle["traceId"]:
        fail(f"flow {send['flow']}: recv does not link to handle, the hop before it")
    root = [s for s in trace if s["name"] == "request"][0]
    if "parentSpanId" in root:
        fail(f"flow {send['flow']}: its request has a parent")
    requests.add(handle["thread"])


def check_traceparent(spans, by_trace, by_id, tp):
    """The request passed on with tp: GET /x is in the caller's trace, a
    child of the caller's span; handle inside it links to that span."""
    _, trace, parent, _ = tp.split("-")
    gets = [s for s in spans if s["name"] == "GET /x"]
    if len(gets) != 1:
        fail(f"{len(gets)} GET /x spans")
        return
    get = gets[0]
    if get["traceId"] != trace or get.get("parentSpanId") != parent:
        fail(f"GET /x: trace {get['traceId']}, parent {get.get('parentSpanId')}: not the caller's "
             f"({trace}, {parent})")
    names = sorted(s["name"] for s in by_trace[trace])
    if names != ["GET /x", "compute", "decode", "handle"]:
        fail(f"the caller's trace holds {names}")
    handle = [s for s in by_trace[trace] if s["name"] == "handle"][0]
    prev = links(handle, "previous_hop")
    if not prev or prev[0]["spanId"] != parent or prev[0]["traceId"] != trace:
        fail("handle of the passed-on request does not link to the caller's span")
    if any(s["name"].startswith("traceparent ") for s in spans):
        fail("the traceparent's instant is exported as a span")


def check_flows(spans, by_trace):
    """Each flow is exactly one trace, and a trace holds one flow."""
    flows = collections.defaultdict(list)
    for s in spans:
        if s["flow"] is not None:
            flows[s["flow"]].append(s)
    for fid, hops in flows.items():
        if len({h["traceId"] for h in hops}) != 1:
            fail(f"flow {fid} is in {len({h['traceId'] for h in hops})} traces")
    for tid, v in by_trace.items():
        if len({s["flow"] for s in v if s["flow"] is not None}) > 1:
            fail(f"trace {tid} holds several flows")
    return flows


def check_flows_only(spans, flows, requests, tp):
    """--flows-only: the hops alone, each a child of the hop before it (the
    first of the request passed on, of the caller's span)."""
    _, trace, parent, _ = tp.split("-")
    if any(s["flow"] is None for s in spans):
        fail("--flows-only exported spans of no flow")
    for fid, hops in flows.items():
        if len(hops) == 1:
            if hops[0]["traceId"] != trace or hops[0].get("parentSpanId") != parent:
                fail(f"flow {fid}: {hops[0]['name']} alone, not a child of the caller's span")
            continue
        hops.sort(key=lambda s: s["t0"])
        if [h["name"] for h in hops] != ["send", "handle", "recv"] or "parentSpanId" in hops[0]:
            fail(f"flow {fid}: hops {[h['name'] for h in hops]}")
            continue
        for a, b in zip(hops, hops[1:]):
            if b.get("parentSpanId") != a["spanId"] or b["links"]:
                fail(f"flow {fid}: {b['name']} is no child of {a['name']}")
    if len(flows) != requests + 1:
        fail(f"{len(flows)} flows, expected {requests + 1}")


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    spans = load(sys.argv[1])
    requests = int(sys.argv[2])
    by_id = {s["spanId"]: s for s in spans}
    by_trace = collections.defaultdict(list)
    for s in spans:
        by_trace[s["traceId"]].append(s)
    if len(by_id) != len(spans):
        fail("span ids used twice")
    flows = check_flows(spans, by_trace)
    if "--flows-only" in sys.argv:
        check_flows_only(spans, flows, requests, sys.argv[3])
    else:
        enc = enclosing(spans)
        nested = check_nesting(spans, enc, by_id)
        threads = set()
        for hops in flows.values():
            if any(h["name"] == "send" for h in hops):
                check_request(hops, by_trace, enc, threads)
        news = sum(1 for hops in flows.values() if any(h["name"] == "send" for h in hops))
        if news != requests or len(flows) != requests + 1:
            fail(f"{news} requests of new flows and {len(flows)} flows, expected {requests} "
                 f"and {requests + 1}")
        # the prefork shape: workers' threads of two processes or more
        if len({pid for pid, _ in threads}) < 2 or len(threads) < 4:
            fail(f"the requests were handled by threads {sorted(threads)}")
        check_traceparent(spans, by_trace, by_id, sys.argv[3])
        if not errors:
            print(f"{len(spans)} spans, {nested} nested, {len(flows)} flows in "
                  f"{len(by_trace)} traces")
    for e in errors:
        print(f"check-tree: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
