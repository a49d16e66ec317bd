import { randomUUID } from 'node:crypto';
import { deleteRedisNamespace, TEST_REDIS_URL } from '@svc/platform/testing';

export const REDIS_URL = TEST_REDIS_URL;

/** A namespace no other suite or earlier run uses. */
export function randomNamespace(suite: string): string {
  return `test:chain:${suite}:${randomUUID()}`;
}

/** Deletes every key under `namespace`. */
export const deleteNamespace = (namespace: string): Promise<void> => deleteRedisNamespace(namespace);
