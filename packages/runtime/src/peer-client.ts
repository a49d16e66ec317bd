import { serviceClientOptions, ServiceIdentity, type ServiceName } from '@svc/platform';
import { createClient, type ServiceClient } from '@svc/proto';

/** A generated gRPC service (`KeyService`, `PaymentSettler`, …), as `createClient` takes it. */
type GrpcService = Parameters<typeof createClient>[0];

export interface PeerClientOptions<A extends string | undefined = string | undefined> {
  /** The calling service's settings: the private key its service tokens are signed with. */
  readonly config: { readonly SERVICE_TOKEN_PRIVATE_KEY: string };
  /** The calling service, which its tokens name as their issuer. */
  readonly from: ServiceName;
  /** The service called, which its tokens name as their audience. */
  readonly to: ServiceName;
  /** `host:port` of the peer: the setting the module's `peers` names. Unset: no client. */
  readonly address: A;
  /** Deadline of a unary call that sets none; default 10 s (`serviceClientOptions`). */
  readonly timeoutMs?: number;
}

/**
 * The gRPC client one service uses to call another, the one way every module makes it: each call
 * carries the caller's service token for the peer and the current request id, and calls are balanced
 * over the peer's replicas (`serviceClientOptions`). Nothing connects until the first call, so a module
 * makes its clients in `build`; its `stop` closes them (`closeClient`). No address, no client: an
 * optional peer left unset.
 */
export function peerClient<S extends GrpcService>(
  service: S,
  options: PeerClientOptions<string>,
): ServiceClient<S['method']>;
export function peerClient<S extends GrpcService>(
  service: S,
  options: PeerClientOptions,
): ServiceClient<S['method']> | undefined;
export function peerClient<S extends GrpcService>(
  service: S,
  { config, from, to, address, timeoutMs }: PeerClientOptions,
): ServiceClient<S['method']> | undefined {
  if (!address) return undefined;
  const client = createClient(
    service,
    address,
    serviceClientOptions({
      identity: new ServiceIdentity(from, config.SERVICE_TOKEN_PRIVATE_KEY),
      audience: to,
      ...(timeoutMs === undefined ? {} : { defaultUnaryTimeoutMs: timeoutMs }),
    }),
  );
  return client as unknown as ServiceClient<S['method']>;
}
