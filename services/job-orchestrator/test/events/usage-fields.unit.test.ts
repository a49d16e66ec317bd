import { setTimeout as sleep } from 'node:timers/promises';
import { fromBinary } from '@bufbuild/protobuf';
import { describe, expect, it, jest } from '@jest/globals';
import { AppError, createLogger, MemoryStore } from '@svc/platform';
import {
  JobLifecycleEventSchema,
  JobLifecycleKind,
} from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { CallStream } from '../../src/completions/call-stream.js';
import {
  LIFECYCLE_OUTBOX,
  LifecyclePublisher,
  type CallIdentity,
  type LifecycleStep,
} from '../../src/events/lifecycle-events.js';

// What the usage history needs from a call's events (docs/events.md): dropped messages, the time to the
// first output and the whole call's time, on the event that ends the call, and nowhere they do not apply.

const logger = createLogger({ service: 'usage-fields-test', level: 'silent' });
const identity: CallIdentity = {
  reservationId: 'r-1',
  requestId: 'q-1',
  paymentPath: 'delegate',
  payer: '0x0000000000000000000000000000000000000001',
  keyId: 'k-1',
  model: 'llama3.2:1b',
};
const service = {
  jobId: 5n,
  sessionId: 2n,
  txHash: `0x${'11'.repeat(32)}`,
  worker: '0x0000000000000000000000000000000000000002',
  droppedMessages: 3,
};

function streamOf(stream: boolean) {
  const published: Array<{ kind: JobLifecycleKind; step: LifecycleStep }> = [];
  const publish = jest.fn(async (_call: CallIdentity, kind: JobLifecycleKind, step: LifecycleStep = {}) => {
    published.push({ kind, step });
  });
  return {
    call: new CallStream(() => undefined, { stream, identity, lifecycle: { publish }, logger }),
    published,
  };
}

describe('the timings and dropped messages a call records when it ends', () => {
  it('times the first delta of a stream apart from the end of the call', async () => {
    const { call, published } = streamOf(true);
    await sleep(30);
    call.delta(service, 10n, 'Hel');
    await sleep(60);
    expect(call.deliver('Hello', service, 10n, 1)).toBe(true);
    const [answered] = published;
    expect(answered?.kind).toBe(JobLifecycleKind.ANSWERED);
    expect(answered?.step).toMatchObject({ droppedMessages: 3, feeWei: 10n });
    const { firstOutputMs, durationMs } = answered!.step;
    expect(firstOutputMs).toBeGreaterThanOrEqual(25);
    expect(durationMs! - firstOutputMs!).toBeGreaterThanOrEqual(50);
  });

  it('gives a call with no output a total time and no first-output time', async () => {
    const { call, published } = streamOf(false);
    await sleep(20);
    call.fail(new AppError('job_failed'), service);
    expect(published[0]?.kind).toBe(JobLifecycleKind.FAILED);
    expect(published[0]?.step.firstOutputMs).toBeUndefined();
    expect(published[0]?.step.durationMs).toBeGreaterThanOrEqual(15);
    expect(published[0]?.step.droppedMessages).toBe(3);
  });
});

describe('the event on the wire', () => {
  it('carries the new fields when given, and leaves them unset otherwise', async () => {
    const store = new MemoryStore();
    const publisher = new LifecyclePublisher(store, logger, { maxEvents: 100 });
    await publisher.requested(identity);
    await publisher.publish(identity, JobLifecycleKind.ANSWERED, {
      jobId: 5n,
      droppedMessages: 3,
      firstOutputMs: 120.4,
      durationMs: -5,
    });
    const [requested, answered] = (await store.queues.peek(LIFECYCLE_OUTBOX, 10)).map((entry) =>
      fromBinary(JobLifecycleEventSchema, entry.payload),
    );
    expect(requested?.droppedMessages).toBe(0);
    expect(requested?.firstOutputMs).toBeUndefined();
    expect(requested?.durationMs).toBeUndefined();
    // Whole milliseconds; a clock that stepped back reads 0, never a negative uint32.
    expect(answered).toMatchObject({ droppedMessages: 3, firstOutputMs: 120, durationMs: 0 });
    await publisher.stop(1_000);
  });
});
