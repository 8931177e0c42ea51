#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check-stream.py - what the live stream delivered against the file export.

  check-stream.py RECEIVED EXPORT [--sample all|flows|ratio=R] [--rejected N]
                  [--spans N]

RECEIVED is tests/otlp/receiver.py's spans.jsonl; EXPORT the lines of
`shmtrace export CAPTURE --format otlp` of the same capture (OTLP/JSON).
Every span received must be there exactly once (no span id twice) and be
the export's span of that id: the same trace, parent, name, times,
attributes, events, links and resource. Every span of the export must
have been received, but those the sampling leaves out (flows: spans of
traces without a flow id; ratio=R: traces whose id's low half is at or
above R * 2^64) and --rejected N spans the endpoint rejected. --spans N:
the export holds exactly N spans. Prints what differs first, and exits 1.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from receiver import json_spans  # noqa: E402


def fail(msg):
    print("check-stream: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def load_received(path):
    spans = {}
    with open(path) as f:
        for line in f:
            s = json.loads(line)
            if s['spanId'] in spans:
                fail("span %s (%s) received twice" % (s['spanId'], s['name']))
            spans[s['spanId']] = s
    return spans


def load_export(path):
    spans = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                for s in json_spans(json.loads(line)):
                    spans[s['spanId']] = s
    return spans


def kept(span, flow_traces, sample):
    if sample == 'flows':
        return span['traceId'] in flow_traces
    if sample.startswith('ratio='):
        bound = float(sample[6:]) * 2.0 ** 64
        return int(span['traceId'][16:], 16) < bound
    return True


def main():
    args = sys.argv[1:]
    received, export = load_received(args[0]), load_export(args[1])
    sample, rejected, nspans = 'all', 0, None
    for i in range(2, len(args), 2):
        if args[i] == '--sample':
            sample = args[i + 1]
        elif args[i] == '--rejected':
            rejected = int(args[i + 1])
        elif args[i] == '--spans':
            nspans = int(args[i + 1])
        else:
            fail("unknown argument " + args[i])
    if nspans is not None and len(export) != nspans:
        fail("the export holds %d spans, not %d" % (len(export), nspans))
    flow_traces = {s['traceId'] for s in export.values() if 'shmtrace.flow.id' in s['attributes']}
    for sid, s in received.items():
        e = export.get(sid)
        if e is None:
            fail("span %s (%s) received, not in the export" % (sid, s['name']))
        for k in ('traceId', 'parentSpanId', 'name', 'start', 'end', 'attributes', 'events',
                  'links', 'resource'):
            if s[k] != e[k]:
                fail("span %s (%s): %s is %r, the export's %r" % (sid, s['name'], k, s[k], e[k]))
        if not kept(s, flow_traces, sample):
            fail("span %s (%s) received, --otlp-sample %s leaves it out" % (sid, s['name'], sample))
    want = [s for s in export.values() if kept(s, flow_traces, sample)]
    missing = [s for s in want if s['spanId'] not in received]
    if len(missing) != rejected:
        fail("%d spans of the export not received (%d rejected), e.g. %s" %
             (len(missing), rejected, missing[0]['name'] if missing else '-'))
    print("check-stream: %d spans received, %d left out by --otlp-sample %s, %d rejected: "
          "all as the export" % (len(received), len(export) - len(want), sample, rejected))


if __name__ == '__main__':
    main()
