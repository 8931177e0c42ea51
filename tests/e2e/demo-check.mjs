// SPDX-License-Identifier: MIT
/*
 * demo-check.mjs - loads a trace of shmtrace-demo into the Chrome DevTools
 * trace engine (@paulirish/trace_engine, what the Performance panel runs)
 * and asserts what a user should see: the client, broker and worker
 * processes with their named threads, and one flow per request that goes
 * client -> broker -> worker -> broker -> client.
 *
 *   node tests/e2e/demo-check.mjs TRACE.json --requests N --workers N
 *
 * Prints what it found; exits 0 if it all holds, 1 if not, 2 on bad usage.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL, fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');

function usage(msg) {
	console.error(`demo-check: ${msg}`);
	console.error('usage: node tests/e2e/demo-check.mjs TRACE.json --requests N --workers N');
	process.exit(2);
}

const args = process.argv.slice(2);
let file = null, requests = 0, workers = 0;
for (let i = 0; i < args.length; i++) {
	if (args[i] === '--requests') requests = Number(args[++i]);
	else if (args[i] === '--workers') workers = Number(args[++i]);
	else if (!file) file = args[i];
	else usage(`unexpected argument '${args[i]}'`);
}
if (!file || !(requests > 0) || !(workers > 0)) usage('need a trace, --requests and --workers');

// the trace engine expects a browser: this is all of the DOM it touches
globalThis.DOMRect = class {
	constructor(x = 0, y = 0, w = 0, h = 0) { Object.assign(this, { x, y, width: w, height: h }); }
};
const require = createRequire(path.join(root, 'tests', 'devtools', 'package.json'));
const Trace = await import(pathToFileURL(require.resolve('@paulirish/trace_engine')).href);

const json = JSON.parse(fs.readFileSync(file, 'utf8'));
const events = json.traceEvents ?? json;
const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(events);
const data = model.parsedTrace().data ?? model.parsedTrace();

let failures = 0;
function check(ok, what) {
	console.log(`${ok ? 'ok  ' : 'FAIL'}  ${what}`);
	if (!ok) failures++;
}

// processes and their threads, as the engine named them
const pidOf = new Map();	// process name -> pid
for (const [pid, ev] of data.Meta.processNames) pidOf.set(ev.args.name, pid);
const threadNames = new Map();	// pid -> Set of thread names
for (const [pid, proc] of data.Renderer.processes) {
	const names = new Set();
	for (const [, th] of proc.threads) if (th.name) names.add(th.name);
	threadNames.set(pid, names);
}
const expect = { client: ['main', 'client-1'], broker: ['event-loop'] };
for (let w = 1; w <= workers; w++) expect[`worker-${w}`] = ['receiver', 'compute'];
for (const [proc, threads] of Object.entries(expect)) {
	const pid = pidOf.get(proc);
	check(pid !== undefined, `process "${proc}"${pid !== undefined ? ` (pid ${pid})` : ''}`);
	if (pid === undefined) continue;
	const have = threadNames.get(pid) ?? new Set();
	for (const t of threads)
		check(have.has(t), `  thread "${t}" in ${proc} (has: ${[...have].sort().join(', ')})`);
}

// flows: the sequence of processes each one visits, repeats collapsed
const role = new Map();
for (const [name, pid] of pidOf) role.set(pid, name.startsWith('worker-') ? 'worker' : name);
const flows = data.Flows.flows;
// the slices each hop's arrow should bind to, for a request served at once
const exact = 'send>route>dispatch>receive>work>forward reply>handle reply';
let full = 0, crossing = 0, named = 0;
const sample = [];
for (const flow of flows) {
	const hops = [];
	const sorted = [...flow].sort((a, b) => a.ts - b.ts);
	if (sorted.map(ev => ev.name).join('>') === exact) named++;
	for (const ev of sorted) {
		const r = role.get(ev.pid) ?? `pid ${ev.pid}`;
		if (hops.at(-1) !== r) hops.push(r);
	}
	const roles = new Set(hops);
	if (roles.has('client') && roles.has('broker') && roles.has('worker')) crossing++;
	if (hops.join('>').startsWith('client>broker>worker>broker>client')) full++;
	if (sample.length < 1) sample.push(sorted.map(ev => `${role.get(ev.pid)}:${ev.name}`).join(' -> '));
}
console.log(`flows: ${flows.length}, crossing client/broker/worker: ${crossing}, ` +
	    `client>broker>worker>broker>client: ${full}, bound to ${exact}: ${named}`);
if (sample.length) console.log(`  e.g. ${sample[0]}`);
check(flows.length >= requests, `at least ${requests} flows (one per request)`);
check(crossing >= requests, `at least ${requests} flows cross client, broker and worker pids`);
check(full >= requests, `at least ${requests} flows go client -> broker -> worker -> broker -> client`);
// 1% are retried and a crashed worker's are re-routed: those have more hops
check(named >= Math.floor(requests * 0.9), `at least 90% of flows bind to exactly ${exact.replaceAll('>', ', ')}`);

console.log(failures ? `demo-check: ${failures} check(s) failed` : 'demo-check: all checks passed');
process.exit(failures ? 1 : 0);
