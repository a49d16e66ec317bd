import { Counter, Registry, collectDefaultMetrics } from 'prom-client';

export type SettlementAction = 'commit' | 'release';
/** The reservation state the key-service reported, or `error` when the settlement call failed. */
export type SettlementOutcome = 'committed' | 'released' | 'held' | 'error';

/** The gateway's Prometheus metrics, on a registry of its own (no global state). */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly #settlements: Counter<'action' | 'outcome'>;

  /** `processMetrics`: also Node's process metrics (CPU, memory, event loop), for the one served. */
  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry });
    this.#settlements = new Counter({
      name: 'gateway_spend_settlements_total',
      help: 'Spend reservation settlements the gateway asked for, by action and the resulting state; a commit whose outcome is not `committed` needs looking into.',
      labelNames: ['action', 'outcome'],
      registers: [this.registry],
    });
  }

  spendSettled(action: SettlementAction, outcome: SettlementOutcome): void {
    this.#settlements.inc({ action, outcome });
  }
}
