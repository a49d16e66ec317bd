import { AppError, type RevocationMarkers } from '@svc/platform';
import type { Request, RequestHandler, Response } from 'express';
import { bearerToken } from '../http/bearer-token.js';
import { clientNetwork } from '../http/client-address.js';
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

/** Why a presented credential cannot be a key, or undefined when it may be one. */
function credentialProblem(presented: string | undefined): string | undefined {
  if (presented === undefined) return 'Send the API key as "Authorization: Bearer svc_...".';
  // A sign-in token (a JWT) is for `/api` only; it is refused here without asking the key-service.
  if (!presented.startsWith(API_KEY_PREFIX))
    return 'That is not an API key: keys start with svc_ (sign-in tokens are for /api only).';
  if (presented.length > MAX_PRESENTED_KEY_LENGTH) return 'Unknown or revoked API key.';
  return undefined;
}

/**
 * Authenticates a `/v1` call by its API key. A warm key costs no gRPC call, but every call reads the key's
 * revocation marker in the shared store, so a revocation is in force from the next call on whatever the
 * cache holds. The key is resolved first: only a presented credential that fails counts against the
 * client's network (see BadKeyGuard); a call with no credential is refused without counting.
 */
export function authenticateApiKey({ cache, revocations, badKeys }: ApiKeyAuthPorts): RequestHandler {
  async function refuse(req: Request, message: string): Promise<never> {
    throw await badKeys.refusal(clientNetwork(req), invalidApiKey(message));
  }

  return async (req, res, next) => {
    const header = req.get('authorization');
    if (header === undefined)
      throw invalidApiKey(
        'No API key: send it as "Authorization: Bearer svc_...". This server takes no per-call payments.',
      );
    const presented = bearerToken(header);
    const problem = credentialProblem(presented);
    if (problem !== undefined || presented === undefined) return refuse(req, problem ?? 'No API key.');

    let key: ResolvedApiKey | undefined = cache.cached(presented);
    if (key === undefined) key = await cache.resolve(presented);
    if (key !== undefined && (await revocations.isMarked(key.keyId))) {
      cache.evict(key.keyId);
      key = undefined;
    }
    if (key === undefined) return refuse(req, 'Unknown or revoked API key.');
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
