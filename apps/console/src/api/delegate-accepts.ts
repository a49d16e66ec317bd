import { getAddress } from 'ethers';

/**
 * The `delegate` entry of a 402's `error.accepts` (docs/protocol.md, The delegate-path 402): the
 * `depositAndAuthorize` transaction that makes the refused call payable, and the least value it needs.
 */
export interface DelegateAccepts {
  readonly chainId: number;
  /** The wallet the refused key belongs to: only it can make the call payable. */
  readonly payer: string;
  readonly transaction: { readonly to: string; readonly data: string };
  readonly minimumWei: bigint;
}

/** The delegate entry of a 402's fields, if the answer carried a well-formed one. */
export function delegateAcceptsOf(fields: Readonly<Record<string, unknown>>): DelegateAccepts | undefined {
  const accepts = fields['accepts'];
  if (!Array.isArray(accepts)) return undefined;
  const entry = accepts.find((option) => (option as { scheme?: unknown })?.scheme === 'delegate') as
    | {
        chain_id?: unknown;
        payer?: unknown;
        instruction?: { minimum_value_wei?: unknown };
        transaction?: { to?: unknown; data?: unknown; chainId?: unknown };
      }
    | undefined;
  const payer = entry?.payer;
  const to = entry?.transaction?.to;
  const data = entry?.transaction?.data;
  const minimum = entry?.instruction?.minimum_value_wei;
  const chainId = Number(entry?.transaction?.chainId ?? entry?.chain_id);
  if (typeof payer !== 'string' || typeof to !== 'string') return undefined;
  if (typeof data !== 'string' || !/^0x[0-9a-fA-F]*$/.test(data)) return undefined;
  if (typeof minimum !== 'string' || !/^\d{1,78}$/.test(minimum) || !Number.isSafeInteger(chainId))
    return undefined;
  try {
    return {
      chainId,
      payer: getAddress(payer),
      transaction: { to: getAddress(to), data },
      minimumWei: BigInt(minimum),
    };
  } catch {
    return undefined;
  }
}
