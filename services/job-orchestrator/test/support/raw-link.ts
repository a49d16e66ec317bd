import { getBytes } from 'ethers';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { LINK_CHALLENGE_TYPES, linkChallengeDomain, type TypedDataSigner } from '@svc/chain';
import { AsyncQueue, closeClient, createClient, type ClientOptions } from '@svc/proto';
import {
  WorkerLink,
  type ConnectRequestSchema,
  type ConnectResponse,
} from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';

type Request = MessageInitShape<typeof ConnectRequestSchema>;

/**
 * A hand-driven worker end of the link over real gRPC, for what the reference worker never does:
 * signing with the wrong key, going silent, sending frames for someone else's job.
 */
export class RawLink {
  readonly outbound = new AsyncQueue<Request>();
  readonly #client;
  readonly #inbound: AsyncIterator<ConnectResponse>;

  constructor(target: string, options: ClientOptions = {}) {
    this.#client = createClient(WorkerLink, target, options);
    this.#inbound = this.#client.connect(this.outbound)[Symbol.asyncIterator]();
  }

  send(frame: Request['frame']): void {
    this.outbound.push({ frame } as Request);
  }

  /** The next frame from the orchestrator; undefined once the stream ended. */
  async next(): Promise<ConnectResponse['frame'] | undefined> {
    const result = await this.#inbound.next();
    return result.done ? undefined : result.value.frame;
  }

  /**
   * hello, then the challenge's typed data signed by `signer` as it came (no checks: a raw link signs
   * whatever it is sent); returns the frame that answered the signature.
   */
  async handshake(claimed: string, signer: TypedDataSigner): Promise<ConnectResponse['frame'] | undefined> {
    this.send({
      case: 'hello',
      value: { worker: { hex: claimed }, protocolVersion: 2, software: 'raw-link' },
    });
    const challenge = await this.next();
    if (challenge?.case !== 'challenge') throw new Error(`expected a challenge, got ${challenge?.case}`);
    const fields = challenge.value;
    const signature = getBytes(
      await signer.signTypedData(linkChallengeDomain(fields.chainId), LINK_CHALLENGE_TYPES, {
        orchestrator: fields.orchestrator,
        worker: fields.worker?.hex,
        jobRegistry: fields.jobRegistry?.hex,
        nonce: fields.nonce?.hex,
        expiresAt: fields.expiresAt?.seconds,
      }),
    );
    this.send({ case: 'challengeResponse', value: { signature } });
    return this.next();
  }

  close(): void {
    this.outbound.end();
    closeClient(this.#client);
  }
}
