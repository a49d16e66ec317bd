import type { EventBus, Logger, SubscriptionHealth } from '@svc/platform';
import type { GrpcServer } from '@svc/proto';

/**
 * Whether this process should take traffic, as far as the runner's shared dependencies tell: the one
 * place readiness is decided. The gateway's `/readyz` asks it; the runner follows it into grpc.health.v1.
 */
export interface ProcessReadiness {
  /** Why the process must not take traffic now, or undefined when nothing stands in the way. */
  notReadyBecause(): string | undefined;
}

/**
 * Not ready while a subscription of the bus is `dead`: its consumer crashed in this process and has not
 * recovered, which this replica may be alone in (its credentials, its code) and which must stop a
 * rollout. A `reconnecting` one leaves the process ready: a broker outage is shared by every replica,
 * taking them all out of rotation cannot end it, and no request path needs the bus (the bus logs it,
 * and its `health()` shows it).
 */
export function eventBusReadiness(bus: EventBus | undefined): ProcessReadiness {
  return {
    notReadyBecause() {
      const dead = bus?.health().filter((subscription) => subscription.state === 'dead') ?? [];
      return dead.length === 0 ? undefined : dead.map(describeDead).join('; ');
    },
  };
}

function describeDead(subscription: SubscriptionHealth): string {
  const since = subscription.downSince ? ` since ${subscription.downSince.toISOString()}` : '';
  return `event consumer ${subscription.group} of ${subscription.topic} is dead${since}: ${subscription.reason ?? 'no reason given'}`;
}

/**
 * Keeps the gRPC server's overall health (service `''`, what Kubernetes gRPC probes and load balancers
 * ask) NOT_SERVING while the process is not ready, and SERVING again once it is. Checks every
 * `intervalMs`; a change is logged once.
 */
export class GrpcReadinessMonitor {
  #timer: NodeJS.Timeout | undefined;
  /** As last applied; the runner announced SERVING before this starts. */
  #ready = true;

  constructor(
    private readonly grpc: GrpcServer,
    private readonly readiness: ProcessReadiness,
    private readonly logger: Pick<Logger, 'info' | 'error'>,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.check();
    this.#timer = setInterval(() => this.check(), this.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Applies the readiness now. */
  check(): void {
    const reason = this.readiness.notReadyBecause();
    const ready = reason === undefined;
    if (ready === this.#ready) return;
    this.#ready = ready;
    if (!ready) {
      this.grpc.health.setStatus('', 'NOT_SERVING');
      this.logger.error({ reason }, 'not ready: gRPC health NOT_SERVING');
    } else {
      // Only while listening: a server shutting down stays NOT_SERVING.
      this.grpc.announceServing();
      this.logger.info('ready again: gRPC health SERVING');
    }
  }
}
