import { AppError, type RevocationMarkers } from '@svc/platform';
import type { Request, RequestHandler, Response } from 'express';
import { bearerToken } from '../http/bearer-token.js';
import type { BadKeyGuard } from './bad-key-guard.js';
import type { KeyResolutionCache, ResolvedApiKey } from './key-resolution-cache.js';

const API_KEY_PREFIX = 'svc_';
// Far longer than any key we issue; nothing longer is worth hashing or sending to the key-service.
const MAX_PRESENTED_KEY_LENGTH = 256;

export interface ApiKeyAuthPorts {
  readonly cache: KeyResolutionCache;
  readonly revocations: RevocationMarkers;
  readonly badKeys: BadKeyGuard;
}

function invalidApiKey(message: string): AppError {
  return new AppError('invalid_api_key', { message });
}

/** Why the credential of a request cannot be a key, or undefined when it may be one. */
function credentialProblem(presented: string | undefined, header: string | undefined): string | undefined {
  if (header === undefined)
    return 'No API key: send it as "Authorization: Bearer svc_...". This server takes no per-call payments.';
  if (presented === undefined) return 'Send the API key as "Authorization: Bearer svc_...".';
  // A sign-in token (a JWT) is for `/api` only; it is refused here without asking the key-service.
  if (!presented.startsWith(API_KEY_PREFIX))
    return 'That is not an API key: keys start with svc_ (sign-in tokens are for /api only).';
  if (presented.length > MAX_PRESENTED_KEY_LENGTH) return 'Unknown or revoked API key.';
  return undefined;
}

function clientAddress(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? 'unknown';
}

/**
 * Authenticates a `/v1` call by its API key. A warm key costs no gRPC call, but every call reads the key's
 * revocation marker in the shared store, so a revocation is in force from the next call on whatever the
 * cache holds. A refused key counts against the caller's address (see BadKeyGuard).
 */
export function authenticateApiKey({ cache, revocations, badKeys }: ApiKeyAuthPorts): RequestHandler {
  async function refuse(address: string, message: string): Promise<never> {
    throw await badKeys.countBadKey(address, invalidApiKey(message));
  }

  return async (req, res, next) => {
    const address = clientAddress(req);
    const header = req.get('authorization');
    const presented = bearerToken(header);
    const blockCheck = badKeys.assertNotBlocked(address);
    const problem = credentialProblem(presented, header);
    if (problem !== undefined || presented === undefined) {
      await blockCheck;
      return refuse(address, problem ?? 'Send the API key as "Authorization: Bearer svc_...".');
    }

    let key: ResolvedApiKey | undefined;
    const cached = cache.cached(presented);
    if (cached !== undefined) {
      // Warm: the block and the marker are read together, one store round trip in time.
      const [, revoked] = await Promise.all([blockCheck, revocations.isMarked(cached.keyId)]);
      if (revoked) cache.evict(cached.keyId);
      else key = cached;
    } else {
      await blockCheck;
      const resolved = await cache.resolve(presented);
      if (resolved !== undefined && !(await revocations.isMarked(resolved.keyId))) key = resolved;
    }
    if (key === undefined) return refuse(address, 'Unknown or revoked API key.');
    res.locals.apiKey = key;
    next();
  };
}

/** The key of a call that passed `authenticateApiKey`. */
export function authenticatedKey(res: Response): ResolvedApiKey {
  const key = res.locals.apiKey as ResolvedApiKey | undefined;
  if (key === undefined) throw new Error('route mounted without authenticateApiKey');
  return key;
}
