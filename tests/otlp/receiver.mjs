// SPDX-License-Identifier: MIT
// receiver.mjs - a stand-in OTLP/HTTP endpoint on 127.0.0.1 for the tests:
// stores every POST /v1/traces body as DIR/req-NNNN.json (only those it
// answered 200), logs each request's answer in DIR/log, and prints its
// port on stdout once listening.
//   node receiver.mjs DIR [--fail-first N] [--fail-status S] [--always S]
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
const dir = args[0];
let failFirst = 0, failStatus = 503, always = 0;
for (let i = 1; i < args.length; i++) {
	if (args[i] === '--fail-first') failFirst = Number(args[++i]);
	else if (args[i] === '--fail-status') failStatus = Number(args[++i]);
	else if (args[i] === '--always') always = Number(args[++i]);
	else { console.error(`receiver: unknown argument ${args[i]}`); process.exit(2); }
}
fs.mkdirSync(dir, { recursive: true });
let seen = 0, stored = 0;

const server = http.createServer((req, res) => {
	const chunks = [];
	req.on('data', (c) => chunks.push(c));
	req.on('end', () => {
		const body = Buffer.concat(chunks);
		let status = 200;
		seen++;
		if (req.method !== 'POST' || req.url !== '/v1/traces') status = 404;
		else if (always) status = always;
		else if (seen <= failFirst) status = failStatus;
		else if (!/^application\/json/.test(req.headers['content-type'] || '')) status = 415;
		fs.appendFileSync(path.join(dir, 'log'),
			`${status} ${req.method} ${req.url} ${body.length} ${req.headers['content-type'] || '-'}\n`);
		if (status === 200) {
			fs.writeFileSync(path.join(dir, `req-${String(++stored).padStart(4, '0')}.json`), body);
			res.writeHead(200, { 'Content-Type': 'application/json' });
			res.end('{"partialSuccess":{}}');
		} else if (status === 503 || status === 429) {
			res.writeHead(status, { 'Content-Type': 'text/plain', 'Retry-After': '0' });
			res.end('try again later\n');
		} else {
			res.writeHead(status, { 'Content-Type': 'text/plain' });
			res.end(`receiver says ${status}: invalid request for this test\n`);
		}
	});
});
server.listen(0, '127.0.0.1', () => {
	process.stdout.write(`${server.address().port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
