#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check-perfetto.py - checks a Perfetto export against the Chrome export
of the same capture (tests/e2e/perfetto.sh).

  check-perfetto.py TEXT CHROME_JSON [--expect-flows N] [--expect-unfinished N]

TEXT is `protoc --decode=perfetto.Trace tests/perfetto/perfetto_trace.proto`
of the .pftrace. The packets are read as the trace processor reads them:
interned strings and track descriptors checked where they come in the
file, then all events sorted by time, keeping the file's order within one
time, and each track's slices stacked from its SLICE_BEGIN, SLICE_END and
INSTANT events, flows followed from flow_ids to terminating_flow_ids. The
result must be the Chrome export's, slice for slice (pid, tid, name,
category, start, end, arguments, nesting depth), instant for instant,
counter for counter and flow for flow, with the same process and thread
names, loss instants and figures. The Chrome export moves a flow slice's
start later when another event of its thread starts at the same time (its
"flow_starts_moved"): such a slice matches on its end, with a start no
earlier than the Perfetto one (an instant, whose end moves with it, on
its thread and name, a few ns later), and the nesting of both is
computed from the Perfetto starts. Depth in the JSON is what the trace processor gives
complete events: sorted by start, longer first, in file order after that.
"""
import json
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from protoc_text import parse, unquote  # noqa: E402

# the Chrome export moves a flow slice by the fewest ns a viewer tells apart
# (one, below 2^53 ns), once per event it collides with
MOVE_MAX = 100


def fail(msg):
    print("check-perfetto: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def parse_text(path):
    """protoc's text format: a dict per message, field -> list of values."""
    def value(raw):
        if raw.startswith('"'):
            return unquote(raw).decode('utf-8')
        return int(raw) if re.match(r'^-?\d+$', raw) else raw
    with open(path, encoding='utf-8') as f:
        try:
            root = parse(f, value, named_only=True)
        except ValueError as e:
            fail(f"{path}:{e} (perfetto_trace.proto)")
    return root['packet']


def one(msg, key, default=None):
    v = msg.get(key, [])
    if len(v) > 1:
        fail(f"{key} given {len(v)} times in one message")
    return v[0] if v else default


BOOTTIME = 6


class Clocks:
    """Packet timestamps as the trace processor reads them, in file order:
    on the packet's timestamp_clock_id, else the sequence's default one
    (trace_packet_defaults), else the trace's time. A clock other than
    BOOTTIME (the trace's time) goes through the last ClockSnapshot that
    has it and BOOTTIME; an incremental clock's timestamp adds to its last
    value on the sequence, the snapshot's to begin with."""

    def __init__(self):
        self.default, self.snap, self.last = None, {}, {}
        self.deltas = self.absolute = 0

    def cleared(self):
        self.default = None

    def defaults(self, d):
        self.default = one(d, 'timestamp_clock_id')

    def snapshot(self, i, cs):
        clocks = {}
        for c in cs.get('clocks', []):
            if one(c, 'unit_multiplier_ns', 1) != 1:
                fail(f"packet {i}: clock {one(c, 'clock_id')} is not in ns")
            clocks[one(c, 'clock_id')] = (one(c, 'timestamp', 0),
                                          one(c, 'is_incremental', 'false') in (1, 'true'))
        if BOOTTIME not in clocks:
            fail(f"packet {i}: a clock snapshot without BOOTTIME")
        for cid, (ts, inc) in clocks.items():
            self.snap[cid] = (ts, inc, clocks[BOOTTIME][0])
            if inc:
                self.last[cid] = ts

    def time(self, i, p):
        ts = one(p, 'timestamp')
        cid = one(p, 'timestamp_clock_id') or self.default
        if ts is None or cid in (None, BOOTTIME):
            self.absolute += ts is not None
            return ts
        if cid not in self.snap:
            fail(f"packet {i}: timestamp on clock {cid}, which no snapshot gave")
        base, inc, boot = self.snap[cid]
        if inc:
            self.last[cid] += ts
            ts = self.last[cid]
            self.deltas += 1
        else:
            self.absolute += 1
        return ts - base + boot


