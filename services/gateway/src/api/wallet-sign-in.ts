import { AppError } from '@svc/platform';
import type { RequestHandler, Response } from 'express';
import { bearerToken } from '../http/bearer-token.js';
import type { KeyServiceClient } from '../key-service-client.js';

// Sign-in tokens are compact JWTs of a few hundred bytes; anything far longer is not worth a call.
const MAX_TOKEN_LENGTH = 4096;
const API_KEY_PREFIX = 'svc_';
const COMPACT_JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * Lets a request through only with a valid sign-in token (`Authorization: Bearer <token>`), and records
 * the wallet it proves. An API key is refused before it leaves the gateway: keys never manage keys.
 */
export function requireWalletSignIn(keyService: KeyServiceClient): RequestHandler {
  return async (req, res, next) => {
    const token = bearerToken(req.get('authorization'));
    if (token === undefined)
      throw new AppError('unauthorized', {
        message: 'Send the sign-in token as "Authorization: Bearer <token>".',
      });
    if (token.startsWith(API_KEY_PREFIX))
      throw new AppError('unauthorized', {
        message: 'An API key cannot manage keys; sign in with the wallet and send its sign-in token.',
      });
    // Only a compact JWT (three base64url parts) is worth a call to the key-service.
    if (token.length > MAX_TOKEN_LENGTH || !COMPACT_JWT.test(token)) throw new AppError('unauthorized');
    const identity = await keyService.authenticateToken({ token });
    if (identity.wallet === undefined) throw new AppError('unauthorized');
    res.locals.wallet = identity.wallet.hex;
    next();
  };
}

/** The signed-in wallet of a request that passed `requireWalletSignIn`. */
export function signedInWallet(res: Response): string {
  const wallet: unknown = res.locals.wallet;
  if (typeof wallet !== 'string') throw new Error('route mounted without requireWalletSignIn');
  return wallet;
}
