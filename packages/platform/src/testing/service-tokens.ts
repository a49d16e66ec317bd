import { METADATA, type ClientOptions } from '@svc/proto';
import { ServiceIdentity, type ServiceName } from '../service-tokens.js';

/** The service token secret of the test suites' services (SERVICE_TOKEN_SECRET); never a deployment's. */
export const TEST_SERVICE_TOKEN_SECRET = 'test-only-service-token-secret-0123456789';

/** The settings that give a service run by a test the test suites' service token secret. */
export const TEST_SERVICE_TOKEN_SETTINGS = { SERVICE_TOKEN_SECRET: TEST_SERVICE_TOKEN_SECRET } as const;

/**
 * `options` for a test's client of `audience`, with the service token another service (`as`, the
 * gateway unless said) would send, signed with the test suites' secret.
 */
export function testServiceClientOptions(
  audience: ServiceName,
  options: ClientOptions & { readonly as?: ServiceName } = {},
): ClientOptions {
  const { as = 'gateway', ...rest } = options;
  const identity = new ServiceIdentity(as, TEST_SERVICE_TOKEN_SECRET);
  return {
    ...rest,
    defaultMetadata: () => ({
      ...rest.defaultMetadata?.(),
      [METADATA.authorization]: identity.authorization(audience),
    }),
  };
}
