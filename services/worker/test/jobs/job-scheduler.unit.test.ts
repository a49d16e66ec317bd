import { describe, expect, it } from '@jest/globals';
import { createLogger } from '@svc/platform';
import { JobScheduler } from '../../src/jobs/job-scheduler.js';
import type { JobAssignment, JobOutcome } from '../../src/jobs/job-runner.js';

const logger = createLogger({ service: 'scheduler-test', level: 'fatal' });

function harness(capacity: number, maxWaiting: number, refuseMs = 0) {
  let concurrent = 0;
  let peak = 0;
  const ran: bigint[] = [];
  const refused: bigint[] = [];
  const scheduler = new JobScheduler({
    capacity,
    maxWaiting,
    logger,
    run: async (assignment: JobAssignment): Promise<JobOutcome> => {
      concurrent += 1;
      peak = Math.max(peak, concurrent);
      await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 20));
      concurrent -= 1;
      ran.push(assignment.jobId);
      return 'completed';
    },
    refuse: async (assignment) => {
      refused.push(assignment.jobId);
      // The failJob's transaction.
      await new Promise((resolve) => setTimeout(resolve, refuseMs));
    },
  });
  const submit = (jobId: bigint, sessionId = 1n) =>
    scheduler.submit({ jobId, sessionId, blockNumber: 1 }, sessionId);
  return { scheduler, submit, ran, refused, peak: () => peak };
}

describe('JobScheduler', () => {
  it('never runs more than its capacity, queues a short burst and refuses beyond it', async () => {
    const { scheduler, submit, ran, refused, peak } = harness(2, 2);
    const all = Array.from({ length: 6 }, (_, index) => submit(BigInt(index + 1)));
    expect(scheduler.freeJobSlots).toBe(0);
    await Promise.all(all);
    expect(peak()).toBe(2);
    expect(ran.sort()).toEqual([1n, 2n, 3n, 4n]);
    expect(refused.sort()).toEqual([5n, 6n]);
    expect(scheduler.freeJobSlots).toBe(2);
  });

  it('gives a slot to the next job once a job is answered, while its commitment is still mined', async () => {
    const commits: (() => void)[] = [];
    const started: bigint[] = [];
    const scheduler = new JobScheduler({
      capacity: 1,
      maxWaiting: 1,
      logger,
      run: async (assignment, _signal, answered): Promise<JobOutcome> => {
        started.push(assignment.jobId);
        answered();
        // The commitment: batched and mined later.
        await new Promise<void>((resolve) => commits.push(resolve));
        return 'completed';
      },
      refuse: async () => undefined,
    });
    const submit = (jobId: bigint) => scheduler.submit({ jobId, sessionId: jobId, blockNumber: 1 }, jobId);
    const tick = () => new Promise((resolve) => setImmediate(resolve));
    const jobs = [];
    for (const jobId of [1n, 2n, 3n]) {
      jobs.push(submit(jobId));
      await tick();
    }
    // Each answered job handed its slot on: none was refused, none waits, and the slot is free for the next.
    expect(started).toEqual([1n, 2n, 3n]);
    expect(scheduler.freeJobSlots).toBe(1);
    expect(scheduler.usesSession(1n)).toBe(true);
    for (const commit of commits) commit();
    await Promise.all(jobs);
    expect(scheduler.usesSession(1n)).toBe(false);
  });

  it('keeps the capacity under waves of concurrent submissions', async () => {
    const { submit, ran, peak } = harness(3, 100);
    const waves = [];
    for (let wave = 0; wave < 5; wave += 1) {
      waves.push(...Array.from({ length: 10 }, (_, index) => submit(BigInt(wave * 10 + index))));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await Promise.all(waves);
    expect(ran).toHaveLength(50);
    expect(peak()).toBe(3);
  });

  it('runs a job once however often it is announced, and tracks the sessions in use', async () => {
    const { scheduler, submit, ran } = harness(2, 2);
    const first = submit(7n, 9n);
    const again = submit(7n, 9n);
    expect(scheduler.usesSession(9n)).toBe(true);
    await Promise.all([first, again]);
    expect(ran).toEqual([7n]);
    expect(scheduler.usesSession(9n)).toBe(false);
  });

  it('never runs a job it is refusing when the job is announced again and a slot has freed meanwhile', async () => {
    const { submit, ran, refused } = harness(1, 0, 200);
    const first = submit(1n);
    const refusing = submit(2n);
    await first;
    // The chain's log announces job 2 after the service's hint did: its failJob is still on its way.
    const again = submit(2n);
    await Promise.all([refusing, again]);
    expect(ran).toEqual([1n]);
    expect(refused).toEqual([2n]);
    // Once refused, the job is failed on chain; a later announcement is the runner's to read as not ours.
    await submit(2n);
    expect(ran).toEqual([1n, 2n]);
  });

  it('refuses new jobs while draining and waits for the running ones', async () => {
    const { scheduler, submit, ran, refused } = harness(2, 2);
    const running = submit(1n);
    const drained = scheduler.drain();
    await submit(2n);
    await Promise.all([running, drained]);
    expect(ran).toEqual([1n]);
    expect(refused).toEqual([2n]);
  });
});
