import { getBytes } from 'ethers';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { AsyncQueue, closeClient, createClient } from '@svc/proto';
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

  constructor(target: string) {
    this.#client = createClient(WorkerLink, target);
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

  /** hello, then the challenge signed by `signer`; returns the frame that answered the signature. */
  async handshake(
    claimed: string,
    signer: { signMessage(message: string): Promise<string> },
  ): Promise<ConnectResponse['frame'] | undefined> {
    this.send({
      case: 'hello',
      value: { worker: { hex: claimed }, protocolVersion: 1, software: 'raw-link' },
    });
    const challenge = await this.next();
    if (challenge?.case !== 'challenge') throw new Error(`expected a challenge, got ${challenge?.case}`);
    const signature = getBytes(await signer.signMessage(challenge.value.message));
    this.send({ case: 'challengeResponse', value: { signature } });
    return this.next();
  }

  close(): void {
    this.outbound.end();
    closeClient(this.#client);
  }
}
