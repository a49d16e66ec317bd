import { METADATA, type ClientOptions } from '@svc/proto';
import { ServiceIdentity } from '../service-tokens.js';
import type { ServiceName } from '../service-token-keys.js';

/**
 * The service token key pair of the test suites' services (never a deployment's). Every service a test
 * starts signs with it and accepts it for both callers, so one set of settings starts any service; the
 * per-service key pairs are tested where they matter (service-tokens.unit.test.ts, the end-to-end suite).
 */
export const TEST_SERVICE_TOKEN_KEYS = {
  privateKey: 'MC4CAQAwBQYDK2VwBCIEIICkvhnZ4qXl1tcWKwnZW/9oXumIHpQBauhwAgfvzOrR',
  publicKey: 'MCowBQYDK2VwAyEAQcLJ57EtGhjLAzCNxSIg+EmV6RPMqw8rzlPG0NvZmDw=',
} as const;

/** The settings that give a service run by a test the test suites' service token keys. */
export const TEST_SERVICE_TOKEN_SETTINGS = {
  SERVICE_TOKEN_PRIVATE_KEY: TEST_SERVICE_TOKEN_KEYS.privateKey,
  SERVICE_TOKEN_CALLER_KEYS: `gateway=${TEST_SERVICE_TOKEN_KEYS.publicKey},job-orchestrator=${TEST_SERVICE_TOKEN_KEYS.publicKey}`,
} as const;

/**
 * `options` for a test's client of `audience`, with the service token another service (`as`, the
 * gateway unless said) would send, signed with the test suites' key.
 */
export function testServiceClientOptions(
  audience: ServiceName,
  options: ClientOptions & { readonly as?: ServiceName } = {},
): ClientOptions {
  const { as = 'gateway', ...rest } = options;
  const identity = new ServiceIdentity(as, TEST_SERVICE_TOKEN_KEYS.privateKey);
  return {
    ...rest,
    defaultMetadata: () => ({
      ...rest.defaultMetadata?.(),
      [METADATA.authorization]: identity.authorization(audience),
    }),
  };
}
