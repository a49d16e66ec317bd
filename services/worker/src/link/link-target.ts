import { readFile } from 'node:fs/promises';
import { tlsChannelCredentials, type ChannelCredentials } from '@svc/proto';

/** Where the worker link dials, and how: TLS with `tls://host:port`, plaintext with a bare `host:port`. */
export interface LinkTarget {
  /** `host:port`; with TLS the orchestrator's certificate must name the host. */
  readonly target: string;
  readonly credentials?: ChannelCredentials;
  readonly tls: boolean;
}

const TLS_SCHEME = 'tls://';

/**
 * ORCHESTRATOR_LINK and ORCHESTRATOR_LINK_CA_FILE as a dial target. A CA file (PEM) is trusted instead of
 * the system's CAs, and names TLS, so it is refused with a plaintext address.
 */
export async function resolveLinkTarget(address: string, caFile: string | undefined): Promise<LinkTarget> {
  const tls = address.toLowerCase().startsWith(TLS_SCHEME);
  const target = tls ? address.slice(TLS_SCHEME.length) : address;
  // Any other gRPC target (dns:, ipv4:, unix:) passes as it did; an http(s) URL is a mistake worth naming.
  if (!target || /\s/.test(target) || /^https?:\/\//i.test(target))
    throw new RangeError(`ORCHESTRATOR_LINK must be host:port or tls://host:port, got "${address}"`);
  if (!tls) {
    if (caFile)
      throw new RangeError(
        'ORCHESTRATOR_LINK_CA_FILE is set but ORCHESTRATOR_LINK is plaintext: write it as tls://host:port',
      );
    return { target, tls: false };
  }
  const ca = caFile ? await readFile(caFile) : undefined;
  return { target, credentials: tlsChannelCredentials(ca), tls: true };
}

/** Whether `host:port` stays on this machine, where a plaintext link is harmless. */
export function isLoopbackTarget(target: string): boolean {
  const host = target.slice(0, target.lastIndexOf(':')).replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}
