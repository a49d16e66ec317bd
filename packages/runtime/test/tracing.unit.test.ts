import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger, isTracing, SpanKind, startSpan } from '@svc/platform';
import { startOtlpReceiver, type OtlpReceiver } from '@svc/testkit';
import { defineModule, runTarget } from '../src/index.js';

// The runner traces a process when OTEL_EXPORTER_OTLP_ENDPOINT is set, under the target's name, and
// exports what is still buffered when the process stops; without the setting nothing is recorded.

const logger = createLogger({ service: 'tracing-test', level: 'silent' });
/** A module that records one span as it starts. */
const traced = defineModule({
  name: 'traced',
  configShape: {},
  needs: [],
  build: () => ({
    async start() {
      startSpan('started', { kind: SpanKind.INTERNAL }).end();
    },
    async stop() {},
  }),
});

describe('the runner and tracing', () => {
  let stateDir: string;
  let receiver: OtlpReceiver;

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'svc-tracing-'));
    receiver = await startOtlpReceiver();
  });

  afterAll(async () => {
    await receiver.close();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('records nothing without OTEL_EXPORTER_OTLP_ENDPOINT', async () => {
    const running = await runTarget(
      { name: 'untraced', modules: [traced] },
      { env: { STATE_DIR: stateDir }, logger },
    );
    expect(isTracing()).toBe(false);
    await running.stop();
  });

  it('exports the spans of a target under its name, the last ones as it stops', async () => {
    const running = await runTarget(
      { name: 'traced-target', modules: [traced] },
      { env: { STATE_DIR: stateDir, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint }, logger },
    );
    expect(isTracing()).toBe(true);
    // Stopped before the batch was due: the stop sends it.
    await running.stop();
    expect(isTracing()).toBe(false);
    expect(receiver.spans()).toEqual([
      expect.objectContaining({ service: 'traced-target', name: 'started' }),
    ]);
  });

  it('names the service OTEL_SERVICE_NAME when it is set', async () => {
    const before = receiver.spans().length;
    const running = await runTarget(
      { name: 'traced-target', modules: [traced] },
      {
        env: {
          STATE_DIR: stateDir,
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
          OTEL_SERVICE_NAME: 'renamed',
        },
        logger,
      },
    );
    await running.stop();
    expect(
      receiver
        .spans()
        .slice(before)
        .map((span) => span.service),
    ).toEqual(['renamed']);
  });
});
