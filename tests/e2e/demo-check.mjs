// SPDX-License-Identifier: MIT
/*
 * demo-check.mjs - asserts what a user of shmtrace-demo should see in Chrome
 * DevTools, given the JSON summary that tests/devtools/check-trace.mjs
 * prints (what the DevTools trace engine itself made of the trace): the
 * client, broker and worker processes with their named threads, and one
 * flow per request that goes client -> broker -> worker -> broker -> client.
 *
 *   node tests/devtools/check-trace.mjs TRACE.json > SUMMARY.json
 *   node tests/e2e/demo-check.mjs SUMMARY.json --requests N --workers N [--python-worker K]
 *
 * --python-worker K: worker K is the Python one (tools/demo/worker.py), a
 * process named "worker-K (python)" that at least one flow crosses.
 *
 * Prints what it found; exits 0 if it all holds, 1 if not, 2 on bad usage.
 */
import fs from 'node:fs';

function usage(msg) {
	console.error(`demo-check: ${msg}`);
	console.error('usage: node tests/e2e/demo-check.mjs SUMMARY.json --requests N --workers N [--python-worker K]');
	process.exit(2);
}

const args = process.argv.slice(2);
let file = null, requests = 0, workers = 0, pyWorker = 0;
for (let i = 0; i < args.length; i++) {
	if (args[i] === '--requests') requests = Number(args[++i]);
	else if (args[i] === '--workers') workers = Number(args[++i]);
	else if (args[i] === '--python-worker') pyWorker = Number(args[++i]);
	else if (!file) file = args[i];
	else usage(`unexpected argument '${args[i]}'`);
}
if (!file || !(requests > 0) || !(workers > 0)) usage('need a summary, --requests and --workers');
if (!(Number.isInteger(pyWorker) && pyWorker >= 0 && pyWorker <= workers)) usage('bad --python-worker');
const workerName = w => `worker-${w}${w === pyWorker ? ' (python)' : ''}`;

let sum;
try {
	sum = JSON.parse(fs.readFileSync(file, 'utf8'));
} catch (e) {
	usage(`${file}: ${e.message}`);
}

let failures = 0;
function check(ok, what) {
	console.log(`${ok ? 'ok  ' : 'FAIL'}  ${what}`);
	if (!ok) failures++;
}

// processes and their threads, as the engine named them
const pidOf = new Map();	// process name -> pid
for (const [pid, name] of Object.entries(sum.processes)) pidOf.set(name, Number(pid));
const threadNames = new Map();	// pid -> Set of thread names
for (const [key, name] of Object.entries(sum.threads)) {
	const pid = Number(key.split(':')[0]);
	if (!threadNames.has(pid)) threadNames.set(pid, new Set());
	threadNames.get(pid).add(name);
}
const expect = { client: ['main', 'client-1'], broker: ['event-loop'] };
for (let w = 1; w <= workers; w++) expect[workerName(w)] = ['receiver', 'compute'];
for (const [proc, threads] of Object.entries(expect)) {
	const pid = pidOf.get(proc);
	check(pid !== undefined, `process "${proc}"${pid !== undefined ? ` (pid ${pid})` : ''}`);
	if (pid === undefined) continue;
	const have = threadNames.get(pid) ?? new Set();
	for (const t of threads)
		check(have.has(t), `  thread "${t}" in ${proc} (has: ${[...have].sort().join(', ')})`);
}

// flows (events [pid, tid, ts, name] in time order): the sequence of
// processes each one visits, repeats collapsed, and the slices it binds to
const role = new Map();
for (const [name, pid] of pidOf) role.set(pid, name.startsWith('worker-') ? 'worker' : name);
const exact = 'send>route>dispatch>receive>work>forward reply>handle reply';
const pyPid = pyWorker ? pidOf.get(workerName(pyWorker)) : undefined;
let full = 0, crossing = 0, named = 0, viaPython = 0;
for (const flow of sum.flows) {
	const hops = [];
	if (flow.map(ev => ev[3]).join('>') === exact) named++;
	for (const ev of flow) {
		const r = role.get(ev[0]) ?? `pid ${ev[0]}`;
		if (hops.at(-1) !== r) hops.push(r);
	}
	const roles = new Set(hops);
	if (roles.has('client') && roles.has('broker') && roles.has('worker')) crossing++;
	if (hops.join('>').startsWith('client>broker>worker>broker>client')) {
		full++;
		// the hop into a worker and back, in the Python one
		if (pyPid !== undefined && flow.some(ev => ev[0] === pyPid)) viaPython++;
	}
}
console.log(`flows: ${sum.flows.length}, crossing client/broker/worker: ${crossing}, ` +
	    `client>broker>worker>broker>client: ${full}, bound to ${exact}: ${named}`);
if (sum.flows.length)
	console.log(`  e.g. ${sum.flows[0].map(ev => `${role.get(ev[0])}:${ev[3]}`).join(' -> ')}`);
check(sum.flows.length >= requests, `at least ${requests} flows (one per request)`);
check(crossing >= requests, `at least ${requests} flows cross client, broker and worker pids`);
check(full >= requests, `at least ${requests} flows go client -> broker -> worker -> broker -> client`);
// 1% are retried and a crashed worker's are re-routed: those have more hops
check(named >= Math.floor(requests * 0.9),
      `at least 90% of flows bind to exactly ${exact.replaceAll('>', ', ')}`);

if (pyWorker) {
	const eg = sum.flows.find(f => f.some(ev => ev[0] === pyPid));
	if (eg) console.log(`  via Python: ${eg.map(ev => `${role.get(ev[0])}${ev[0] === pyPid ? ' (python)' : ''}:${ev[3]}`).join(' -> ')}`);
	check(viaPython >= 1, `flows client (C) -> broker (C) -> Python worker (pid ${pyPid}) -> broker -> client: ${viaPython}`);
}

console.log(failures ? `demo-check: ${failures} check(s) failed` : 'demo-check: all checks passed');
process.exit(failures ? 1 : 0);
