import { randomUUID } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { getAddress, isAddress } from 'ethers';
import type { Logger } from '@svc/platform';
import { AsyncQueue } from '@svc/proto';
import {
  ConnectResponseSchema,
  LinkRefusalReason,
  type ConnectRequest,
  type ConnectResponse,
  type WorkerHeartbeat,
} from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import type { AnswerFrame, AnswerFrameIntake } from './answer-frame-intake.js';
import { issueChallenge, isSignedBy, type ChallengeBinding, type LinkChallenge } from './link-challenge.js';
import type { WorkerAdmission } from './worker-admission.js';

/** Version 2: the challenge is EIP-712 typed data sent as fields (version 1 signed a text; not served). */
export const WORKER_LINK_PROTOCOL_VERSION = 2;

export type ResponseInit = Parameters<typeof create<typeof ConnectResponseSchema>>[1];

/** What one link needs from the replica that serves it. */
export interface LinkContext {
  readonly binding: Omit<ChallengeBinding, 'worker'>;
  readonly heartbeatIntervalMs: number;
  readonly presenceTtlMs: number;
  readonly challengeTtlMs: number;
  readonly admission: WorkerAdmission;
  readonly intake: AnswerFrameIntake;
  readonly logger: Logger;
  /** The link was welcomed: it becomes the worker's link on this replica, replacing an older one. */
  welcomed(link: LinkConnection): void;
  heartbeat(link: LinkConnection, offer: WorkerHeartbeat): Promise<void>;
  hintAcknowledged(
    link: LinkConnection,
    ack: Extract<ConnectRequest['frame'], { case: 'hintAck' }>['value'],
  ): void;
  ended(link: LinkConnection): Promise<void>;
}

type Phase = 'hello' | 'challenged' | 'live' | 'ended';

/**
 * One worker's link on this replica: hello, signed challenge, admission, welcome; then heartbeats keep
 * it (a silent link is ended) and answer frames go through the intake. A refusal is its last frame.
 */
export class LinkConnection {
  readonly id = randomUUID();
  readonly responses = new AsyncQueue<ConnectResponse>();
  #phase: Phase = 'hello';
  #worker = '';
  #challenge: LinkChallenge | undefined;
  #deadline: NodeJS.Timeout | undefined;
  readonly #ended: Promise<void>;
  #end!: () => void;
  readonly #context: LinkContext;

  constructor(context: LinkContext) {
    this.#context = context;
    this.#ended = new Promise((resolve) => (this.#end = resolve));
  }

  /** The address the hello claimed (checksummed); proven once the link is live. */
  get worker(): string {
    return this.#worker;
  }

  get isLive(): boolean {
    return this.#phase === 'live';
  }

  send(init: ResponseInit): boolean {
    if (this.responses.isEnded) return false;
    this.responses.push(create(ConnectResponseSchema, init));
    return true;
  }

  /** Sends the refusal as the link's last frame and ends it. */
  refuse(reason: LinkRefusalReason, detail: string): void {
    this.send({ frame: { case: 'refusal', value: { reason, detail } } });
    this.#close();
  }

