import { randomBytes, randomUUID } from 'node:crypto';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { getAddress, hexlify } from 'ethers';
import { recoverLinkChallengeSigner } from '@svc/chain';
import { AsyncQueue, GrpcServer, type ServerCredentials } from '@svc/proto';
import {
  ConnectResponseSchema,
  LinkRefusalReason,
  WorkerLink,
  type ConnectRequest,
  type ConnectResponse,
  type LinkChallengeSchema,
} from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';

type ResponseInit = Parameters<typeof create<typeof ConnectResponseSchema>>[1];
export type ChallengeInit = Omit<MessageInitShape<typeof LinkChallengeSchema>, '$typeName'>;

interface LiveLink {
  id: string;
  worker: string;
  responses: AsyncQueue<ConnectResponse>;
}

/**
 * The orchestrator's side of the WorkerLink, as far as a worker can tell: a challenge it verifies,
 * a welcome, and a record of every frame. Tests push hints and acknowledgements and drop links.
 */
export class TestLinkServer {
  readonly frames: { linkId: string; frame: ConnectRequest['frame'] }[] = [];
  readonly verifiedWorkers: string[] = [];
  readonly links: LiveLink[] = [];
  /** Refuse every new link with this reason (undefined accepts). */
  refuseWith: LinkRefusalReason | undefined;
  /**
   * A rogue orchestrator's hand: rewrites the challenge each link is sent (the fields a real one sends
   * are given), e.g. to name another chain or to pick a nonce that is some digest it wants signed.
   */
  rewriteChallenge: ((challenge: ChallengeInit) => ChallengeInit) | undefined;
  #server = new GrpcServer();
  #port = 0;

  constructor(
    readonly chainId: bigint,
    readonly jobRegistry: string,
    readonly heartbeatMs = 100,
    readonly options: { credentials?: ServerCredentials; host?: string } = {},
  ) {}

  get target(): string {
    return `${this.options.host ?? '127.0.0.1'}:${this.#port}`;
  }

  async start(): Promise<void> {
    this.#server.add(WorkerLink, { connect: (requests) => this.#connect(requests) });
    this.#port = await this.#server.listen(
      '127.0.0.1:0',
      this.options.credentials ? { credentials: this.options.credentials } : {},
    );
  }

  async stop(): Promise<void> {
    for (const link of this.links) link.responses.end();
    await this.#server.shutdown(100);
  }

  framesOf<C extends NonNullable<ConnectRequest['frame']['case']>>(kind: C) {
    return this.frames
      .filter((entry) => entry.frame.case === kind)
      .map((entry) => entry.frame.value as Extract<ConnectRequest['frame'], { case: C }>['value']);
  }

  send(init: ResponseInit): void {
    const live = this.links.filter((link) => !link.responses.isEnded);
    for (const link of live) link.responses.push(create(ConnectResponseSchema, init));
  }

  /** Ends every live link from the server's side, as a crashing replica would. */
  dropAll(): void {
    for (const link of this.links) link.responses.end();
  }

  #connect(requests: AsyncIterable<ConnectRequest>): AsyncIterable<ConnectResponse> {
    const responses = new AsyncQueue<ConnectResponse>();
    const link: LiveLink = { id: randomUUID(), worker: '', responses };
    this.links.push(link);
    let challenge: ChallengeInit | undefined;
    void (async () => {
      try {
        for await (const request of requests) {
          this.frames.push({ linkId: link.id, frame: request.frame });
          if (responses.isEnded) continue;
          if (request.frame.case === 'hello') {
            link.worker = request.frame.value.worker?.hex ?? '';
            const honest: ChallengeInit = {
              orchestrator: 'test orchestrator',
              chainId: this.chainId,
              jobRegistry: { hex: getAddress(this.jobRegistry) },
              worker: { hex: link.worker },
              nonce: { hex: hexlify(randomBytes(32)) },
              expiresAt: { seconds: BigInt(Math.floor(Date.now() / 1000) + 30), nanos: 0 },
            };
            challenge = this.rewriteChallenge ? this.rewriteChallenge(honest) : honest;
            responses.push(create(ConnectResponseSchema, { frame: { case: 'challenge', value: challenge } }));
          } else if (request.frame.case === 'challengeResponse') {
            const signer =
              challenge &&
              recoverLinkChallengeSigner(
                {
                  orchestrator: challenge.orchestrator ?? '',
                  chainId: challenge.chainId ?? 0n,
                  jobRegistry: challenge.jobRegistry?.hex ?? '',
                  worker: challenge.worker?.hex ?? '',
                  nonce: challenge.nonce?.hex ?? '',
                  expiresAt: challenge.expiresAt?.seconds ?? 0n,
                },
                request.frame.value.signature,
              );
            if (
              this.refuseWith !== undefined ||
              !signer ||
              signer.toLowerCase() !== link.worker.toLowerCase()
            ) {
              const reason = this.refuseWith ?? LinkRefusalReason.CHALLENGE_FAILED;
              responses.push(
                create(ConnectResponseSchema, { frame: { case: 'refusal', value: { reason } } }),
              );
              responses.end();
              continue;
            }
            this.verifiedWorkers.push(signer);
            responses.push(
              create(ConnectResponseSchema, {
                frame: {
                  case: 'welcome',
                  value: {
                    linkId: link.id,
                    heartbeatInterval: { seconds: 0n, nanos: this.heartbeatMs * 1_000_000 },
                    chainId: this.chainId,
                    jobRegistry: { hex: this.jobRegistry },
                  },
                },
              }),
            );
          }
        }
      } catch {
        // The worker went away.
      } finally {
        responses.end();
      }
    })();
    return responses;
  }
}
