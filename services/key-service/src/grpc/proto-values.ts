import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { AppError } from '@svc/platform';
import type { Address, Wei } from '@svc/proto/gen/svc/common/v1/chain_pb';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { LimitKind, type ApiKeySchema } from '@svc/proto/gen/svc/key/v1/api_key_pb';
import { SpendReservationState } from '@svc/proto/gen/svc/key/v1/spend_reservation_pb';
import type { ApiKeyView } from '../keys/api-key-view.js';
import type { LimitKind as DomainLimitKind } from '../keys/limit-hits.js';
import { parseWei } from '../money/wei.js';
import type { ReservationState } from '../spend/spend-ledger.js';
import type { WalletAddress } from '../wallet/wallet-address.js';

// Conversions between protobuf messages and the domain, with the request checks that belong at the edge.

type Init<T> = Omit<T, '$typeName' | '$unknown'>;

export function weiOut(value: bigint): Init<Wei> {
  return { decimal: value.toString() };
}

export function optionalWeiOut(value: bigint | null): Init<Wei> | undefined {
  return value === null ? undefined : weiOut(value);
}

export function weiIn(value: Wei | undefined, field: string): bigint | undefined {
  return value === undefined ? undefined : parseWei(value.decimal, field);
}

export function requiredWeiIn(value: Wei | undefined, field: string): bigint {
  const wei = weiIn(value, field);
  if (wei === undefined) throw new AppError('invalid_request', { message: `${field} is required.` });
  return wei;
}

export function addressOut(wallet: WalletAddress): Init<Address> {
  return { hex: wallet.checksummed };
}

export function apiKeyOut(view: ApiKeyView): MessageInitShape<typeof ApiKeySchema> {
  return {
    id: view.id,
    prefix: view.prefix,
    name: view.name,
    spendCapWei: optionalWeiOut(view.spendCapWei),
    spentWei: weiOut(view.spentWei),
    limitHits: { ...view.limitHits },
    createdAt: timestampFromDate(view.createdAt),
    revokedAt: view.revokedAt === null ? undefined : timestampFromDate(view.revokedAt),
  };
}

const LIMIT_KINDS: Partial<Record<LimitKind, DomainLimitKind>> = {
  [LimitKind.RATE]: 'rate',
  [LimitKind.CONCURRENCY]: 'concurrency',
  [LimitKind.SPEND_CAP]: 'spend_cap',
  [LimitKind.SESSION_OPENS]: 'session_opens',
};

export function limitKindIn(kind: LimitKind): DomainLimitKind {
  const domainKind = LIMIT_KINDS[kind];
  if (!domainKind) throw new AppError('invalid_request', { message: 'kind must name a limit.' });
  return domainKind;
}

const RESERVATION_STATES: Record<ReservationState, SpendReservationState> = {
  held: SpendReservationState.HELD,
  committed: SpendReservationState.COMMITTED,
  released: SpendReservationState.RELEASED,
  refunded: SpendReservationState.REFUNDED,
};

export function reservationStateOut(state: ReservationState): SpendReservationState {
  return RESERVATION_STATES[state];
}
