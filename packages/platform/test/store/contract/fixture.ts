import { randomUUID } from 'node:crypto';
import type { Store } from '../../../src/store/index.js';

export interface StoreContractFixture {
  /** Two stores over one shared state, as two replicas of a service see it (may be the same object). */
  readonly replicas: readonly [Store, Store];
  /** A store of its own that a test may close; it need not share state with the replicas. */
  openScratch(): Promise<Store>;
  dispose(): Promise<void>;
}

export type StoreContractSetup = () => Promise<StoreContractFixture>;

/** Each contract test reads the fixture through this, once `beforeAll` has built it. */
export type UseFixture = () => StoreContractFixture;

export function uniqueKey(label: string): string {
  return `${label}-${randomUUID()}`;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Runs `count` calls at once, alternating between the two replicas. */
export function concurrently<T>(
  replicas: readonly [Store, Store],
  count: number,
  call: (store: Store, index: number) => Promise<T>,
): Promise<T[]> {
  return Promise.all(Array.from({ length: count }, (_, index) => call(replicas[index % 2] as Store, index)));
}
