import { Counter, type Registry } from 'prom-client';
import { kzgThreads, type KzgOperation, type KzgWork } from './kzg-thread.js';

const OPERATIONS: readonly KzgOperation[] = ['commitment', 'proof'];

/**
 * Reports the process's KZG work in `registry`, read at each scrape: `svc_kzg_operations_total` and
 * `svc_kzg_seconds_total` by operation (commitment, proof). The threads are the process's, so every
 * registry it is given reports the same totals; a second call with the same registry does nothing.
 */
export function countKzgWork(registry: Registry): void {
  if (registry.getSingleMetric('svc_kzg_seconds_total')) return;
  const counter = (name: string, help: string, value: (work: KzgWork[KzgOperation]) => number) =>
    new Counter({
      name,
      help,
      labelNames: ['operation'],
      registers: [registry],
      collect() {
        const work = kzgThreads.work();
        this.reset();
        for (const operation of OPERATIONS) this.inc({ operation }, value(work[operation]));
      },
    });
  counter(
    'svc_kzg_operations_total',
    'KZG commitments and proofs the process computed (a blob submitted, a fetched blob checked).',
    (work) => work.operations,
  );
  counter(
    'svc_kzg_seconds_total',
    'Time the KZG threads spent computing, by operation: CPU-bound work, so CPU time while the cores are not oversubscribed.',
    (work) => work.seconds,
  );
}
