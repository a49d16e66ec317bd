import { timestampDate } from '@bufbuild/protobuf/wkt';
import { AppError } from '@svc/platform';
import { Router } from 'express';
import type { KeyServiceClient } from '../key-service-client.js';
import { jsonObjectBody, requiredString } from './request-body.js';

/** `GET /auth/challenge` and `POST /auth/verify`: Sign-In with Ethereum, done by the key-service. */
export function signInRoutes(keyService: KeyServiceClient): Router {
  const router = Router();

  router.get('/challenge', async (req, res) => {
    const address = req.query.address;
    if (address === undefined || address === '')
      throw new AppError('invalid_request', { message: 'address is required (the wallet address).' });
    if (typeof address !== 'string')
      throw new AppError('invalid_request', { message: 'address must be given once.' });
    const challenge = await keyService.createChallenge({ address: { hex: address } });
    res.json({ nonce: challenge.nonce, message: challenge.message });
  });

  router.post('/verify', async (req, res) => {
    const body = jsonObjectBody(req);
    const message = requiredString(body, 'message');
    const signature = requiredString(body, 'signature');
    const result = await keyService.verifySignIn({ message, signature });
    res.json({
      token: result.token,
      expiresAt: result.expiresAt ? timestampDate(result.expiresAt).toISOString() : null,
      address: result.address?.hex ?? null,
    });
  });

  return router;
}
