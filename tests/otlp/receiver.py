#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""receiver.py - a loopback OTLP/HTTP endpoint for the live stream's tests.

  receiver.py DIR [--port P] [--script A,B,...] [--notify-after N[,M...]]

Takes POST /v1/traces over HTTP/1.1 with keep-alive, bodies in protobuf
(decoded by `protoc --decode` against tests/otlp/trace.proto, written from
opentelemetry-proto's field numbers: not our decoder) or OTLP/JSON,
gzipped or not, and appends each span it keeps to DIR/spans.jsonl, one
JSON object a line (ids in hex, times in ns, attributes as a map), and
each scope of the requests it keeps to DIR/scopes.jsonl (its resource's
and its own attributes, and how many spans it held: a request of no span
that carries the losses is seen there). Each request's answer is the next
of --script, then 200:

  200      OK (an empty ExportTraceServiceResponse)
  pN       200 with a partial success of N rejected spans (the last N of
           the request are not kept)
  503, 502, 504, 500, 400, 413  that status, nothing kept
  429      429 with Retry-After: 1
  stall    reads the request, says "stall" in the FIFO DIR/notify, then
           waits for a line in the FIFO DIR/release (the test's signal, no
           clock), then answers 200
  close    closes the connection without answering

DIR/log gets one line per request: "STATUS CONTENT-TYPE ENCODING SPANS",
and for those kept the spans rejected and the client's port (one port for
the requests of one connection).
With --notify-after N, once the N-th request was answered 200 it writes a
line into the FIFO DIR/notify (N,M,...: once the N-th was, then the M-th,
...). It holds both FIFOs (which the test makes) open from its start.
Prints its port once listening; SIGTERM stops it (the port refuses
connections from then on).
"""
import gzip
import http.server
import json
import os
import signal
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "trace.proto")
sys.path.insert(0, os.path.join(HERE, '..'))
from protoc_text import parse, unquote  # noqa: E402
def one(d, k, default=None):
    v = d.get(k)
    return v[0] if v else default


def pb_value(v):
    if 'string_value' in v:
        return one(v, 'string_value').decode('utf-8', 'replace')
    if 'int_value' in v:
        return int(one(v, 'int_value'))
    if 'bool_value' in v:
        return one(v, 'bool_value') == 'true'
    if 'double_value' in v:
        return float(one(v, 'double_value'))
    return None


def pb_attrs(lst):
    return {one(kv, 'key').decode(): pb_value(one(kv, 'value', {})) for kv in lst or []}


def pb_spans(req):
    """Spans of a decoded protobuf request, normalised."""
    out = []
    for rs in req.get('resource_spans', []):
        res = pb_attrs(one(rs, 'resource', {}).get('attributes'))
        for ss in rs.get('scope_spans', []):
            for sp in ss.get('spans', []):
                out.append({
                    'traceId': one(sp, 'trace_id', b'').hex(),
                    'spanId': one(sp, 'span_id', b'').hex(),
                    'parentSpanId': one(sp, 'parent_span_id', b'').hex(),
                    'name': one(sp, 'name', b'').decode('utf-8', 'replace'),
                    'kind': int(one(sp, 'kind', '0')),
                    'start': int(one(sp, 'start_time_unix_nano', '0')),
                    'end': int(one(sp, 'end_time_unix_nano', '0')),
                    'attributes': pb_attrs(sp.get('attributes')),
                    'events': [{'time': int(one(e, 'time_unix_nano', '0')),
                                'name': one(e, 'name', b'').decode('utf-8', 'replace'),
                                'attributes': pb_attrs(e.get('attributes'))}
                               for e in sp.get('events', [])],
                    'links': [{'traceId': one(ln, 'trace_id', b'').hex(),
                               'spanId': one(ln, 'span_id', b'').hex(),
                               'attributes': pb_attrs(ln.get('attributes'))}
                              for ln in sp.get('links', [])],
                    'resource': res,
                })
    return out


def pb_scopes(req):
    """Scopes of a decoded protobuf request: resource, scope, spans held."""
    out = []
    for rs in req.get('resource_spans', []):
        res = pb_attrs(one(rs, 'resource', {}).get('attributes'))
        for ss in rs.get('scope_spans', []):
            sc = one(ss, 'scope', {})
            out.append({'resource': res, 'name': one(sc, 'name', b'').decode(),
                        'attributes': pb_attrs(sc.get('attributes')),
                        'spans': len(ss.get('spans', []))})
    return out


def js_value(v):
    if 'stringValue' in v:
        return v['stringValue']
    if 'intValue' in v:
        return int(v['intValue'])
    if 'boolValue' in v:
        return v['boolValue']
    if 'doubleValue' in v:
        return float(v['doubleValue'])
    return None


def js_attrs(lst):
    return {kv['key']: js_value(kv.get('value', {})) for kv in lst or []}


def json_spans(req):
    """Spans of an OTLP/JSON request (the file export's lines too), normalised."""
    out = []
    for rs in req.get('resourceSpans', []):
        res = js_attrs(rs.get('resource', {}).get('attributes'))
        for ss in rs.get('scopeSpans', []):
            for sp in ss.get('spans', []):
                out.append({
                    'traceId': sp.get('traceId', ''), 'spanId': sp.get('spanId', ''),
                    'parentSpanId': sp.get('parentSpanId', ''), 'name': sp.get('name', ''),
                    'kind': sp.get('kind', 0), 'start': int(sp.get('startTimeUnixNano', 0)),
                    'end': int(sp.get('endTimeUnixNano', 0)),
                    'attributes': js_attrs(sp.get('attributes')),
                    'events': [{'time': int(e.get('timeUnixNano', 0)), 'name': e.get('name', ''),
                                'attributes': js_attrs(e.get('attributes'))}
                               for e in sp.get('events', [])],
                    'links': [{'traceId': ln.get('traceId', ''), 'spanId': ln.get('spanId', ''),
                               'attributes': js_attrs(ln.get('attributes'))}
                              for ln in sp.get('links', [])],
                    'resource': res,
                })
    return out


def json_scopes(req):
    """Scopes of an OTLP/JSON request: resource, scope, spans held."""
    out = []
    for rs in req.get('resourceSpans', []):
        res = js_attrs(rs.get('resource', {}).get('attributes'))
        for ss in rs.get('scopeSpans', []):
            sc = ss.get('scope', {})
            out.append({'resource': res, 'name': sc.get('name', ''),
                        'attributes': js_attrs(sc.get('attributes')),
                        'spans': len(ss.get('spans', []))})
    return out


def protoc(args, data):
    r = subprocess.run(['protoc', '--proto_path=' + HERE, *args, PROTO], input=data,
                       capture_output=True, check=False)
    if r.returncode:
        raise ValueError("protoc: " + r.stderr.decode(errors='replace'))
    return r.stdout


def decode(body, ctype):
    """The request's spans and scopes."""
    if 'protobuf' in ctype:
        text = protoc(['--decode=opentelemetry.proto.ExportTraceServiceRequest'], body)
        req = parse(text.decode('utf-8', 'replace').splitlines(),
                    lambda raw: unquote(raw) if raw.startswith('"') else raw)
        return pb_spans(req), pb_scopes(req)
    req = json.loads(body)
    return json_spans(req), json_scopes(req)


def answer_body(ctype, rejected):
    if 'protobuf' in ctype:
        if not rejected:
            return b''
        return protoc(['--encode=opentelemetry.proto.ExportTraceServiceResponse'],
                      ('partial_success { rejected_spans: %d error_message: "test rejects" }'
                       % rejected).encode())
    if not rejected:
        return b'{"partialSuccess":{}}'
    return json.dumps({'partialSuccess': {'rejectedSpans': str(rejected),
                                          'errorMessage': 'test rejects'}}).encode()


class State:
    def __init__(self, d, script, notify_after):
        self.dir, self.script, self.notify_after = d, script, notify_after
        self.n = self.ok = 0
        self.lock = threading.Lock()
        # both FIFOs held open from the start (read and write: opening
        # never blocks), so that the test's side never waits on an open,
        # and sees the end of notify if the receiver dies
        self.release = os.open(os.path.join(d, 'release'), os.O_RDWR)
        self.notify = os.open(os.path.join(d, 'notify'), os.O_RDWR)

    def wait_release(self):
        buf = b''
        while not buf.endswith(b'\n'):
            buf += os.read(self.release, 1)

    def log(self, line):
        with open(os.path.join(self.dir, 'log'), 'a') as f:
            f.write(line + '\n')

    def keep(self, spans, scopes):
        with open(os.path.join(self.dir, 'spans.jsonl'), 'a') as f:
            for s in spans:
                f.write(json.dumps(s, sort_keys=True) + '\n')
        with open(os.path.join(self.dir, 'scopes.jsonl'), 'a') as f:
            for s in scopes:
                f.write(json.dumps(s, sort_keys=True) + '\n')


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *a):
        pass

    def reply(self, status, ctype, body, extra=None):
        self.send_response(status)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        st = self.server.state
        body = self.rfile.read(int(self.headers.get('Content-Length', '0')))
        ctype = self.headers.get('Content-Type', '-')
        cenc = self.headers.get('Content-Encoding', 'identity')
        with st.lock:
            act = st.script[st.n] if st.n < len(st.script) else '200'
            st.n += 1
        if self.path != '/v1/traces':
            act = '404'
        try:
            spans, scopes = decode(gzip.decompress(body) if cenc == 'gzip' else body, ctype)
        except Exception as e:  # noqa: BLE001 - a bad body is the test's failure
            st.log('BAD %s %s %s' % (ctype, cenc, e))
            self.reply(400, 'text/plain', b'undecodable\n')
            return
        if act == 'close':
            st.log('close %s %s %d' % (ctype, cenc, len(spans)))
            self.close_connection = True
            return
        if act == 'stall':
            os.write(st.notify, b'stall\n')
            st.wait_release()
            act = '200'
        if act == '200' or act.startswith('p'):
            rej = int(act[1:]) if act.startswith('p') else 0
            with st.lock:
                st.keep(spans[:len(spans) - rej], scopes)
                st.ok += 1
                ok = st.ok
            st.log('200 %s %s %d %d port=%d' % (ctype, cenc, len(spans), rej,
                                                self.client_address[1]))
            self.reply(200, ctype, answer_body(ctype, rej))
            if ok in st.notify_after:
                os.write(st.notify, b'%d\n' % ok)
            return
        status = int(act)
        st.log('%d %s %s %d' % (status, ctype, cenc, len(spans)))
        extra = {'Retry-After': '1'} if status == 429 else None
        self.reply(status, 'text/plain', b'receiver says %d\n' % status, extra)


def main():
    args = sys.argv[1:]
    d, port, script, notify = args[0], 0, [], []
    i = 1
    while i < len(args):
        if args[i] == '--port':
            port = int(args[i + 1])
        elif args[i] == '--script':
            script = [a for a in args[i + 1].split(',') if a]
        elif args[i] == '--notify-after':
            notify = [int(n) for n in args[i + 1].split(',') if int(n)]
        else:
            sys.exit('receiver: unknown argument ' + args[i])
        i += 2
    os.makedirs(d, exist_ok=True)
    http.server.ThreadingHTTPServer.allow_reuse_address = True
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', port), Handler)
    srv.daemon_threads = True
    srv.state = State(d, script, notify)
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    # one write: the test reads the line, and may close its end then
    os.write(1, b'%d\n' % srv.server_address[1])
    srv.serve_forever()


if __name__ == '__main__':
    main()
