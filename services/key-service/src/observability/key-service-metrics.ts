import { KeyEventKind } from '@svc/proto/gen/svc/events/v1/key_event_pb';
import { gaugesOfOneRead } from '@svc/runtime';
import { Counter, Registry } from 'prom-client';

/** The key-event outbox's unpublished rows, as the relay reads them. */
export interface OutboxBacklog {
  readonly pending: number;
  /** Age of the oldest unpublished row; 0 when none is pending. */
  readonly oldestAgeSeconds: number;
}

const KEY_CHANGES: Partial<Record<KeyEventKind, string>> = {
  [KeyEventKind.MINTED]: 'minted',
  [KeyEventKind.CAP_CHANGED]: 'cap_changed',
  [KeyEventKind.REVOKED]: 'revoked',
  [KeyEventKind.DELETED]: 'deleted',
};

/**
 * The key-service's Prometheus metrics, on the registry given (the process's, which the runner serves;
 * no global state) or one of their own. Names start with `svc_key_service_`: in the all-in-one process
 * every service shares one registry.
 */
export class KeyServiceMetrics {
  readonly #signIns: Counter<'outcome' | 'reason'>;
  readonly #keyChanges: Counter<'change'>;
  readonly #reservations: Counter<'outcome'>;
  readonly #settlements: Counter<'action' | 'settler' | 'state'>;

  constructor(
    readonly registry: Registry = new Registry(),
    /** Read at each scrape, so a relay that stopped shows as a growing age, not a frozen one. */
    outboxBacklog?: () => Promise<OutboxBacklog>,
  ) {
    const registers = [registry];
    this.#signIns = new Counter({
      name: 'svc_key_service_sign_ins_total',
      help: 'Sign-ins (VerifySignIn) by outcome: verified, or refused with its reason.',
      labelNames: ['outcome', 'reason'],
      registers,
    });
    this.#keyChanges = new Counter({
      name: 'svc_key_service_api_key_changes_total',
      help: 'API key changes committed, by change (minted, cap_changed, revoked, deleted).',
      labelNames: ['change'],
      registers,
    });
    this.#reservations = new Counter({
      name: 'svc_key_service_spend_reservations_total',
      help: "Spend reservations asked for, by outcome: reserved, or over_cap (the fee does not fit the key's spend cap).",
      labelNames: ['outcome'],
      registers,
    });
    this.#settlements = new Counter({
      name: 'svc_key_service_spend_settlements_total',
      help: 'Spend reservation settlements, by action (commit, release), who settled (gateway, event, sweeper) and the state it left the reservation in.',
      labelNames: ['action', 'settler', 'state'],
      registers,
    });
    if (!outboxBacklog) return;
    gaugesOfOneRead(registry, outboxBacklog, [
      {
        name: 'svc_key_service_outbox_pending_events',
        help: 'Key events committed to the outbox and not yet published to the bus.',
        value: (backlog) => backlog.pending,
      },
      {
        name: 'svc_key_service_outbox_oldest_pending_age_seconds',
        help: 'Age of the oldest key event not yet published (0 when none is pending): grows while the relay cannot publish.',
        value: (backlog) => backlog.oldestAgeSeconds,
      },
    ]);
  }

  signInVerified(): void {
    this.#signIns.inc({ outcome: 'verified' });
  }

  /** A refused sign-in, by its reason (`SignInRefusalReason`). */
  signInRefused(reason: string): void {
    this.#signIns.inc({ outcome: 'refused', reason });
  }

  keyChanged(kind: KeyEventKind): void {
    const change = KEY_CHANGES[kind];
    if (change) this.#keyChanges.inc({ change });
  }

  spendReserved(outcome: 'reserved' | 'over_cap'): void {
    this.#reservations.inc({ outcome });
  }

  /** Reservations settled, by who settled them (`Settler`) and the state they ended in (`ReservationState`). */
  spendSettled(action: 'commit' | 'release' | 'refund', settler: string, state: string, count = 1): void {
    this.#settlements.inc({ action, settler, state }, count);
  }
}
