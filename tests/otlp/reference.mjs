// SPDX-License-Identifier: MIT
// reference.mjs - the official OpenTelemetry JS SDK and OTLP/HTTP (JSON)
// exporter send a few spans (parent and child, attributes of each value
// type, an event with attributes, a link with an attribute) to URL, so that a test can compare
// shmtrace's requests with the reference encoding.
//   node reference.mjs URL
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { context, trace } from '@opentelemetry/api';

const url = process.argv[2];
const provider = new BasicTracerProvider({
	resource: new Resource({ 'service.name': 'reference', 'host.name': 'refhost', 'process.pid': 4242 }),
	spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url }))],
});
const tracer = provider.getTracer('shmtrace-reference', '1.0.0');
const parent = tracer.startSpan('request');
parent.setAttribute('thread.id', 7);
parent.setAttribute('thread.name', 'main');
parent.setAttribute('shmtrace.instant', true);
parent.addEvent('checkpoint', { 'shmtrace.category': 'app', 'shmtrace.arg.n': 1 });
const child = tracer.startSpan('work', {
	links: [{ context: parent.spanContext(), attributes: { 'shmtrace.link': 'previous_hop' } }],
}, trace.setSpan(context.active(), parent));
child.setAttribute('shmtrace.category', 'app');
child.end();
parent.end();
await provider.forceFlush();
await provider.shutdown();
