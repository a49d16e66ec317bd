import type { ServiceClient } from '@svc/proto';
import { RpcError } from '@svc/proto';
import { AbiCoder, Interface, Signature, Wallet, concat, type HDNodeWallet } from 'ethers';
import type { KeyServiceMethods } from '../../src/grpc/key-service-handlers.js';

/** Signs in with a real wallet: challenge, personal_sign, verify. Returns the token. */
export async function signIn(
  client: ServiceClient<KeyServiceMethods>,
  wallet: HDNodeWallet,
): Promise<string> {
  const challenge = await client.createChallenge({ address: { hex: wallet.address } });
  const signature = await wallet.signMessage(challenge.message);
  const result = await client.verifySignIn({ message: challenge.message, signature });
  return result.token;
}

export function randomWallet(): HDNodeWallet {
  return Wallet.createRandom();
}

/** Awaits a call expected to fail and returns its catalogue code and message. */
export async function refusalOf(call: Promise<unknown>): Promise<{ code?: string; message: string }> {
  try {
    await call;
  } catch (error) {
    if (!(error instanceof RpcError)) throw error;
    return { code: error.appCode, message: error.message };
  }
  throw new Error('expected the call to fail, it succeeded');
}

/** The magic suffix of an EIP-6492 signature (a counterfactual contract wallet's). */
export const EIP6492_MAGIC = '0x6492649264926492649264926492649264926492649264926492649264926492';

/**
 * A signature as a not-yet-deployed smart account sends it (EIP-6492):
 * `abi.encode(factory, factoryCalldata, innerSignature) ++ magic`, where the factory call would deploy the
 * account for `owner` and the inner signature is what the deployed account's `isValidSignature` checks.
 */
export async function eip6492Signature(owner: HDNodeWallet, message: string): Promise<string> {
  const factory = Wallet.createRandom().address;
  const factoryCalldata = new Interface([
    'function createAccount(address owner, uint256 salt) returns (address)',
  ]).encodeFunctionData('createAccount', [owner.address, 0n]);
  const inner = await owner.signMessage(message);
  const wrapped = AbiCoder.defaultAbiCoder().encode(
    ['address', 'bytes', 'bytes'],
    [factory, factoryCalldata, inner],
  );
  return concat([wrapped, EIP6492_MAGIC]);
}

/** A multi-owner contract wallet's signature (Safe style): the owners' 65-byte signatures, concatenated. */
export async function multiOwnerSignature(owners: HDNodeWallet[], message: string): Promise<string> {
  const sorted = [...owners].sort((a, b) => (a.address.toLowerCase() < b.address.toLowerCase() ? -1 : 1));
  return concat(await Promise.all(sorted.map((owner) => owner.signMessage(message))));
}

/** The same signature in EIP-2098 compact form (64 bytes: r, then yParity folded into s). */
export function compactSignature(signature: string): string {
  return Signature.from(signature).compactSerialized;
}
