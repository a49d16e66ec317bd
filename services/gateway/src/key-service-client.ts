import type { GenService } from '@bufbuild/protobuf/codegenv2';
import type { ServiceClient } from '@svc/proto';
import type { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';

export type KeyServiceMethods = typeof KeyService extends GenService<infer S> ? S : never;

/** The key-service as the gateway calls it (sign-in, token checks, key management). */
export type KeyServiceClient = ServiceClient<KeyServiceMethods>;
