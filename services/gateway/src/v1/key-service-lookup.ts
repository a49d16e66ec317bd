import { appErrorFromRpc } from '@svc/platform';
import { isRpcError } from '@svc/proto';
import { ApiKeyState } from '@svc/proto/gen/svc/key/v1/api_key_pb';
import type { KeyServiceClient } from '../key-service-client.js';
import type { KeyLookup } from './key-resolution-cache.js';

/** Resolves presented keys through the key-service's `ResolveKey`; unknown, deleted and revoked keys read as undefined. */
export function keyServiceLookup(keyService: KeyServiceClient): KeyLookup {
  return async (presentedKey) => {
    try {
      const resolved = await keyService.resolveKey({ presentedKey });
      if (resolved.state !== ApiKeyState.ACTIVE || resolved.wallet === undefined) return undefined;
      return {
        keyId: resolved.keyId,
        prefix: resolved.prefix,
        wallet: resolved.wallet.hex,
        spendCapWei: resolved.spendCapWei === undefined ? null : BigInt(resolved.spendCapWei.decimal),
      };
    } catch (error) {
      if (isRpcError(error) && appErrorFromRpc(error).code === 'invalid_api_key') return undefined;
      throw error;
    }
  };
}