class Proto:
    """The packets in file order: tracks, interned strings, events."""

    def __init__(self, packets):
        self.tracks, self.events = {}, []
        self.clocks = Clocks()
        interned = {k: {} for k in ('event_names', 'event_categories', 'debug_annotation_names')}
        if not packets or not one(packets[0], 'sequence_flags', 0) & 1:
            fail("the first packet does not clear the sequence's incremental state")
        for i, p in enumerate(packets):
            if one(p, 'trusted_packet_sequence_id') != 1:
                fail(f"packet {i}: not on sequence 1")
            if one(p, 'sequence_flags', 0) & 1:
                self.clocks.cleared()
            if 'trace_packet_defaults' in p:
                self.clocks.defaults(one(p, 'trace_packet_defaults'))
            if 'clock_snapshot' in p:
                self.clocks.snapshot(i, one(p, 'clock_snapshot'))
                continue
            for d in p.get('interned_data', []):
                for k, table in interned.items():
                    for e in d.get(k, []):
                        if one(e, 'iid') in table:
                            fail(f"packet {i}: {k} iid {one(e, 'iid')} interned twice")
                        table[one(e, 'iid')] = one(e, 'name')
            if 'track_descriptor' in p:
                self.track(i, one(p, 'track_descriptor'))
            if 'track_event' in p:
                self.event(i, p, one(p, 'track_event'), interned)

    def track(self, i, td):
        uuid, parent = one(td, 'uuid'), one(td, 'parent_uuid')
        if uuid in self.tracks:
            fail(f"packet {i}: track {uuid} described twice")
        if parent is not None and parent not in self.tracks:
            fail(f"packet {i}: track {uuid}'s parent {parent} is not described before it")
        self.tracks[uuid] = td

    def event(self, i, p, te, interned):
        def lookup(table, iid):
            if iid not in interned[table]:
                fail(f"packet {i}: {table} iid {iid} used before it is interned")
            return interned[table][iid]
        uses = 'name_iid' in te or te.get('category_iids') or any(
            'name_iid' in a for a in te.get('debug_annotations', []))
        if uses and not one(p, 'sequence_flags', 0) & 2:
            fail(f"packet {i}: uses interned strings without SEQ_NEEDS_INCREMENTAL_STATE")
        if one(te, 'track_uuid') not in self.tracks:
            fail(f"packet {i}: track {one(te, 'track_uuid')} is not described before it")
        name = lookup('event_names', te['name_iid'][0]) if 'name_iid' in te else one(te, 'name')
        cats = [lookup('event_categories', c) for c in te.get('category_iids', [])]
        cats += te.get('categories', [])
        args = []
        for a in te.get('debug_annotations', []):
            key = lookup('debug_annotation_names', a['name_iid'][0]) if 'name_iid' in a \
                else one(a, 'name')
            val = one(a, 'int_value', one(a, 'string_value'))
            if 'bool_value' in a:
                val = one(a, 'bool_value') in (1, 'true')
            args.append((key, val))
        self.events.append(dict(i=i, ts=self.clocks.time(i, p), type=one(te, 'type'),
                                track=one(te, 'track_uuid'), name=name, cat=','.join(cats),
                                args=args, flows=te.get('flow_ids', []),
                                term=te.get('terminating_flow_ids', []),
                                value=one(te, 'counter_value')))


def pop_done(stack, ts, dur, where):
    """The trace processor's stack before an event at ts: slices that ended
    pop (one that ends where an instant is does not hold it); a slice that
    ended below one still open is a misnesting."""
    while stack and stack[-1]['end'] is not None and (
            stack[-1]['end'] < ts or (stack[-1]['end'] == ts and not (
                stack[-1]['end'] == stack[-1]['ts'] and dur == 0))):
        stack.pop()
    for s in stack:
        if s['end'] is not None and s['end'] < ts and any(o['end'] is None for o in stack):
            fail(f"{where}: slice {s['name']} ended below a slice still open")


