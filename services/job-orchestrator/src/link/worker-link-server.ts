import { randomUUID } from 'node:crypto';
import { LINK_CHALLENGE_MAX_TTL_MS } from '@svc/chain';
import type { Logger, Store } from '@svc/platform';
import type { CallContext } from '@svc/proto';
import { create, fromBinary, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import {
  ConnectResponseSchema,
  HintOutcome,
  LinkRefusalReason,
  type ConnectRequest,
  type ConnectResponse,
  type HintAck,
  type JobSubmittedHintSchema,
  type PendingJobSchema,
  type SessionOpenedHintSchema,
} from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { AnswerFrameIntake } from './answer-frame-intake.js';
import type { JobAttempts } from './job-attempts.js';
import { LinkConnection, type LinkContext } from './link-connection.js';
import type { WorkerAdmission } from './worker-admission.js';
import { WorkerPresence, type LiveWorker } from './worker-presence.js';

type HintInit<
  S extends typeof SessionOpenedHintSchema | typeof JobSubmittedHintSchema | typeof PendingJobSchema,
> = Omit<MessageInitShape<S>, '$typeName'> & { readonly hintId: string };

/** A hint for a worker; its `hintId` comes back in the worker's `HintAck`. */
export type LinkHint =
  | { readonly case: 'sessionOpened'; readonly value: HintInit<typeof SessionOpenedHintSchema> }
  | { readonly case: 'jobSubmitted'; readonly value: HintInit<typeof JobSubmittedHintSchema> }
  | { readonly case: 'pendingJob'; readonly value: HintInit<typeof PendingJobSchema> };

/** The workers the rest of the orchestrator picks from and talks to. */
export interface LinkedWorkers {
  /** Workers heartbeating now on any replica, with their models and free capacity. */
  live(): Promise<LiveWorker[]>;
  /**
   * Sends a hint to the worker: at once when its link is live on this replica (true), else through the
   * store's channel of the replica that holds it (false: delivered there, if the worker is still linked).
   */
  sendHint(worker: string, hint: LinkHint): boolean;
  /** Tells the worker its final was stored; `committed` only once `JobCompleted` matched it. */
  acknowledgeFinal(jobId: bigint, attempt: number, committed: boolean): Promise<boolean>;
  /** Whether a worker linked here declined the hint (a full worker will not claim the session). */
  hintDeclined(hintId: string): boolean;
}

/** The channel a replica takes hints for its workers' links from, sent by the replicas serving calls. */
function linkHintsChannel(replicaId: string): string {
  return `link-hints:${replicaId}`;
}

/** A hint on its way to another replica: the worker it is for and the `ConnectResponse` to send it. */
interface RoutedHint {
  readonly worker: string;
  readonly response: string;
}

/** How long a declined hint is remembered: far longer than any claim window is waited on. */
const DECLINED_HINT_MEMORY_MS = 5 * 60_000;

export interface WorkerLinkServerOptions {
  readonly chainId: bigint;
  readonly jobRegistry: string;
  /** Names this deployment in the challenge. */
  readonly orchestrator: string;
  readonly heartbeatIntervalMs: number;
  readonly presenceTtlMs: number;
  readonly challengeTtlMs: number;
  readonly admission: WorkerAdmission;
  readonly attempts: JobAttempts;
  readonly store: Pick<Store, 'presence' | 'frames' | 'channels'>;
  readonly logger: Logger;
  /** Identifies this replica in presence (default: random per process). */
  readonly replicaId?: string;
  /** Called with each worker's reaction to a hint (the job keeper picks another worker on a decline). */
  readonly onHintAck?: (worker: string, ack: HintAck) => void;
}

/**
 * The orchestrator's end of `WorkerLink.Connect`: admits active registered workers by their signed
 * challenge, keeps their presence in the store while they heartbeat, relays hints to the workers
 * linked here and takes their answer frames into the per-job streams.
 */
export class WorkerLinkServer implements LinkedWorkers {
  readonly replicaId: string;
  readonly #options: WorkerLinkServerOptions;
  readonly #presence: WorkerPresence;
  readonly #context: LinkContext;
  readonly #open = new Set<LinkConnection>();
  /** The live link of each worker on this replica, by lowercase address. */
  readonly #byWorker = new Map<string, LinkConnection>();
  readonly #serving = new Set<Promise<void>>();
  /** Declined hint ids with when they were declined, oldest first. */
  readonly #declined = new Map<string, number>();
  #stopping = false;
  #unsubscribe: (() => Promise<void>) | undefined;

  constructor(options: WorkerLinkServerOptions) {
    if (options.presenceTtlMs <= options.heartbeatIntervalMs)
      throw new RangeError('the presence TTL must exceed the heartbeat interval');
    // Workers sign no challenge naming anything else (checkLinkChallenge in @svc/chain).
    if (!/^[\x20-\x7e]{1,64}$/.test(options.orchestrator))
      throw new RangeError(
        'the orchestrator name (LINK_ORCHESTRATOR_NAME) must be 1 to 64 printable ASCII characters',
      );
    if (options.challengeTtlMs > LINK_CHALLENGE_MAX_TTL_MS)
      throw new RangeError(
        `the link challenge TTL (LINK_CHALLENGE_TTL) must be at most ${LINK_CHALLENGE_MAX_TTL_MS / 1000}s: workers refuse to sign a longer one`,
      );
    this.#options = options;
    this.replicaId = options.replicaId ?? randomUUID();
    this.#presence = new WorkerPresence(options.store.presence);
    this.#context = this.#linkContext(new AnswerFrameIntake(options.attempts, options.store.frames));
  }

  /** The gRPC implementation of the WorkerLink service. */
  readonly handlers = {
    connect: (
      requests: AsyncIterable<ConnectRequest>,
      context: CallContext,
    ): AsyncIterable<ConnectResponse> => this.#connect(requests, context),
  };

  live(): Promise<LiveWorker[]> {
    return this.#presence.live();
  }

  /** Takes the hints other replicas route to the workers linked here. */
  async start(): Promise<void> {
    this.#unsubscribe ??= await this.#options.store.channels.subscribe(
      linkHintsChannel(this.replicaId),
      (payload) => this.#deliverRouted(payload),
    );
  }

  /** Whether the worker's link is live on this replica. */
  isLinkedHere(worker: string): boolean {
    return this.#byWorker.get(worker.toLowerCase())?.isLive ?? false;
  }

  sendHint(worker: string, hint: LinkHint): boolean {
    const link = this.#byWorker.get(worker.toLowerCase());
    if (link?.isLive) return link.send({ frame: hint });
    void this.#route(worker, hint).catch((error: unknown) =>
      this.#options.logger.warn({ err: error, worker }, 'hint not routed to the replica holding the link'),
    );
    return false;
  }

  /**
   * Sends a hint to the replica whose link the worker's presence names. A hint is only ever a shortcut
   * (the worker follows the chain), so one lost on the way costs time, never correctness.
   */
  async #route(worker: string, hint: LinkHint): Promise<void> {
    const linked = (await this.#presence.live()).find(
      (candidate) => candidate.address.toLowerCase() === worker.toLowerCase(),
    );
    if (!linked || linked.replicaId === this.replicaId) return;
    const response = toBinary(ConnectResponseSchema, create(ConnectResponseSchema, { frame: hint }));
    const routed: RoutedHint = { worker, response: Buffer.from(response).toString('base64') };
    await this.#options.store.channels.publish(
      linkHintsChannel(linked.replicaId),
      Buffer.from(JSON.stringify(routed)),
    );
  }

  /** A hint another replica routed here, sent on when the worker's link is live here. */
  #deliverRouted(payload: Uint8Array): void {
    try {
      const routed = JSON.parse(Buffer.from(payload).toString('utf8')) as RoutedHint;
      const link = this.#byWorker.get(routed.worker.toLowerCase());
      if (!link?.isLive) return;
      const { frame } = fromBinary(ConnectResponseSchema, Buffer.from(routed.response, 'base64'));
      link.send({ frame });
    } catch (error) {
      this.#options.logger.warn({ err: error }, 'a routed hint was not readable');
    }
  }

  async acknowledgeFinal(jobId: bigint, attempt: number, committed: boolean): Promise<boolean> {
    // The final came from the attempt's worker: whoever the chain names now, if it is the same attempt.
    const current = await this.#options.attempts.currentAttempt(jobId);
    if (!current || current.attempt !== attempt) return false;
    const link = this.#byWorker.get(current.worker.toLowerCase());
    if (!link?.isLive) return false;
    return link.send({ frame: { case: 'finalAck', value: { jobId: jobId.toString(), attempt, committed } } });
  }

  hintDeclined(hintId: string): boolean {
    return this.#declined.has(hintId);
  }

  #noteHintAck(worker: string, ack: HintAck): void {
    if (ack.outcome === HintOutcome.DECLINED) {
      const now = Date.now();
      this.#declined.set(ack.hintId, now);
      for (const [hintId, at] of this.#declined) {
        if (now - at < DECLINED_HINT_MEMORY_MS) break;
        this.#declined.delete(hintId);
      }
    }
    this.#options.onHintAck?.(worker, ack);
  }

  /** Ends every link with `SHUTTING_DOWN` (workers redial another replica) and withdraws their presence. */
  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#unsubscribe?.().catch((error: unknown) =>
      this.#options.logger.warn({ err: error }, 'routed hints not unsubscribed'),
    );
    for (const link of this.#open) link.refuse(LinkRefusalReason.SHUTTING_DOWN, 'this replica is stopping');
    await Promise.all(this.#serving);
  }

  #connect(requests: AsyncIterable<ConnectRequest>, context: CallContext): AsyncIterable<ConnectResponse> {
    const link = new LinkConnection(this.#context);
    if (this.#stopping) {
      link.refuse(LinkRefusalReason.SHUTTING_DOWN, 'this replica is stopping');
      return link.responses;
    }
    this.#open.add(link);
    context.signal.addEventListener(
      'abort',
      () => link.refuse(LinkRefusalReason.SHUTTING_DOWN, 'call ended'),
      {
        once: true,
      },
    );
    const serving = link.serve(requests);
    this.#serving.add(serving);
    void serving.finally(() => this.#serving.delete(serving));
    return link.responses;
  }

  #linkContext(intake: AnswerFrameIntake): LinkContext {
    const { logger, presenceTtlMs } = this.#options;
    return {
      binding: {
        orchestrator: this.#options.orchestrator,
        chainId: this.#options.chainId,
        jobRegistry: this.#options.jobRegistry,
      },
      heartbeatIntervalMs: this.#options.heartbeatIntervalMs,
      presenceTtlMs,
      challengeTtlMs: this.#options.challengeTtlMs,
      admission: this.#options.admission,
      intake,
      logger,
      welcomed: (link) => {
        const key = link.worker.toLowerCase();
        const previous = this.#byWorker.get(key);
        this.#byWorker.set(key, link);
        previous?.refuse(LinkRefusalReason.REPLACED, 'a newer link of this worker replaced this one');
        logger.info({ worker: link.worker, linkId: link.id }, 'worker linked');
      },
      heartbeat: (link, offer) =>
        this.#presence.announce(
          {
            address: link.worker,
            linkId: link.id,
            replicaId: this.replicaId,
            models: offer.models,
            freeJobSlots: offer.freeJobSlots,
            freeSessionSlots: offer.freeSessionSlots,
            ...(offer.heldSessionsListed ? { heldSessions: offer.heldSessionIds } : {}),
          },
          presenceTtlMs,
        ),
      hintAcknowledged: (link, ack) => this.#noteHintAck(link.worker, ack),
      ended: async (link) => {
        this.#open.delete(link);
        if (!link.worker) return;
        const key = link.worker.toLowerCase();
        if (this.#byWorker.get(key) === link) this.#byWorker.delete(key);
        try {
          await this.#presence.withdraw(link.worker, link.id);
        } catch (error) {
          // The TTL withdraws it anyway.
          logger.warn({ err: error, worker: link.worker }, 'worker presence not withdrawn');
        }
        logger.info({ worker: link.worker, linkId: link.id }, 'worker link ended');
      },
    };
  }
}
