import { getBytes, parseEther, type Wallet } from 'ethers';
import {
  ChainClient,
  JobState,
  SessionState,
  encodeBlob,
  encodePromptPlaintext,
  encryptPrompt,
  generateReplyKey,
  type Job,
  type PromptMessage,
} from '@svc/chain';
import { connectJobRegistry, modelIdOf, type Deployment } from '@svc/contracts';
import { sendWithBlobs } from '@svc/anvil';
import { waitUntil } from '@svc/testkit';

export interface SubmittedJob {
  jobId: bigint;
  sessionId: bigint;
  replyKey: Uint8Array;
  messages: PromptMessage[];
}

export type PromptBlob =
  | { kind: 'prompt'; model?: string; messages: PromptMessage[]; encryptTo?: Uint8Array }
  | { kind: 'raw'; blob: Uint8Array }
  | { kind: 'random' };

/**
 * Plays the service on chain: a funded owner that opens sessions naming a worker and submits jobs
 * with real encrypted prompt blobs.
 */
export class ServiceSide {
  readonly chain: ChainClient;
  readonly #owner: Wallet;
  readonly #deployment: Deployment;
  readonly #chainId: bigint;

  constructor(owner: Wallet, deployment: Deployment, chainId: bigint) {
    this.#owner = owner;
    this.#deployment = deployment;
    this.#chainId = chainId;
    this.chain = new ChainClient({
      provider: owner.provider!,
      jobRegistryAddress: deployment.jobRegistryAddress,
      workerRegistryAddress: deployment.workerRegistryAddress,
    });
  }

  get #registry() {
    return connectJobRegistry(this.#deployment.jobRegistryAddress, this.#owner);
  }

  async deposit(amount = parseEther('5')): Promise<void> {
    await (await this.#registry.deposit({ value: amount })).wait();
  }

  async openSession(worker: string, model: string): Promise<bigint> {
    const receipt = await (
      await this.#registry.openSession(this.#owner.address, modelIdOf(model), worker)
    ).wait();
    const log = receipt!.logs
      .map((entry) => this.#registry.interface.parseLog(entry))
      .find((parsed) => parsed?.name === 'SessionOpened');
    return log!.args.sessionId as bigint;
  }

  /** Waits until the worker claimed the session; returns its session public key. */
  async waitForClaim(sessionId: bigint, timeoutMs = 15_000): Promise<Uint8Array> {
    const session = await waitUntil(
      () => this.chain.getSession(sessionId),
      (current) => current.state === SessionState.Active,
      { what: `session ${sessionId} claimed`, timeoutMs, intervalMs: 50 },
    );
    return getBytes(session.publicKey);
  }

  async submitJob(sessionId: bigint, model: string, blob: PromptBlob): Promise<SubmittedJob> {
    const replyKey = generateReplyKey();
    let data: Uint8Array[] | number;
    let messages: PromptMessage[] = [];
    if (blob.kind === 'prompt') {
      messages = blob.messages;
      const publicKey = blob.encryptTo ?? getBytes((await this.chain.getSession(sessionId)).publicKey);
      const plaintext = encodePromptPlaintext({ model: blob.model ?? model, messages, replyKey });
      const wire = encryptPrompt(plaintext, publicKey, {
        chainId: this.#chainId,
        jobRegistry: this.#deployment.jobRegistryAddress,
        sessionId,
      });
      data = [encodeBlob(wire)];
    } else {
      data = blob.kind === 'raw' ? [blob.blob] : 1;
    }
    const fee = await this.chain.jobFee(modelIdOf(model));
    const registry = this.#registry;
    const request = await registry.submitJobFor.populateTransaction(
      this.#owner.address,
      sessionId,
      await registry.nextJobId(sessionId),
      fee,
    );
    const receipt = await (await sendWithBlobs(this.#owner, request, data)).wait();
    const log = receipt!.logs
      .map((entry) => registry.interface.parseLog(entry))
      .find((parsed) => parsed?.name === 'JobSubmitted');
    return { jobId: log!.args.jobId as bigint, sessionId, replyKey, messages };
  }

  async closeSession(sessionId: bigint): Promise<void> {
    await (await this.#registry.closeSession(sessionId)).wait();
  }

  /** Waits until the job left `Submitted` (completed or failed). */
  waitForOutcome(jobId: bigint, timeoutMs = 20_000): Promise<Job> {
    return waitUntil(
      () => this.chain.getJob(jobId),
      (job) => job.state !== JobState.Submitted,
      { what: `job ${jobId} completed or failed`, timeoutMs, intervalMs: 50 },
    );
  }
}
