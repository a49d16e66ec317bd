import { getAddress } from 'ethers';

const UINT256_LIMIT = 1n << 256n;
const UINT32_LIMIT = 2 ** 32;

/** 32-byte big-endian encoding of an on-chain uint256 (chain, session and job ids). */
export function uint256be(value: bigint, what: string): Buffer {
  if (typeof value !== 'bigint' || value < 0n || value >= UINT256_LIMIT) {
    throw new RangeError(`${what} must be a uint256 bigint, got ${String(value)}`);
  }
  return Buffer.from(value.toString(16).padStart(64, '0'), 'hex');
}

/** 4-byte big-endian encoding of a uint32 counter (attempt, seq). */
export function uint32be(value: number, what: string): Buffer {
  if (!Number.isInteger(value) || value < 0 || value >= UINT32_LIMIT) {
    throw new RangeError(`${what} must be a uint32 integer, got ${String(value)}`);
  }
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(value);
  return bytes;
}

/** The 20 bytes of an address; mixed-case input must carry a valid EIP-55 checksum. */
export function addressBytes(address: string): Buffer {
  return Buffer.from(getAddress(address).slice(2), 'hex');
}

/** Views any Uint8Array as a Buffer without copying. */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
