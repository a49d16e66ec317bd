import * as grpc from '@grpc/grpc-js';

/**
 * TLS for a gRPC listener: the certificate chain and its private key (PEM). No client certificates are
 * asked for: who may call is decided by each service's own check (the worker link's signed challenge).
 */
export function tlsServerCredentials(certChain: Buffer, privateKey: Buffer): grpc.ServerCredentials {
  return grpc.ServerCredentials.createSsl(null, [{ cert_chain: certChain, private_key: privateKey }], false);
}

/**
 * TLS for a client: the server's certificate is verified against `rootCerts` (PEM) when given, else
 * against the system's CAs, and must name the host dialled.
 */
export function tlsChannelCredentials(rootCerts?: Buffer): grpc.ChannelCredentials {
  return grpc.credentials.createSsl(rootCerts ?? null);
}

export type { ChannelCredentials, ServerCredentials } from '@grpc/grpc-js';
