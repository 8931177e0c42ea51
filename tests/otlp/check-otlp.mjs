// SPDX-License-Identifier: MIT
// check-otlp.mjs - checks shmtrace's OTLP/JSON requests against those of the
// official OpenTelemetry JS exporter and against the Chrome export of the
// same capture.
//
// Usage: node check-otlp.mjs --reference DIR --requests FILE... [options]
//   --reference DIR     request bodies the JS SDK sent (req-*.json)
//   --requests FILE...  shmtrace's request bodies (JSON files, or JSON lines)
//   --chrome FILE       the Chrome export of the same capture: span count per
//                       process, times (to the ns), arguments (exactly: as
//                       shmtrace.arg.* attributes) and unfinished spans
//                       (shmtrace.unfinished) must agree, and so must every
//                       span's category and thread name
//   --expect-unfinished N  exactly N spans with shmtrace.unfinished
//   --expect-flows N    exactly N traces of two spans or more
//   --expect-cross-host N  N traces have spans of two hosts (host.name)
//   --expect-trace HEX=PARENT  a trace with that id whose root span's parent
//                       is PARENT (a remote span: a traceparent header's)
// Exits 0 when all holds, 1 with the reasons on stderr.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
let refDir = null, chrome = null, expectFlows = null, expectCross = null, expectUnfinished = null;
const reqFiles = [], expectTraces = [];
for (let i = 0; i < args.length; i++) {
	const a = args[i];
	if (a === '--reference') refDir = args[++i];
	else if (a === '--chrome') chrome = args[++i];
	else if (a === '--expect-flows') expectFlows = Number(args[++i]);
	else if (a === '--expect-cross-host') expectCross = Number(args[++i]);
	else if (a === '--expect-unfinished') expectUnfinished = Number(args[++i]);
	else if (a === '--expect-trace') expectTraces.push(args[++i].split('='));
	else if (a === '--requests') { while (i + 1 < args.length && !args[i + 1].startsWith('--')) reqFiles.push(args[++i]); }
	else { console.error(`check-otlp: unknown argument ${a}`); process.exit(2); }
}
const errors = [];
const fail = (m) => { if (errors.length < 20) errors.push(m); };

function bodies(file) {
	const text = readFileSync(file, 'utf8').trim();
	if (!text) return [];
	return text.split('\n').map((l) => JSON.parse(l));
}
const ref = readdirSync(refDir).filter((f) => /^req-\d+\.json$/.test(f)).sort()
	.flatMap((f) => bodies(path.join(refDir, f)));
const ours = reqFiles.flatMap(bodies);
if (!ref.length) fail('no reference request');
if (!ours.length) fail('no shmtrace request');

// ---- shapes: every field shmtrace writes, with the JSON type the JS
// exporter gives it; array elements merged, paths like a.b[].c
const type = (v) => (Array.isArray(v) ? 'array' : v === null ? 'null' : typeof v);
function schema(v, p, out) {
	out.set(p, (out.get(p) || new Set()).add(type(v)));
	if (Array.isArray(v)) for (const e of v) schema(e, `${p}[]`, out);
	else if (v && typeof v === 'object') for (const [k, e] of Object.entries(v)) schema(e, `${p}.${k}`, out);
	return out;
}
const refSchema = new Map(), ourSchema = new Map();
ref.forEach((b) => schema(b, '', refSchema));
ours.forEach((b) => schema(b, '', ourSchema));
// fields of the OTLP protos the reference sender does not happen to set
const extra = /^\.resourceSpans\[\]\.scopeSpans\[\]\.scope\.(attributes(\[\].*)?|droppedAttributesCount)$/;
for (const [p, types] of ourSchema) {
	const r = refSchema.get(p) || (extra.test(p) ? null : undefined);
	if (r === undefined) { fail(`field ${p} is not one the OTLP JS exporter writes`); continue; }
	const want = new Set(r || (p.endsWith('droppedAttributesCount') ? ['number'] : ['array', 'object', 'string', 'number', 'boolean']));
	// an int64 is a decimal string in OTLP/JSON (the protobuf JSON
	// mapping); the JS exporter writes numbers, receivers take both
	if (p.endsWith('.intValue')) want.add('string');
	for (const t of types) if (!want.has(t)) fail(`field ${p} is a ${t}, the JS exporter's is ${[...want]}`);
}
const span0 = ref.flatMap((b) => b.resourceSpans).flatMap((r) => r.scopeSpans).flatMap((s) => s.spans)[0];
const spanKeys = Object.keys(span0 || {}).filter((k) => k !== 'parentSpanId');

