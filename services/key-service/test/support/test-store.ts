import { createTestStore as createNamespacedStore, type TestStore } from '@svc/platform/testing';

export type { TestStore };

/** A Redis namespace of its own for one key-service test file. */
export const createTestStore = (): TestStore => createNamespacedStore('ks-test');
