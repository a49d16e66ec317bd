import { describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { GracefulShutdown } from '../src/index.js';

describe('GracefulShutdown', () => {
  it('closes in reverse order of registration, once however often it is asked', async () => {
    const closed: string[] = [];
    const shutdown = new GracefulShutdown()
      .add('store', () => void closed.push('store'))
      .add('grpc', async () => {
        await sleep(10);
        closed.push('grpc');
      })
      .add('http', () => void closed.push('http'));
    const [first, second] = await Promise.all([shutdown.shutdown('SIGTERM'), shutdown.shutdown('SIGINT')]);
    expect(first).toBe(true);
    expect(second).toBe(true);
    expect(closed).toEqual(['http', 'grpc', 'store']);
  });

  it('keeps closing after a closer fails, and reports the shutdown as unclean', async () => {
    const closed: string[] = [];
    const shutdown = new GracefulShutdown()
      .add('store', () => void closed.push('store'))
      .add('broken', () => {
        throw new Error('boom');
      });
    expect(await shutdown.shutdown('test')).toBe(false);
    expect(closed).toEqual(['store']);
  });

  it('gives up on a hanging closer at the timeout', async () => {
    const shutdown = new GracefulShutdown({ timeoutMs: 100 }).add(
      'hangs',
      () => new Promise<void>(() => undefined),
    );
    const started = Date.now();
    expect(await shutdown.shutdown('test')).toBe(false);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
