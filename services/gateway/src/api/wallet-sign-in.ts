import { AppError, appErrorFromRpc } from '@svc/platform';
import { isRpcError } from '@svc/proto';
import type { Request, RequestHandler, Response } from 'express';
import { bearerToken } from '../http/bearer-token.js';
import { clientNetwork } from '../http/client-address.js';
import type { KeyServiceClient } from '../key-service-client.js';
import type { BadCredentialGuard } from '../limits/bad-credential-guard.js';

// Sign-in tokens are compact JWTs of a few hundred bytes; anything far longer is not worth a call.
const MAX_TOKEN_LENGTH = 4096;
const API_KEY_PREFIX = 'svc_';
const COMPACT_JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const SEND_THE_TOKEN = 'Send the sign-in token as "Authorization: Bearer <token>".';

/** A request's proven sign-in, as `requireWalletSignIn` records it. */
interface WalletSignIn {
  /** The wallet the token proves, EIP-55 checksummed. */
  readonly wallet: string;
  /** The token itself, passed on to the key-service, which acts only for the wallet it proves. */
  readonly token: string;
}

/** Why a presented credential cannot be a sign-in token, or undefined when it may be one. */
function credentialProblem(token: string | undefined): AppError | undefined {
  if (token === undefined) return new AppError('unauthorized', { message: SEND_THE_TOKEN });
  if (token.startsWith(API_KEY_PREFIX))
    return new AppError('unauthorized', {
      message: 'An API key cannot manage keys; sign in with the wallet and send its sign-in token.',
    });
  // Only a compact JWT (three base64url parts) is worth a call to the key-service.
  if (token.length > MAX_TOKEN_LENGTH || !COMPACT_JWT.test(token)) return new AppError('unauthorized');
  return undefined;
}

/**
 * Lets a request through only with a valid sign-in token (`Authorization: Bearer <token>`), and records
 * the wallet it proves (for the per-wallet limit) with the token (for the key-service, which verifies it
 * again and acts only for its wallet). An API key is refused before it leaves the gateway: keys never
 * manage keys. A presented token that fails counts against the client's network (`badTokens`); a request
 * with no `Authorization` at all is refused without counting, and a valid token is served whatever its
 * network did.
 */
export function requireWalletSignIn(
  keyService: KeyServiceClient,
  badTokens: BadCredentialGuard,
): RequestHandler {
  async function refuse(req: Request, unauthorized: AppError): Promise<never> {
    throw await badTokens.refusal(clientNetwork(req), unauthorized);
  }

  return async (req, res, next) => {
    const header = req.get('authorization');
    if (header === undefined) throw new AppError('unauthorized', { message: SEND_THE_TOKEN });
    const token = bearerToken(header);
    const problem = credentialProblem(token);
    if (problem !== undefined || token === undefined)
      return refuse(req, problem ?? new AppError('unauthorized'));
    let wallet: string | undefined;
    try {
      wallet = (await keyService.authenticateToken({ token })).wallet?.hex;
    } catch (error) {
      // Only the key-service's word that the token is no good counts; an outage is not the caller's doing.
      if (isRpcError(error) && error.appCode === 'unauthorized') return refuse(req, appErrorFromRpc(error));
      throw error;
    }
    if (wallet === undefined) throw new AppError('unauthorized');
    const signIn: WalletSignIn = { wallet, token };
    res.locals.walletSignIn = signIn;
    next();
  };
}

function walletSignIn(res: Response): WalletSignIn {
  const signIn = res.locals.walletSignIn as WalletSignIn | undefined;
  if (signIn === undefined) throw new Error('route mounted without requireWalletSignIn');
  return signIn;
}

/** The signed-in wallet of a request that passed `requireWalletSignIn`. */
export function signedInWallet(res: Response): string {
  return walletSignIn(res).wallet;
}

/** The sign-in token of a request that passed `requireWalletSignIn`, for the key-service's calls. */
export function signInToken(res: Response): string {
  return walletSignIn(res).token;
}
