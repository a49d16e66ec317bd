import { keccak256, toUtf8Bytes } from 'ethers';
import type { Actor, Chain } from './chain.js';
import { mined, openActiveSession, submitJob } from './scenario.js';

/** The response hash workers commit in these tests. */
export const RESPONSE = keccak256(toUtf8Bytes('final answer ciphertext'));

/** Shortcuts that bring a job of `user` to a given state, for tests about what follows. */
export function jobSteps(chain: () => Chain) {
  async function submitted(options: { by?: Actor; worker?: Actor } = {}) {
    const sessionId = await openActiveSession(chain(), { by: options.by, worker: options.worker });
    const { jobId } = await submitJob(chain(), sessionId, { by: options.by });
    return { jobId, sessionId };
  }

  async function failed(options: { by?: Actor } = {}) {
    const job = await submitted(options);
    await mined(chain().jobs('worker').failJob(job.jobId));
    return job;
  }

  async function completed() {
    const job = await submitted();
    const receipt = await mined(chain().jobs('worker').completeJob(job.jobId, RESPONSE));
    return { ...job, receipt };
  }

  const state = async (jobId: bigint) => Number((await chain().jobs('stranger').getJob(jobId)).state);
  const balance = (actor: Actor) => chain().jobs('stranger').prepaidBalanceOf(chain().address[actor]);

  return { submitted, failed, completed, state, balance };
}