def slices_of(pr):
    """Slices as the trace processor makes them, and the flows between them."""
    stacks, out, flows, closed = defaultdict(list), [], defaultdict(list), set()
    for e in sorted(pr.events, key=lambda e: (e['ts'], e['i'])):
        st, where = stacks[e['track']], f"packet {e['i']}"
        if e['type'] == 'TYPE_COUNTER':
            out.append(dict(e, kind='counter'))
            continue
        if e['type'] == 'TYPE_SLICE_END':
            pop_done(st, e['ts'], -1, where)
            open_ = [s for s in st if s['end'] is None]
            if not open_:
                fail(f"{where}: SLICE_END with no slice open on track {e['track']}")
            open_[-1]['end'] = e['ts']
            if st[-1] is open_[-1]:
                st.pop()
            continue
        if e['type'] not in ('TYPE_SLICE_BEGIN', 'TYPE_INSTANT'):
            fail(f"{where}: event type {e['type']}")
        instant = e['type'] == 'TYPE_INSTANT'
        pop_done(st, e['ts'], 0 if instant else -1, where)
        s = dict(e, kind='slice', depth=len(st), end=e['ts'] if instant else None)
        st.append(s)
        out.append(s)
        for f in e['flows']:
            if f in closed:
                fail(f"{where}: flow {f} goes on after its terminating event")
            flows[f].append((s, 'flow_ids'))
        for f in e['term']:
            if f in flows:
                flows[f].append((s, 'terminating_flow_ids'))
                closed.add(f)
    for s in out:
        if s['kind'] == 'slice' and s['end'] is None:
            fail(f"packet {s['i']}: slice {s['name']} never ends")
    return out, flows


def ns(v):
    """A Chrome "ts"/"dur" (microseconds, three decimals, kept as text) in ns."""
    us, _, frac = str(v).partition('.')
    return int(us) * 1000 + int((frac + '000')[:3])


class Pairs(dict):
    def __init__(self, pairs):
        super().__init__(pairs)
        self.pairs = pairs


def load_chrome(path):
    with open(path, encoding='utf-8') as f:
        return json.load(f, parse_float=str, object_pairs_hook=Pairs)


def chrome_depths(slices):
    """The trace processor's nesting of complete events: by start, longer
    first, then file order; a slice is popped by an event at its end,
    except an instant by an instant."""
    stacks = defaultdict(list)
    for s in sorted(slices, key=lambda s: (s['start'], -(s['end'] - s['start']), s['i'])):
        st, dur = stacks[(s['pid'], s['tid'])], s['end'] - s['start']
        while st and (st[-1]['end'] < s['start'] or (
                st[-1]['end'] == s['start'] and not (st[-1]['end'] == st[-1]['start'] and dur == 0))):
            st.pop()
        s['depth'] = len(st)
        st.append(s)


def chrome_model(doc):
    """Slices (X and thread instants), loss instants, counters, flow events
    and names of the Chrome export, in file order."""
    m = dict(slices=[], losses=[], counters=[], flows=defaultdict(list), pnames={}, tnames={})
    for i, e in enumerate(doc['traceEvents']):
        ph, pid, tid = e['ph'], e.get('pid'), e.get('tid')
        if ph in ('X', 'i') and e.get('s', 't') == 't':
            args = list(e['args'].pairs) if 'args' in e else []
            start = ns(e['ts'])
            m['slices'].append(dict(i=i, pid=pid, tid=tid, name=e['name'], cat=e['cat'],
                                    start=start, at=start,
                                    end=start + (ns(e['dur']) if ph == 'X' else 0),
                                    args=args))
        elif ph == 'i':
            m['losses'].append(e['name'])
        elif ph == 'C':
            m['counters'].append((pid, e['name'], e['cat'], ns(e['ts']), e['args'][e['name']]))
        elif ph in 'stf':
            m['flows'][e['id']].append((ph, pid, tid, ns(e['ts']), e['cat']))
        elif ph == 'M' and e['name'] == 'process_name':
            m['pnames'][pid] = e['args']['name']
        elif ph == 'M' and e['name'] == 'thread_name':
            m['tnames'][(pid, tid)] = e['args']['name']
    return m


def proto_slices(pr, out):
    """The Perfetto slices with their thread's pid and tid."""
    res = []
    for s in out:
        if s['kind'] != 'slice' or s['track'] == 1:
            continue
        th = one(pr.tracks[s['track']], 'thread')
        if th is None:
            fail(f"packet {s['i']}: a slice on track {s['track']}, which is no thread's")
        s.update(pid=one(th, 'pid'), tid=one(th, 'tid'), start=s['ts'])
        res.append(s)
    return res


def overlapping(cs, pairs):
    """The threads with spans that overlap without nesting (one begins
    inside another and ends after it), by the Perfetto starts: no stack of
    slices shows them, and their ends come out exchanged in Perfetto (the
    trace processor drops them from Chrome JSON). Their slices are
    compared without end and depth."""
    bad, by = set(), defaultdict(list)
    for c in cs:
        by[(c['pid'], c['tid'])].append((pairs[id(c)]['start'], c['end']))
    for k, v in by.items():
        ends = []
        for start, end in sorted(v, key=lambda se: (se[0], se[0] - se[1])):
            while ends and ends[-1] <= start:
                ends.pop()
            if ends and end > ends[-1]:
                bad.add(k)
                break
            ends.append(end)
    return bad