// ---- every span
const spans = [];
for (const b of ours) {
	for (const rs of b.resourceSpans) {
		const attr = Object.fromEntries(rs.resource.attributes.map((a) => [a.key, Object.values(a.value)[0]]));
		for (const k of ['service.name', 'host.name', 'process.pid'])
			if (!(k in attr)) fail(`a resource has no ${k}`);
		for (const ss of rs.scopeSpans) {
			if (ss.scope.name !== 'shmtrace') fail(`scope ${ss.scope.name}`);
			for (const s of ss.spans) {
				for (const k of spanKeys) if (!(k in s)) fail(`span ${s.name} has no ${k}`);
				if (!/^[0-9a-f]{32}$/.test(s.traceId) || /^0+$/.test(s.traceId)) fail(`traceId ${s.traceId}`);
				if (!/^[0-9a-f]{16}$/.test(s.spanId) || /^0+$/.test(s.spanId)) fail(`spanId ${s.spanId}`);
				if ('parentSpanId' in s && !/^[0-9a-f]{16}$/.test(s.parentSpanId)) fail(`parentSpanId ${s.parentSpanId}`);
				if (!/^\d+$/.test(s.startTimeUnixNano) || !/^\d+$/.test(s.endTimeUnixNano)) fail('times are not ns strings');
				if (BigInt(s.endTimeUnixNano) < BigInt(s.startTimeUnixNano)) fail(`span ${s.name} ends before it starts`);
				if (s.kind !== 1) fail(`kind ${s.kind}`);
				const sa = Object.fromEntries(s.attributes.map((a) => [a.key, Object.values(a.value)[0]]));
				spans.push({ ...s, attr: sa, host: attr['host.name'], pid: attr['process.pid'] });
			}
		}
	}
}
const ids = new Set(spans.map((s) => s.spanId));
const unfinished = spans.filter((s) => s.attr['shmtrace.unfinished'] === true).length;
if (expectUnfinished !== null && unfinished !== expectUnfinished) fail(`${unfinished} unfinished spans, expected ${expectUnfinished}`);
if (ids.size !== spans.length) fail(`${spans.length - ids.size} span ids are used twice`);

// ---- flows: one trace per flow id, each span a child of the one before
const byTrace = new Map();
for (const s of spans) {
	if (!byTrace.has(s.traceId)) byTrace.set(s.traceId, []);
	byTrace.get(s.traceId).push(s);
}
const flowTrace = new Map();
let flows = 0, cross = 0;
for (const [tid, v] of byTrace) {
	const fids = new Set(v.map((s) => s.attr['shmtrace.flow.id']));
	if (fids.size !== 1) fail(`trace ${tid} holds flows ${[...fids]}`);
	const fid = [...fids][0];
	if (fid !== undefined) {
		if (flowTrace.has(fid)) fail(`flow ${fid} is in two traces`);
		flowTrace.set(fid, tid);
	} else if (v.length !== 1) fail(`trace ${tid} of ${v.length} spans has no flow`);
	if (v.length >= 2) flows++;
	if (new Set(v.map((s) => s.host)).size > 1) cross++;
	const inTrace = new Map(v.map((s) => [s.spanId, s]));
	const roots = v.filter((s) => !inTrace.has(s.parentSpanId));
	if (roots.length !== 1) { fail(`trace ${tid}: ${roots.length} roots`); continue; }
	const child = new Map();
	for (const s of v) {
		if (!inTrace.has(s.parentSpanId)) continue;
		if (child.has(s.parentSpanId)) fail(`trace ${tid}: a span has two children`);
		child.set(s.parentSpanId, s);
	}
	let n = 1;
	for (let s = roots[0], c; (c = child.get(s.spanId)); s = c, n++)
		if (BigInt(c.startTimeUnixNano) < BigInt(s.startTimeUnixNano)) fail(`trace ${tid}: a child starts before its parent`);
	if (n !== v.length) fail(`trace ${tid}: the parent links do not chain all ${v.length} spans`);
	for (const [hex, parent] of expectTraces)
		if (hex === tid && roots[0].parentSpanId !== parent)
			fail(`trace ${tid}: root's parent ${roots[0].parentSpanId}, not ${parent}`);
}
for (const [hex] of expectTraces) if (!byTrace.has(hex)) fail(`no trace ${hex}`);
if (expectFlows !== null && flows !== expectFlows) fail(`${flows} traces of several spans, expected ${expectFlows}`);
if (expectCross !== null && cross !== expectCross) fail(`${cross} traces across hosts, expected ${expectCross}`);

