import { getBytes, parseEther, type Wallet } from 'ethers';
import {
  ChainClient,
  encodeBlob,
  encodePromptPlaintext,
  encryptPrompt,
  generateReplyKey,
  SessionState,
} from '@svc/chain';
import { sendWithBlobs } from '@svc/anvil';
import { connectJobRegistry, connectWorkerRegistry, modelIdOf } from '@svc/contracts';
import { waitUntil, type Devnet } from '@svc/testkit';
import { MODEL } from './models.js';

/** Plays the service and other workers on chain: sessions, jobs with real encrypted prompt blobs. */
export class ChainSide {
  readonly chain: ChainClient;
  readonly #devnet: Devnet;
  readonly #owner: Wallet;

  constructor(devnet: Devnet, owner: Wallet) {
    this.#devnet = devnet;
    this.#owner = owner;
    this.chain = new ChainClient({
      provider: devnet.provider,
      jobRegistryAddress: devnet.deployment.jobRegistryAddress,
      workerRegistryAddress: devnet.deployment.workerRegistryAddress,
    });
  }

  get #registry() {
    return connectJobRegistry(this.#devnet.deployment.jobRegistryAddress, this.#owner);
  }

  async deposit(amount = parseEther('5')): Promise<void> {
    await (await this.#registry.deposit({ value: amount })).wait();
  }

  /** Registers `wallet` as a worker directly (no reference worker behind it). */
  async registerWorker(wallet: Wallet): Promise<void> {
    const registry = connectWorkerRegistry(
      this.#devnet.deployment.workerRegistryAddress,
      wallet.connect(this.#devnet.provider),
    );
    await (await registry.register([modelIdOf(MODEL.name)], { value: parseEther('1') })).wait();
  }

  async deregisterWorker(wallet: Wallet): Promise<void> {
    const registry = connectWorkerRegistry(
      this.#devnet.deployment.workerRegistryAddress,
      wallet.connect(this.#devnet.provider),
    );
    await (await registry.deregister()).wait();
  }

  async openSession(worker: string): Promise<{ sessionId: bigint; claimDeadline: number }> {
    const registry = this.#registry;
    const receipt = await (
      await registry.openSession(this.#owner.address, modelIdOf(MODEL.name), worker)
    ).wait();
    const opened = receipt!.logs
      .map((entry) => registry.interface.parseLog(entry))
      .find((parsed) => parsed?.name === 'SessionOpened');
    const sessionId = opened!.args.sessionId as bigint;
    return { sessionId, claimDeadline: (await this.chain.getSession(sessionId)).claimDeadline };
  }

  async waitForClaim(sessionId: bigint): Promise<void> {
    await waitUntil(
      () => this.chain.getSession(sessionId),
      (session) => session.state === SessionState.Active,
      { what: `session ${sessionId} claimed`, timeoutMs: 15_000, intervalMs: 50 },
    );
  }

  async submitJob(sessionId: bigint, content: string): Promise<bigint> {
    const publicKey = getBytes((await this.chain.getSession(sessionId)).publicKey);
    const plaintext = encodePromptPlaintext({
      model: MODEL.name,
      messages: [{ role: 'user', content }],
      replyKey: generateReplyKey(),
    });
    const wire = encryptPrompt(plaintext, publicKey, {
      chainId: BigInt(this.#devnet.anvil.chainId),
      jobRegistry: this.#devnet.deployment.jobRegistryAddress,
      sessionId,
    });
    const registry = this.#registry;
    const request = await registry.submitJobFor.populateTransaction(
      this.#owner.address,
      sessionId,
      await registry.nextJobId(sessionId),
      MODEL.feeWei,
      0,
      0,
    );
    const receipt = await (await sendWithBlobs(this.#owner, request, [encodeBlob(wire)])).wait();
    const submitted = receipt!.logs
      .map((entry) => registry.interface.parseLog(entry))
      .find((parsed) => parsed?.name === 'JobSubmitted');
    return submitted!.args.jobId as bigint;
  }
}
