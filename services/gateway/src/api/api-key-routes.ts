import { create } from '@bufbuild/protobuf';
import { EmptySchema } from '@bufbuild/protobuf/wkt';
import type { MintedApiKeyJson } from '@svc/api';
import { Router } from 'express';
import type { KeyServiceClient } from '../key-service-client.js';
import { apiKeyJson } from './api-key-json.js';
import {
  jsonObjectBody,
  optionalSpendCap,
  optionalString,
  requiredSpendCap,
  type SpendCapInput,
} from './request-body.js';
import { signInToken } from './wallet-sign-in.js';

function capWei(cap: SpendCapInput): { decimal: string } | undefined {
  return cap.kind === 'cap' ? { decimal: cap.decimal } : undefined;
}

/**
 * The `/api-keys` routes of one signed-in wallet. Ownership is the key-service's check: every call carries
 * the caller's sign-in token, the key-service acts only for the wallet it proves, and another wallet's key
 * answers `api_key_not_found` exactly like an unknown one.
 */
export function apiKeyRoutes(keyService: KeyServiceClient): Router {
  const router = Router();

  router.post('/', async (req, res) => {
    const body = jsonObjectBody(req);
    const name = optionalString(body, 'name');
    const spendCap = optionalSpendCap(body);
    const minted = await keyService.mintKey({
      signInToken: signInToken(res),
      name,
      spendCapWei: capWei(spendCap),
    });
    if (minted.apiKey === undefined) throw new Error('key-service minted a key without a listing');
    const mintedKey: MintedApiKeyJson = { ...apiKeyJson(minted.apiKey), key: minted.fullKey };
    res.status(201).json(mintedKey);
  });

  router.get('/', async (_req, res) => {
    const listed = await keyService.listKeys({ signInToken: signInToken(res) });
    res.json(listed.apiKeys.map(apiKeyJson));
  });

  router.patch('/:id', async (req, res) => {
    const cap = requiredSpendCap(jsonObjectBody(req));
    const updated = await keyService.updateSpendCap({
      signInToken: signInToken(res),
      keyId: req.params.id,
      spendCap:
        cap.kind === 'cap'
          ? { case: 'capWei', value: { decimal: cap.decimal } }
          : { case: 'noCap', value: create(EmptySchema) },
    });
    if (updated.apiKey === undefined) throw new Error('key-service updated a key without a listing');
    res.json(apiKeyJson(updated.apiKey));
  });

  router.post('/:id/revoke', async (req, res) => {
    await keyService.revokeKey({ signInToken: signInToken(res), keyId: req.params.id });
    res.status(204).end();
  });

  router.delete('/:id', async (req, res) => {
    await keyService.deleteKey({ signInToken: signInToken(res), keyId: req.params.id });
    res.status(204).end();
  });

  return router;
}
