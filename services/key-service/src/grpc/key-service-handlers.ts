import { durationMs, timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import { AppError } from '@svc/platform';
import type { ServiceImpl } from '@svc/proto';
import { ApiKeyState } from '@svc/proto/gen/svc/key/v1/api_key_pb';
import type { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import type { ApiKeys } from '../keys/api-keys.js';
import type { KeyResolver } from '../keys/key-resolver.js';
import type { LimitHits } from '../keys/limit-hits.js';
import type { SignIn } from '../signin/sign-in.js';
import type { TokenKeyRing } from '../signin/token-key-ring.js';
import type { SpendLedger } from '../spend/spend-ledger.js';
import type { UsageLog } from '../usage/usage-log.js';
import type { WalletAddress } from '../wallet/wallet-address.js';
import {
  addressOut,
  apiKeyOut,
  limitKindIn,
  optionalWeiOut,
  requiredWeiIn,
  reservationStateOut,
  weiIn,
  weiOut,
} from './proto-values.js';
import { usageQueryIn, usageResponseOut } from './usage-values.js';

export type KeyServiceMethods = typeof KeyService extends GenService<infer S> ? S : never;

export interface KeyServiceDomain {
  readonly signIn: SignIn;
  readonly tokenKeys: TokenKeyRing;
  readonly apiKeys: ApiKeys;
  readonly resolver: KeyResolver;
  readonly ledger: SpendLedger;
  readonly limitHits: LimitHits;
  readonly usage: UsageLog;
}

/**
 * The KeyService gRPC API over the domain. Handlers only translate: messages in, checks of their shape,
 * domain calls, messages out; domain errors travel as AppErrors (their code in `x-error-code`).
 *
 * Key management acts for the wallet its request's sign-in token proves, checked here before anything
 * else of the request: whoever reaches this port (not only the gateway) cannot act for a wallet without
 * a token the wallet signed in for.
 */
export function keyServiceHandlers(domain: KeyServiceDomain): ServiceImpl<KeyServiceMethods> {
  const { signIn, tokenKeys, apiKeys, resolver, ledger, limitHits, usage } = domain;

  /** The wallet a key-management call acts for; `unauthorized` unless the token is valid and current. */
  async function signedInWallet(signInToken: string): Promise<WalletAddress> {
    return (await signIn.authenticate(signInToken)).wallet;
  }

  return {
    async createChallenge(request) {
      const challenge = await signIn.challenge(request.address?.hex ?? '');
      return {
        nonce: challenge.nonce,
        message: challenge.message,
        expiresAt: timestampFromDate(challenge.expiresAt),
      };
    },

    async verifySignIn(request) {
      const result = await signIn.verify(request.message, request.signature);
      return {
        token: result.token,
        expiresAt: timestampFromDate(result.expiresAt),
        address: addressOut(result.address),
      };
    },

    async authenticateToken(request) {
      const { wallet, expiresAt } = await signIn.authenticate(request.token);
      return { wallet: addressOut(wallet), expiresAt: timestampFromDate(expiresAt) };
    },

    async getJwks() {
      return { jwksJson: JSON.stringify(tokenKeys.jwks()) };
    },

    async mintKey(request) {
      const wallet = await signedInWallet(request.signInToken);
      const minted = await apiKeys.mint(wallet, {
        name: request.name,
        spendCapWei: weiIn(request.spendCapWei, 'spendCapWei'),
      });
      return { apiKey: apiKeyOut(minted.apiKey), fullKey: minted.fullKey };
    },

    async listUsage(request) {
      const wallet = await signedInWallet(request.signInToken);
      return usageResponseOut(await usage.list(wallet, usageQueryIn(request)));
    },

    async listKeys(request) {
      const keys = await apiKeys.list(await signedInWallet(request.signInToken));
      return { apiKeys: keys.map(apiKeyOut) };
    },

    async updateSpendCap(request) {
      const wallet = await signedInWallet(request.signInToken);
      const choice = request.spendCap;
      let cap: bigint | null;
      if (choice.case === 'capWei') cap = requiredWeiIn(choice.value, 'spendCapWei');
      else if (choice.case === 'noCap') cap = null;
      else
        throw new AppError('invalid_request', { message: 'spendCapWei must be a decimal string or null.' });
      return { apiKey: apiKeyOut(await apiKeys.updateSpendCap(wallet, request.keyId, cap)) };
    },

    async revokeKey(request) {
      await apiKeys.revoke(await signedInWallet(request.signInToken), request.keyId);
      return {};
    },

    async deleteKey(request) {
      await apiKeys.delete(await signedInWallet(request.signInToken), request.keyId);
      return {};
    },

    async resolveKey(request) {
      const key = await resolver.resolve(request.presentedKey);
      return {
        keyId: key.keyId,
        prefix: key.prefix,
        wallet: addressOut(key.wallet),
        state: key.state === 'active' ? ApiKeyState.ACTIVE : ApiKeyState.REVOKED,
        spendCapWei: optionalWeiOut(key.spendCapWei),
      };
    },

    async reserveSpend(request) {
      const result = await ledger.reserve({
        keyId: request.keyId,
        amountWei: requiredWeiIn(request.amountWei, 'amount_wei'),
        ttlMs: request.ttl ? durationMs(request.ttl) : undefined,
        requestId: request.requestId,
      });
      if (result.outcome === 'reserved') {
        const { reservationId, expiresAt } = result.reservation;
        return {
          outcome: {
            case: 'reserved',
            value: { reservationId, expiresAt: timestampFromDate(expiresAt) },
          },
        };
      }
      const { spendCapWei, spentWei, reservedWei } = result.refusal;
      return {
        outcome: {
          case: 'refused',
          value: {
            spendCapWei: weiOut(spendCapWei),
            spentWei: weiOut(spentWei),
            reservedWei: weiOut(reservedWei),
          },
        },
      };
    },

    async commitSpend(request) {
      const charged = weiIn(request.chargedWei, 'charged_wei');
      const state = await ledger.commit(request.reservationId, charged, 'gateway');
      return { state: reservationStateOut(state) };
    },

    async releaseSpend(request) {
      const state = await ledger.release(request.reservationId, 'gateway');
      return { state: reservationStateOut(state) };
    },

    async recordLimitHit(request) {
      await limitHits.record(request.keyId, limitKindIn(request.kind), request.requestId);
      return {};
    },

    async recordLimitHits(request) {
      const hits = request.hits.map((hit) => ({
        keyId: hit.keyId,
        kind: limitKindIn(hit.kind),
        count: hit.count,
      }));
      await limitHits.recordBatch(request.batchId, hits);
      return {};
    },
  };
}
