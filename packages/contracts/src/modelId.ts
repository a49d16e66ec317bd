import { keccak256, toUtf8Bytes } from 'ethers';

/** On-chain id of a model: keccak256 of its exact UTF-8 name (colons included, no normalisation). */
export function modelIdOf(name: string): string {
  if (name.length === 0) throw new Error('model name must not be empty');
  return keccak256(toUtf8Bytes(name));
}
