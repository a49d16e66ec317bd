import { readFile } from 'node:fs/promises';
import { tlsServerCredentials, type ServerCredentials } from '@svc/proto';

/**
 * The worker link listener's TLS, from WORKER_LINK_TLS_CERT_FILE and WORKER_LINK_TLS_KEY_FILE (both or
 * neither); undefined serves plaintext.
 */
export async function linkTlsCredentials(settings: {
  readonly WORKER_LINK_TLS_CERT_FILE: string | undefined;
  readonly WORKER_LINK_TLS_KEY_FILE: string | undefined;
}): Promise<ServerCredentials | undefined> {
  const { WORKER_LINK_TLS_CERT_FILE: certFile, WORKER_LINK_TLS_KEY_FILE: keyFile } = settings;
  if (!certFile && !keyFile) return undefined;
  if (!certFile || !keyFile)
    throw new RangeError(
      'WORKER_LINK_TLS_CERT_FILE and WORKER_LINK_TLS_KEY_FILE go together: set both or neither',
    );
  const [cert, key] = await Promise.all([readFile(certFile), readFile(keyFile)]);
  return tlsServerCredentials(cert, key);
}