  /** Reads the worker's frames until the worker leaves or the link is ended from this side. */
  async serve(requests: AsyncIterable<ConnectRequest>): Promise<void> {
    this.#armDeadline(
      this.#context.challengeTtlMs,
      LinkRefusalReason.CHALLENGE_FAILED,
      'no signed challenge in time',
    );
    const iterator = requests[Symbol.asyncIterator]();
    const ended = this.#ended.then(() => undefined);
    try {
      for (;;) {
        const next = await Promise.race([iterator.next(), ended]);
        if (!next || next.done || this.responses.isEnded) break;
        await this.#onFrame(next.value);
      }
    } catch (error) {
      if (!this.responses.isEnded)
        this.#context.logger.debug({ err: error, linkId: this.id }, 'worker link broke');
    } finally {
      this.#close();
      void iterator.return?.();
      await this.#context.ended(this);
    }
  }

  async #onFrame(request: ConnectRequest): Promise<void> {
    const frame = request.frame;
    if (this.#phase === 'hello') return this.#onHello(frame);
    if (this.#phase === 'challenged') return this.#onChallengeResponse(frame);
    switch (frame.case) {
      case 'heartbeat':
        this.#armDeadline(
          this.#context.presenceTtlMs,
          LinkRefusalReason.HEARTBEAT_MISSED,
          'no heartbeat in time',
        );
        return this.#context.heartbeat(this, frame.value);
      case 'chunk':
      case 'finalAnswer':
      case 'jobError':
        return this.#onAnswerFrame(frame);
      case 'hintAck':
        return this.#context.hintAcknowledged(this, frame.value);
      default:
        return this.refuse(LinkRefusalReason.PROTOCOL_VIOLATION, `unexpected ${frame.case ?? 'empty'} frame`);
    }
  }

  #onHello(frame: ConnectRequest['frame']): void {
    if (frame.case !== 'hello')
      return this.refuse(LinkRefusalReason.PROTOCOL_VIOLATION, 'the first frame must be a hello');
    const { worker, protocolVersion } = frame.value;
    if (protocolVersion !== WORKER_LINK_PROTOCOL_VERSION)
      return this.refuse(
        LinkRefusalReason.PROTOCOL_VIOLATION,
        `protocol version ${protocolVersion} is not served`,
      );
    if (!worker || !isAddress(worker.hex))
      return this.refuse(LinkRefusalReason.PROTOCOL_VIOLATION, 'the hello names no worker address');
    this.#worker = getAddress(worker.hex);
    this.#challenge = issueChallenge(
      { ...this.#context.binding, worker: this.#worker },
      Date.now(),
      this.#context.challengeTtlMs,
    );
    this.#phase = 'challenged';
    const { fields, expiresAtMs } = this.#challenge;
    this.send({
      frame: {
        case: 'challenge',
        value: {
          orchestrator: fields.orchestrator,
          chainId: fields.chainId,
          jobRegistry: { hex: fields.jobRegistry },
          worker: { hex: fields.worker },
          nonce: { hex: fields.nonce },
          expiresAt: timestampFromMs(expiresAtMs),
        },
      },
    });
  }

  async #onChallengeResponse(frame: ConnectRequest['frame']): Promise<void> {
    if (frame.case !== 'challengeResponse')
      return this.refuse(LinkRefusalReason.PROTOCOL_VIOLATION, 'expected the challenge response');
    const challenge = this.#challenge!;
    if (Date.now() > challenge.expiresAtMs)
      return this.refuse(LinkRefusalReason.CHALLENGE_FAILED, 'the challenge expired');
    if (!isSignedBy(challenge, frame.value.signature, this.#worker))
      return this.refuse(LinkRefusalReason.CHALLENGE_FAILED, 'the signature does not recover to the worker');
    if (!(await this.#context.admission.isActiveWorker(this.#worker)))
      return this.refuse(LinkRefusalReason.NOT_ACTIVE_WORKER, 'not an active registered worker');
    if (this.responses.isEnded) return;
    this.#phase = 'live';
    // Until the first heartbeat the link is held for one presence TTL, like between beats.
    this.#armDeadline(
      this.#context.presenceTtlMs,
      LinkRefusalReason.HEARTBEAT_MISSED,
      'no heartbeat in time',
    );
    const { binding, heartbeatIntervalMs } = this.#context;
    this.send({
      frame: {
        case: 'welcome',
        value: {
          linkId: this.id,
          heartbeatInterval: {
            seconds: BigInt(Math.floor(heartbeatIntervalMs / 1000)),
            nanos: (heartbeatIntervalMs % 1000) * 1_000_000,
          },
          chainId: binding.chainId,
          jobRegistry: { hex: getAddress(binding.jobRegistry) },
        },
      },
    });
    this.#context.welcomed(this);
  }

  async #onAnswerFrame(frame: AnswerFrame): Promise<void> {
    const verdict = await this.#context.intake.accept(this.#worker, frame);
    if (verdict.accepted) return;
    const { jobId, attempt } = frame.value;
    const seq = frame.case === 'jobError' ? 0 : frame.value.seq;
    this.send({ frame: { case: 'frameRejection', value: { jobId, attempt, seq, reason: verdict.reason } } });
  }

  #armDeadline(ms: number, reason: LinkRefusalReason, detail: string): void {
    if (this.#deadline) clearTimeout(this.#deadline);
    this.#deadline = setTimeout(() => this.refuse(reason, detail), ms);
  }

  #close(): void {
    if (this.#phase === 'ended') return;
    this.#phase = 'ended';
    if (this.#deadline) clearTimeout(this.#deadline);
    this.responses.end();
    this.#end();
  }
}