// ---- against the Chrome export of the same capture

// JSON text with every integer beyond 2^53 turned into the string BIG +
// its digits, so that an int64 argument is compared exactly
const BIG = '\u0000big:';
function exactInts(t) {
	let out = '', last = 0;
	for (let i = 0; i < t.length; i++) {
		const c = t[i];
		if (c === '"') {
			for (i++; t[i] !== '"'; i++) if (t[i] === '\\') i++;
		} else if (c === '-' || (c >= '0' && c <= '9')) {
			let j = i + 1;
			while (j < t.length && /[0-9.eE+-]/.test(t[j])) j++;
			const num = t.slice(i, j);
			if (/^-?\d+$/.test(num) && !Number.isSafeInteger(Number(num))) {
				out += t.slice(last, i) + JSON.stringify(BIG + num);
				last = j;
			}
			i = j - 1;
		}
	}
	return out + t.slice(last);
}

if (chrome) {
	const text = readFileSync(chrome, 'utf8');
	const tr = JSON.parse(exactInts(text));
	// ns numbers past 2^53 are read from the text
	const wall = BigInt(/"trace_start_wall_ns":(\d+)/.exec(text)[1]);
	const start = BigInt(/"trace_start_ns":(\d+)/.exec(text)[1]);
	const moved = tr.metadata.shmtrace.flow_starts_moved;
	const off = wall - start;
	const ns = (us) => { const [i, f = ''] = String(us).split('.'); return BigInt(i) * 1000n + BigInt((f + '000').slice(0, 3)); };
	// pid as the OTLP resource has it: the host's own pid
	const rpid = (p) => (p % 268435456) % 4194304;
	const key = (pid, tid, name) => `${rpid(pid)}/${tid}/${name}`;
	// arguments as one string: Chrome's args object, or the OTLP attributes
	const cval = (v) => (typeof v === 'number' ? `i:${v}` : v.startsWith(BIG) ? `i:${v.slice(BIG.length)}` : `s:${v}`);
	const cargs = (a) => Object.entries(a || {}).filter(([k]) => k !== 'unfinished')
		.map(([k, v]) => `${k}=${cval(v)}`).sort().join('\u0000') + (a && a.unfinished === true ? '|unfinished' : '');
	const oargs = (attrs, unf) => attrs.filter((a) => a.key.startsWith('shmtrace.arg.'))
		.map((a) => `${a.key.slice(13)}=${'intValue' in a.value ? `i:${a.value.intValue}` : `s:${a.value.stringValue}`}`)
		.sort().join('\u0000') + (unf ? '|unfinished' : '');
	const cs = new Map(), cinst = new Map(), ccat = new Map(), ctname = new Map();
	const perProc = new Map(), perProcOurs = new Map();
	for (const e of tr.traceEvents) {
		if (e.ph === 'M' && e.name === 'thread_name' && e.pid !== 0)
			ctname.set(`${rpid(e.pid)}/${e.tid}`, e.args.name);
		if (e.ph === 'X') {
			const k = key(e.pid, e.tid, e.name);
			if (!cs.has(k)) cs.set(k, []);
			cs.get(k).push([ns(e.ts), ns(e.ts) + ns(e.dur), cargs(e.args)]);
			if (!ccat.has(k)) ccat.set(k, new Set());
			ccat.get(k).add(e.cat);
			perProc.set(rpid(e.pid), (perProc.get(rpid(e.pid)) || 0) + 1);
		} else if (e.ph === 'i' && e.pid !== 0 && !String(e.name).startsWith('traceparent ')) {
			const k = `${key(e.pid, e.tid, e.name)} args ${cargs(e.args)}`;
			cinst.set(k, (cinst.get(k) || 0) + 1);
		}
	}
	let startDiff = 0, oinst = new Map();
	const os = new Map();
	for (const s of spans) {
		const k = `${s.pid}/${s.attr['thread.id']}/${s.name}`;
		// the attributes every span of a thread and category shares
		if (s.attr['thread.name'] !== ctname.get(`${s.pid}/${s.attr['thread.id']}`))
			fail(`span ${k}: thread.name ${s.attr['thread.name']}, Chrome's ${ctname.get(`${s.pid}/${s.attr['thread.id']}`)}`);
		if (!s.attr['shmtrace.instant'] && !(ccat.get(k) || new Set()).has(s.attr['shmtrace.category']))
			fail(`span ${k}: category ${s.attr['shmtrace.category']}, not one Chrome has (${[...(ccat.get(k) || [])]})`);
		const st = BigInt(s.startTimeUnixNano) - off, en = BigInt(s.endTimeUnixNano) - off;
		for (const ev of s.events) {
			const ek = `${s.pid}/${s.attr['thread.id']}/${ev.name} args ${oargs(ev.attributes, false)}`;
			oinst.set(ek, (oinst.get(ek) || 0) + 1);
			if (BigInt(ev.timeUnixNano) < BigInt(s.startTimeUnixNano) || BigInt(ev.timeUnixNano) > BigInt(s.endTimeUnixNano))
				fail(`event ${ev.name} outside its span ${s.name}`);
		}
		if (s.attr['shmtrace.instant']) {
			const ik = `${k} args ${oargs(s.attributes, false)}`;
			oinst.set(ik, (oinst.get(ik) || 0) + 1);
			continue;
		}
		perProcOurs.set(s.pid, (perProcOurs.get(s.pid) || 0) + 1);
		if (!os.has(k)) os.set(k, []);
		os.get(k).push([st, en, oargs(s.attributes, s.attr['shmtrace.unfinished'] === true)]);
	}
	for (const [p, n] of perProc) if (perProcOurs.get(p) !== n) fail(`process ${p}: ${perProcOurs.get(p) || 0} spans, Chrome has ${n}`);
	for (const [p] of perProcOurs) if (!perProc.has(p)) fail(`process ${p} is not in the Chrome export`);
	for (const [k, n] of cinst) if (oinst.get(k) !== n) fail(`instants ${k}: ${oinst.get(k) || 0} exported, Chrome has ${n}`);
	for (const [k, v] of cs) {
		const o = (os.get(k) || []).slice();
		if (o.length !== v.length) { fail(`spans ${k}: ${o.length}, Chrome has ${v.length}`); continue; }
		const cmp = (a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0);
		v.sort(cmp); o.sort(cmp);
		for (let i = 0; i < v.length; i++) {
			// the Chrome export moves a flow slice's start off a shared
			// timestamp (flow_starts_moved), never its end
			if (v[i][1] !== o[i][1]) fail(`span ${k} ends at ${o[i][1]}, Chrome at ${v[i][1]}`);
			if (v[i][2] !== o[i][2]) fail(`span ${k} at ${o[i][1]}: arguments ${JSON.stringify(o[i][2])}, Chrome's ${JSON.stringify(v[i][2])}`);
			if (v[i][0] !== o[i][0]) startDiff++;
		}
	}
	if (startDiff > moved) fail(`${startDiff} span starts differ from Chrome's, which moved ${moved}`);
}
if (errors.length) {
	for (const e of errors) console.error(`check-otlp: ${e}`);
	process.exit(1);
}
console.log(JSON.stringify({ requests: ours.length, spans: spans.length, traces: byTrace.size, flows, cross }));
