import type { OtlpReceiver, ReceivedSpan } from '@svc/testkit/otlp-receiver';
import { waitFor } from './environment.js';
import type { Violation } from './invariants.js';

/** The processes a streamed call paid with a key goes through, by their `service.name`. */
const SERVICES_OF_A_CALL = ['gateway', 'key-service', 'job-orchestrator'] as const;

/** The key-service's handling of the call's lifecycle events (its spend settlement), from Kafka. */
const SETTLEMENT_SPAN = 'process svc.job-lifecycle.v1';

/**
 * One streamed call is one trace across the processes: the gateway's span of the request (found by its
 * request id) is the root, every other span of the trace hangs from a span of it, the key-service and
 * job-orchestrator pods exported spans into it (the trace carried over gRPC metadata), and so did the
 * key-service's spend settlement of the call's lifecycle events (carried through the orchestrator's outbox
 * and Kafka's record headers).
 */
export async function checkCallTrace(receiver: OtlpReceiver, requestId: string): Promise<Violation[]> {
  const invariant = 'one trace per call across the processes';
  let trace: ReceivedSpan[] = [];
  try {
    await waitFor(
      `the spans of call ${requestId}`,
      () => {
        trace = spansOfCall(receiver.spans(), requestId);
        return (
          SERVICES_OF_A_CALL.every((service) => trace.some((span) => span.service === service)) &&
          trace.some((span) => span.service === 'key-service' && span.name === SETTLEMENT_SPAN)
        );
      },
      30_000,
    );
  } catch {
    const found = trace.map((span) => `${span.service} ${span.name}`).join(', ') || 'no span';
    return [{ invariant, detail: `call ${requestId}: ${found}` }];
  }
  const violations: Violation[] = [];
  const spanIds = new Set(trace.map((span) => span.spanId));
  const roots = trace.filter((span) => !spanIds.has(span.parentSpanId));
  if (roots.length !== 1 || roots[0]!.service !== 'gateway' || roots[0]!.parentSpanId !== '')
    violations.push({
      invariant,
      detail: `call ${requestId}: roots ${roots.map((span) => `${span.service} ${span.name}`).join(', ')}`,
    });
  return violations;
}

/** No exported span carries any of `secrets` (prompts, API keys), nor a bearer credential. */
export function checkSpansKeepSecrets(receiver: OtlpReceiver, secrets: readonly string[]): Violation[] {
  const exported = JSON.stringify(receiver.spans());
  const leaked = secrets.filter((secret) => exported.includes(secret));
  if (/bearer |svc_[A-Za-z0-9_-]{8,}/i.test(exported)) leaked.push('a bearer credential or an svc_ key');
  return leaked.map((secret) => ({
    invariant: 'no secret in a span',
    detail: `an exported span carries ${secret.startsWith('svc_') ? 'an API key' : JSON.stringify(secret)}`,
  }));
}

/** The spans of the trace whose gateway span carries `requestId`. */
function spansOfCall(spans: readonly ReceivedSpan[], requestId: string): ReceivedSpan[] {
  const root = spans.find(
    (span) => span.service === 'gateway' && span.attributes['svc.request_id'] === requestId,
  );
  return root ? spans.filter((span) => span.traceId === root.traceId) : [];
}
