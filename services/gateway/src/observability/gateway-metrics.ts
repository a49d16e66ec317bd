import { Counter, Registry } from 'prom-client';

export type SettlementAction = 'commit' | 'release';
/** The reservation state the key-service reported, or `error` when the settlement call failed. */
export type SettlementOutcome = 'committed' | 'released' | 'refunded' | 'held' | 'error';

/**
 * The gateway's Prometheus metrics, on the registry given (the process's, which the runner serves; no
 * global state) or one of their own.
 */
export class GatewayMetrics {
  readonly #settlements: Counter<'action' | 'outcome'>;

  constructor(readonly registry: Registry = new Registry()) {
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
