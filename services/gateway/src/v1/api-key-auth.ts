import { AppError, type RevocationMarkers } from '@svc/platform';
import type { Request, RequestHandler, Response } from 'express';
import { bearerToken } from '../http/bearer-token.js';
import { clientNetwork } from '../http/client-address.js';
import type { BadCredentialGuard } from '../limits/bad-credential-guard.js';
import { keyRateRefusal, keyRateWindow, type KeyRateLimit } from '../limits/key-rate-limit.js';
import type { KeyResolutionCache, ResolvedApiKey } from './key-resolution-cache.js';

const API_KEY_PREFIX = 'svc_';
// Far longer than any key we issue; nothing longer is worth hashing or sending to the key-service.
const MAX_PRESENTED_KEY_LENGTH = 256;

export interface ApiKeyAuthPorts {
  readonly cache: KeyResolutionCache;
  readonly revocations: RevocationMarkers;
  /** The per-address limit on bad keys (see BadCredentialGuard). */
  readonly badKeys: BadCredentialGuard;
  readonly keyRate: KeyRateLimit;
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

const UNKNOWN_OR_REVOKED = 'Unknown or revoked API key.';

/**
 * Authenticates a `/v1` call by its API key and counts it in the key's rate window. A warm key costs no
 * gRPC call, but every call reads the key's revocation marker in the shared store, so a revocation is in
 * force from the next call on whatever the cache holds. The key is resolved first: only a presented
 * credential that fails counts against the client's network (see BadCredentialGuard); a call with no
 * credential is refused without counting.
 *
 * For a resolved key, the marker and the window the call counts in are one store operation (one round
 * trip): the key's own rate window when it is not revoked, the network's bad-key window when it is. A
 * revoked key's calls never count against its rate, as before.
 */
export function authenticateApiKey({
  cache,
  revocations,
  badKeys,
  keyRate,
}: ApiKeyAuthPorts): RequestHandler {
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

    const key: ResolvedApiKey | undefined = cache.cached(presented) ?? (await cache.resolve(presented));
    if (key === undefined) return refuse(req, UNKNOWN_OR_REVOKED);

    const { marked, verdict } = await revocations.hitByMarker(key.keyId, {
      ifClear: keyRateWindow(keyRate, key.keyId),
      ifMarked: badKeys.window(clientNetwork(req)),
    });
    if (marked) {
      cache.evict(key.keyId);
      throw badKeys.answer(verdict, invalidApiKey(UNKNOWN_OR_REVOKED));
    }
    const refusal = await keyRateRefusal(res, verdict, keyRate, key.keyId);
    if (refusal !== undefined) throw refusal;
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

/**
 * `authenticate` for a call that sends `Authorization`; one that sends none goes on without a key, to be
 * paid per call (on a server taking per-call payments).
 */
export function authenticateWhenPresented(authenticate: RequestHandler): RequestHandler {
  return (req, res, next) => {
    if (req.get('authorization') === undefined) {
      next();
      return;
    }
    return authenticate(req, res, next);
  };
}

/** The key of a call that passed `authenticateWhenPresented`; undefined for a call that sent none. */
export function presentedApiKey(res: Response): ResolvedApiKey | undefined {
  return res.locals.apiKey as ResolvedApiKey | undefined;
}
