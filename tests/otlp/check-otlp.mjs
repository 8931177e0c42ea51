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
//   --expect-flows N    exactly N traces with two spans of their flow or more
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

// ---- the threads' trees: each span's parent is the innermost span that
// encloses it on its thread (found here from the times alone), and it is
// in that span's trace; a hop (a span of a flow) whose enclosing span is
// in another trace links to it instead
const thread = (s) => `${s.host}/${s.pid}/${s.attr['thread.id']}`;
const t0 = (s) => BigInt(s.startTimeUnixNano), t1 = (s) => BigInt(s.endTimeUnixNano);
const same = (a, b) => t0(a) === t0(b) && t1(a) === t1(b);
const byId = new Map(spans.map((s) => [s.spanId, s]));
const flowOf = (s) => s.attr['shmtrace.flow.id'];
const linkOf = (s, why) => (s.links || []).find((l) => l.attributes.some((a) => a.key === 'shmtrace.link' && a.value.stringValue === why));
const perThread = new Map();
for (const s of spans) {
	if (!perThread.has(thread(s))) perThread.set(thread(s), []);
	perThread.get(thread(s)).push(s);
}
for (const v of perThread.values()) {
	const inst = (s) => (s.attr['shmtrace.instant'] ? 1 : 0);
	v.sort((a, b) => (t0(a) < t0(b) ? -1 : t0(a) > t0(b) ? 1 : t1(a) > t1(b) ? -1 : t1(a) < t1(b) ? 1 : inst(a) - inst(b)));
	const stack = [];
	for (const s of v) {
		while (stack.length && t1(s) > t1(stack[stack.length - 1])) stack.pop();
		const e = stack[stack.length - 1], p = byId.get(s.parentSpanId);
		// of identical spans, either may enclose the other
		const isE = (x) => x && e && (x === e || (thread(x) === thread(s) && (same(x, e) || same(x, s))));
		if (!e) {
			// a root of its thread: in a trace of its own, or a child of
			// the hop before the first hop it encloses
			if (p && flowOf(p) === undefined && !(thread(p) === thread(s) && same(p, s)))
				fail(`span ${s.name}: enclosed by none, its parent ${p.name} is no hop`);
		} else if (flowOf(s) === undefined || e.traceId === s.traceId) {
			if (!isE(p)) fail(`span ${s.name}: parent ${p ? p.name : s.parentSpanId}, not ${e.name}, which encloses it`);
			if (s.traceId !== e.traceId) fail(`span ${s.name}: not in the trace of ${e.name}, which encloses it`);
		} else {
			const l = linkOf(s, 'enclosing_span');
			if (!l || !isE(byId.get(l.spanId)) || l.traceId !== byId.get(l.spanId).traceId)
				fail(`hop ${s.name}: no link to ${e.name}, which encloses it in another trace`);
		}
		if (!s.attr['shmtrace.instant']) stack.push(s);
	}
}

// ---- traces: each a tree; one flow in one trace, with a root; each hop
// follows the one before it (its parent or its previous_hop link)
const byTrace = new Map();
for (const s of spans) {
	if (!byTrace.has(s.traceId)) byTrace.set(s.traceId, []);
	byTrace.get(s.traceId).push(s);
}
const flowTrace = new Map();
let flows = 0, cross = 0;
for (const [tid, v] of byTrace) {
	const fids = new Set(v.map(flowOf).filter((f) => f !== undefined));
	if (fids.size > 1) fail(`trace ${tid} holds flows ${[...fids]}`);
	const fid = [...fids][0];
	if (fid !== undefined) {
		if (flowTrace.has(fid)) fail(`flow ${fid} is in two traces`);
		flowTrace.set(fid, tid);
	}
	const hops = v.filter((s) => flowOf(s) !== undefined);
	if (hops.length >= 2) flows++;
	if (new Set(v.map((s) => s.host)).size > 1) cross++;
	const inTrace = new Map(v.map((s) => [s.spanId, s]));
	const roots = v.filter((s) => !inTrace.has(s.parentSpanId));
	if (roots.length !== 1) { fail(`trace ${tid}: ${roots.length} roots`); continue; }
	for (const s of v) {
		const seen = new Set();
		for (let p = s; inTrace.has(p.parentSpanId); p = inTrace.get(p.parentSpanId)) {
			if (seen.has(p)) { fail(`trace ${tid}: a cycle of parents`); break; }
			seen.add(p);
			// across threads a parent is a hop: the step before
			const q = inTrace.get(p.parentSpanId);
			if (thread(q) !== thread(p) && flowOf(q) === undefined) fail(`trace ${tid}: ${p.name}'s parent ${q.name} is on another thread and in no flow`);
		}
	}
	hops.sort((a, b) => (t0(a) < t0(b) ? -1 : t0(a) > t0(b) ? 1 : 0));
	const hopIds = new Set(hops.map((s) => s.spanId));
	for (const s of hops) {
		const l = linkOf(s, 'previous_hop');
		const prev = l ? l.spanId : hopIds.has(s.parentSpanId) ? s.parentSpanId : null;
		const p = byId.get(prev);
		if (s === hops[0] || t0(s) === t0(hops[0])) {
			if (p && hopIds.has(prev) && t0(p) < t0(s)) fail(`trace ${tid}: the first hop ${s.name} follows ${p.name}`);
			continue;
		}
		if (!p || !hopIds.has(prev)) { fail(`trace ${tid}: hop ${s.name} follows no hop of its flow`); continue; }
		if (l && l.traceId !== tid) fail(`trace ${tid}: hop ${s.name} links to the hop before it in another trace`);
		if (t0(p) > t0(s) || hops.some((h) => t0(h) > t0(p) && t0(h) < t0(s)))
			fail(`trace ${tid}: hop ${s.name} follows ${p.name}, not the hop just before it`);
	}
	for (const [hex, parent] of expectTraces)
		if (hex === tid && roots[0].parentSpanId !== parent)
			fail(`trace ${tid}: root's parent ${roots[0].parentSpanId}, not ${parent}`);
}
for (const [hex] of expectTraces) if (!byTrace.has(hex)) fail(`no trace ${hex}`);
if (expectFlows !== null && flows !== expectFlows) fail(`${flows} traces with two hops or more, expected ${expectFlows}`);
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