def match(ps, cs, moved_max):
    """Pairs each Chrome slice with a Perfetto one: same thread, name and
    end, and the same start, or (a flow record's slice the Chrome export
    moved, as many as it says it moved) one a few ns later; what is left, by
    thread, name and start (spans that overlap come out of Perfetto with
    other ends); then instants moved, by thread and name, a few ns later.
    Returns {id(chrome slice): perfetto slice}."""
    pairs, moved, left = {}, 0, []
    for key in (lambda s: (s['pid'], s['tid'], s['name'], 'end', s['end']),
                lambda s: (s['pid'], s['tid'], s['name'], 'start', s['start']),
                lambda s: (s['pid'], s['tid'], s['name'],
                           'point' if s['end'] == s['start'] else ('span', s['start']))):
        groups = defaultdict(list)
        for p in ps:
            groups[key(p)].append(p)
        left = []
        for c in sorted(cs, key=lambda c: c['start']):
            if id(c) in pairs:
                continue
            g = [p for p in groups.get(key(c), []) if p['start'] == c['start'] or (
                0 < c['start'] - p['start'] <= MOVE_MAX and key(c)[3] in ('end', 'point'))]
            if not g:
                left.append(c)
                continue
            p = min(g, key=lambda p: (p['start'] != c['start'], p['start']))
            moved += p['start'] != c['start']
            groups[key(c)].remove(p)
            pairs[id(c)] = p
        ps = [p for g in groups.values() for p in g]
    if left:
        fail(f"the Chrome slice {left[0]['name']} at {left[0]['start']} (pid {left[0]['pid']} tid "
             f"{left[0]['tid']}) is not in the Perfetto trace")
    if ps:
        fail(f"{len(ps)} Perfetto slices are not in the Chrome trace, e.g. {ps[0]['name']} "
             f"at {ps[0]['start']}")
    if moved > moved_max:
        fail(f"{moved} slices start later in Chrome, which moved {moved_max}")
    return pairs


def compare_slices(cs, pairs, bad):
    for c in cs:
        p = pairs[id(c)]
        where = f"slice {c['name']} at {p['start']} (pid {c['pid']} tid {c['tid']})"
        if p['cat'] != c['cat'] and p['cat'] not in c['cat'].split(','):
            fail(f"{where}: category {p['cat']!r}, Chrome {c['cat']!r}")
        if p['args'] != c['args']:
            fail(f"{where}: arguments {p['args']}, Chrome {c['args']}")
        if c['end'] == c['start'] and p['end'] == p['start']:
            c['end'] = p['end']	# an instant: its end moved with its start
        if (c['pid'], c['tid']) not in bad and p['end'] != c['end']:
            fail(f"{where}: ends at {p['end']}, in Chrome at {c['end']}")
        c['start'] = p['start']	# the nesting of both from the Perfetto starts
    chrome_depths(cs)
    for c in cs:
        p = pairs[id(c)]
        if (c['pid'], c['tid']) not in bad and p['depth'] != c['depth']:
            fail(f"slice {c['name']} at {p['start']} (pid {c['pid']} tid {c['tid']}): depth "
                 f"{p['depth']}, Chrome {c['depth']}")


