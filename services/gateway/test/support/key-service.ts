import type { Store } from '@svc/platform';
import { createTestDatabase } from '@svc/testkit';
import { runKeyServiceOn, type KeyServiceOptions, type RunningKeyService } from './key-service-target.js';

export {
  silentLogger,
  TEST_SIWE,
  type KeyServiceOptions,
  type RunningKeyService,
} from './key-service-target.js';

/** A real key-service, run by the runner as in production, on a fresh PostgreSQL database of its own. */
export async function startKeyService(
  store: Store,
  options: KeyServiceOptions = {},
): Promise<RunningKeyService> {
  return runKeyServiceOn(store, await createTestDatabase({ prefix: 'gw' }), options);
}
