#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// check-trace.mjs - loads a Chrome Trace Event JSON file into the Chrome
// DevTools trace engine (@paulirish/trace_engine, the code behind the
// Performance panel) and reports what DevTools itself sees, so that tests
// check the real binding rules rather than our idea of them.
//
// Usage: node tests/devtools/check-trace.mjs TRACE.json [options]
//   --expect-flows N          exactly N flows are drawn
//   --expect-flow-pids LIST   some flow binds to events of these pids, in
//                             this order (comma separated, e.g. "12,34,12");
//                             repeatable, each must match a distinct flow
//   --expect-process PID=NAME process PID is named NAME (repeatable)
//   --expect-thread PID:TID=NAME  thread TID of PID is named NAME (repeatable)
//   --quiet                   do not print the summary
// Prints to stdout one JSON object:
//   {"processes": {"<pid>": "name", ...},
//    "threads": {"<pid>:<tid>": "name", ...},
//    "flows": [[[pid, tid, ts, name], ...], ...],   // bound events, by ts
//    "events": N}
// Exits 0 when every expectation holds, 1 with a one-line reason on stderr
// when one does not, 2 on a usage error or a trace the engine cannot load.
// Needs `npm ci --prefix tests/devtools` once (package-lock.json pins it).
import { readFileSync } from 'node:fs';

// The engine touches DOMRect at load time; Node has none.
globalThis.DOMRect = class {
	constructor(x = 0, y = 0, w = 0, h = 0) {
		Object.assign(this, { x, y, width: w, height: h });
	}
};

function usage(msg) {
	process.stderr.write(`check-trace: ${msg}\nUsage: node check-trace.mjs TRACE.json ` +
		'[--expect-flows N] [--expect-flow-pids a,b,c]... [--expect-process PID=NAME]... ' +
		'[--expect-thread PID:TID=NAME]... [--quiet]\n');
	process.exit(2);
}

const args = process.argv.slice(2);
const opt = { file: null, flows: null, flowPids: [], procs: [], threads: [], quiet: false };
for (let i = 0; i < args.length; i++) {
	const a = args[i];
	const val = () => {
		if (i + 1 >= args.length)
			usage(`${a} needs a value`);
		return args[++i];
	};
	if (a === '--expect-flows') {
		opt.flows = Number(val());
		if (!Number.isInteger(opt.flows))
			usage('--expect-flows needs a number');
	} else if (a === '--expect-flow-pids') {
		opt.flowPids.push(val().split(',').map(Number));
	} else if (a === '--expect-process') {
		const m = /^(\d+)=(.*)$/s.exec(val());
		if (!m)
			usage('--expect-process needs PID=NAME');
		opt.procs.push([m[1], m[2]]);
	} else if (a === '--expect-thread') {
		const m = /^(\d+):(\d+)=(.*)$/s.exec(val());
		if (!m)
			usage('--expect-thread needs PID:TID=NAME');
		opt.threads.push([`${m[1]}:${m[2]}`, m[3]]);
	} else if (a === '--quiet') {
		opt.quiet = true;
	} else if (a.startsWith('-')) {
		usage(`unknown option ${a}`);
	} else if (opt.file === null) {
		opt.file = a;
	} else {
		usage(`unexpected argument ${a}`);
	}
}
if (opt.file === null)
	usage('no trace file given');

let json;
try {
	json = JSON.parse(readFileSync(opt.file, 'utf8'));
} catch (e) {
	process.stderr.write(`check-trace: ${opt.file}: not valid JSON: ${e.message}\n`);
	process.exit(2);
}
const events = Array.isArray(json) ? json : json.traceEvents;
if (!Array.isArray(events)) {
	process.stderr.write(`check-trace: ${opt.file}: no traceEvents array\n`);
	process.exit(2);
}

const Trace = await import('@paulirish/trace_engine');
const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(events);
const data = model.parsedTrace().data;

const nameOf = (v) => (v && v.args && typeof v.args.name === 'string' ? v.args.name : v);
const processes = {};
for (const [pid, ev] of data.Meta.processNames)
	processes[String(pid)] = nameOf(ev);
const threads = {};
for (const [pid, byTid] of data.Meta.threadsInProcess)
	for (const [tid, ev] of byTid)
		threads[`${pid}:${tid}`] = nameOf(ev);
// The engine lists a flow's events in trace-file order and draws its
// arrows (initiators) from each to the next in that order; the export
// writes a flow's events in the flow's order, which is their time order
// (a receiving step's event is the instant at its end): report them in
// time order, so that a flow written out of it shows.
const flows = data.Flows.flows.map((flow) => [...flow].sort((x, y) => x.ts - y.ts)
	.map((e) => [e.pid, e.tid, e.ts, e.name]));

const summary = { processes, threads, flows, events: events.length };
if (!opt.quiet)
	process.stdout.write(JSON.stringify(summary) + '\n');

function fail(msg) {
	process.stderr.write(`check-trace: ${msg}\n`);
	process.exit(1);
}

if (opt.flows !== null && flows.length !== opt.flows)
	fail(`expected ${opt.flows} flows, DevTools sees ${flows.length}`);
const used = new Set();
for (const want of opt.flowPids) {
	const i = flows.findIndex((f, k) => !used.has(k) && f.length === want.length &&
		f.every((e, j) => e[0] === want[j]));
	if (i < 0)
		fail(`no flow binds to pids ${want.join(',')} in that order; flows: ` +
			JSON.stringify(flows.map((f) => f.map((e) => e[0]))));
	used.add(i);
}
for (const [pid, name] of opt.procs)
	if (processes[pid] !== name)
		fail(`process ${pid} is named ${JSON.stringify(processes[pid])}, expected ${JSON.stringify(name)}`);
for (const [key, name] of opt.threads)
	if (threads[key] !== name)
		fail(`thread ${key} is named ${JSON.stringify(threads[key])}, expected ${JSON.stringify(name)}`);
