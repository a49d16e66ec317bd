import { create } from '@bufbuild/protobuf';
import type { ChainClient } from '@svc/chain';
import { AppError } from '@svc/platform';
import { PaymentOptionSchema, type PaymentOption } from '@svc/proto/gen/svc/common/v1/payment_option_pb';

const DEPOSIT_AND_AUTHORIZE = 'depositAndAuthorize(address)';

export type DelegateRefusalCode = 'delegate_not_authorized' | 'insufficient_balance' | 'allowance_exhausted';

/** Where a wallet stands towards the service's signer, as read from JobRegistry. */
export interface DelegatePosition {
  readonly balance: bigint;
  readonly authorized: boolean;
  readonly allowance: bigint;
}

/**
 * The delegate path's payment check (docs/protocol.md, The delegate-path 402), before anything is spent:
 * the wallet authorized the service's signer, and its prepaid balance and the signer's allowance each
 * cover the fee. Answers the first refusal, or undefined when the job is payable.
 */
export function delegateRefusalOf(position: DelegatePosition, fee: bigint): DelegateRefusalCode | undefined {
  if (!position.authorized) return 'delegate_not_authorized';
  if (position.balance < fee) return 'insufficient_balance';
  if (position.allowance < fee) return 'allowance_exhausted';
  return undefined;
}

/**
 * The least `depositAndAuthorize` value after which the job is payable: it adds the value to the balance
 * and raises the allowance (0 while not authorized) by as much, so it must lift the lower of the two to
 * the fee. Never 0: the contract refuses a zero deposit.
 */
export function minimumDepositFor(position: DelegatePosition, fee: bigint): bigint {
  const allowance = position.authorized ? position.allowance : 0n;
  const short = [fee - position.balance, fee - allowance].reduce((a, b) => (a > b ? a : b));
  return short > 0n ? short : 1n;
}

export interface DelegatePaymentContext {
  readonly chainId: bigint;
  readonly jobRegistry: string;
  /** The service's principal: the delegate wallets authorize. */
  readonly delegate: string;
  readonly chain: Pick<ChainClient, 'jobRegistry'>;
}

/** The `delegate` entry of `error.accepts`: what the wallet sends so the refused call becomes payable. */
export function delegatePaymentOption(
  context: DelegatePaymentContext,
  payer: string,
  minimumValue: bigint,
): PaymentOption {
  const data = context.chain.jobRegistry.interface.encodeFunctionData('depositAndAuthorize', [
    context.delegate,
  ]);
  const value = { decimal: minimumValue.toString() };
  return create(PaymentOptionSchema, {
    scheme: {
      case: 'delegate',
      value: {
        chainId: context.chainId,
        payer: { hex: payer },
        delegate: { hex: context.delegate },
        instruction: {
          contract: { hex: context.jobRegistry },
          function: DEPOSIT_AND_AUTHORIZE,
          args: [context.delegate],
          minimumValueWei: value,
        },
        transaction: { to: { hex: context.jobRegistry }, data, value, chainId: context.chainId },
      },
    },
  });
}

/** A 402 of the delegate path with its remedy in `accepts`. */
export function delegatePaymentRefusal(
  code: DelegateRefusalCode,
  context: DelegatePaymentContext,
  payer: string,
  position: DelegatePosition,
  fee: bigint,
): AppError {
  return new AppError(code, {
    fields: { accepts: [delegatePaymentOption(context, payer, minimumDepositFor(position, fee))] },
  });
}