def compare_flows(cm, cs, pairs, flows):
    """Each Chrome flow id joins the same slices, in the same order, in
    Perfetto: flow_ids on all but the last, terminating_flow_ids on it.
    Hops that begin at one time (on different threads) may come in another
    order: the Chrome export moves such starts a nanosecond apart, which
    DevTools' binding needs and Perfetto does not (docs/PERFETTO.md)."""
    bound = {(c['pid'], c['tid'], c['at'], c['cat']): c for c in cs}
    if set(cm['flows']) != set(flows):
        fail(f"flow ids {sorted(set(cm['flows']) ^ set(flows))[:5]} are in one trace only")
    for fid, evs in cm['flows'].items():
        want = []
        for ph, pid, tid, ts, cat in evs:
            c = bound.get((pid, tid, ts, cat))
            if c is None:
                fail(f"Chrome flow {fid}: no slice at {ts} on pid {pid} tid {tid}")
            want.append(id(pairs[id(c)]))
        got = flows[fid]
        wslices = [pairs[id(bound[(e[1], e[2], e[3], e[4])])] for e in evs]
        if [id(s) for s, _ in got] != want and (
                sorted(id(s) for s, _ in got) != sorted(want) or
                [s['start'] for s, _ in got] != [w['start'] for w in wslices]):
            fail(f"flow {fid}: Perfetto joins {[s['name'] for s, _ in got]}, Chrome "
                 f"{[pairs[id(bound[(e[1], e[2], e[3], e[4])])]['name'] for e in evs]}")
        kinds = [k for _, k in got]
        if kinds != ['flow_ids'] * (len(kinds) - 1) + ['terminating_flow_ids']:
            fail(f"flow {fid}: carried as {kinds}")


def compare_rest(pr, out, cm, meta):
    """Counters, loss instants, names and the export's figures."""
    counters = []
    for e in out:
        if e['kind'] == 'counter':
            td = pr.tracks[e['track']]
            proc = one(pr.tracks[one(td, 'parent_uuid')], 'process')
            counters.append((one(proc, 'pid'), one(td, 'name'), one(one(td, 'counter'), 'categories'),
                             e['ts'], e['value']))
    if sorted(counters) != sorted(cm['counters']):
        fail(f"counters differ: {len(counters)} in Perfetto, {len(cm['counters'])} in Chrome")
    own = [e for e in pr.events if e['track'] == 1]
    if sorted(e['name'] for e in own if e['name'] != 'shmtrace export') != sorted(cm['losses']):
        fail(f"loss instants differ: {[e['name'] for e in own]} / {cm['losses']}")
    figures = dict(next(e for e in own if e['name'] == 'shmtrace export')['args'])
    for k in ('records', 'flows', 'unfinished', 'args', 'args_lost', 'names_lost',
              'threads_unnamed', 'trace_start_ns', 'dropped', 'torn'):
        if figures.get(k) != meta[k]:
            fail(f"figure {k}: {figures.get(k)} in Perfetto, {meta[k]} in Chrome")
    for td in pr.tracks.values():
        p, t = one(td, 'process'), one(td, 'thread')
        if p and one(p, 'process_name') != cm['pnames'].get(one(p, 'pid')):
            fail(f"process {one(p, 'pid')} is named {one(p, 'process_name')!r}")
        if t and one(t, 'thread_name') != cm['tnames'].get((one(t, 'pid'), one(t, 'tid'))):
            fail(f"thread {one(t, 'tid')} is named {one(t, 'thread_name')!r}")


def main():
    argv, opts = sys.argv[1:], {}
    while len(argv) > 2 and argv[-2].startswith('--'):
        opts[argv[-2]] = int(argv[-1])
        argv = argv[:-2]
    if len(argv) != 2:
        fail("usage: check-perfetto.py TEXT CHROME_JSON [--expect-flows N] [--expect-unfinished N]")
    pr = Proto(parse_text(argv[0]))
    out, flows = slices_of(pr)
    doc = load_chrome(argv[1])
    meta, cm = doc['metadata']['shmtrace'], chrome_model(doc)
    ps, cs = proto_slices(pr, out), cm['slices']
    pairs = match(ps, cs, meta['flow_starts_moved'])
    bad = overlapping(cs, pairs)
    compare_slices(cs, pairs, bad)
    compare_flows(cm, cs, pairs, flows)
    compare_rest(pr, out, cm, meta)
    for opt, key in (('--expect-flows', 'flows'), ('--expect-unfinished', 'unfinished')):
        if opt in opts and meta[key] != opts[opt]:
            fail(f"{meta[key]} {key}, expected {opts[opt]}")
    print(f"check-perfetto: {len(cs)} slices and instants, {len(flows)} flows, "
          f"{len(cm['counters'])} counters, {sum(len(c['args']) for c in cs)} arguments and "
          f"{len(cm['losses'])} loss instants as in the Chrome export; deepest nesting "
          f"{max([c['depth'] for c in cs] or [0])}; timestamps: {pr.clocks.deltas} as deltas, "
          f"{pr.clocks.absolute} absolute" +
          (f"; {len(bad)} threads with spans that overlap, compared without end and depth"
           if bad else ""))


if __name__ == '__main__':
    main()
