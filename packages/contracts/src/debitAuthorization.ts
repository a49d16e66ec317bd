import type { TypedDataDomain, TypedDataField } from 'ethers';

/** The x402 `prepaid-debit` authorization a payer signs (docs/protocol.md, Per-call payment). */
export interface DebitAuthorization {
  payer: string;
  payTo: string;
  facilitator: string;
  maxAmount: bigint;
  /** Unix seconds; the authorization is valid while `block.timestamp <= deadline`. */
  deadline: bigint;
  /** 32 random bytes, hex. */
  nonce: string;
}

/** EIP-712 types for `signTypedData` / `verifyTypedData`. */
export const DEBIT_AUTHORIZATION_TYPES: Record<string, TypedDataField[]> = {
  DebitAuthorization: [
    { name: 'payer', type: 'address' },
    { name: 'payTo', type: 'address' },
    { name: 'facilitator', type: 'address' },
    { name: 'maxAmount', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
};

/** JobRegistry's EIP-712 domain on `chainId`. */
export function debitDomain(chainId: bigint | number, jobRegistry: string): TypedDataDomain {
  return { name: 'JobRegistry', version: '1', chainId, verifyingContract: jobRegistry };
}
