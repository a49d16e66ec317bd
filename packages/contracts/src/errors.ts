import { AbiCoder, isHexString, type Interface } from 'ethers';
import { jobRegistryInterface, workerRegistryInterface } from './connect.js';
import type { jobRegistryAbi } from './gen/JobRegistry.js';
import type { workerRegistryAbi } from './gen/WorkerRegistry.js';

interface AbiParameter {
  readonly name: string;
  readonly type: string;
}
interface AbiError {
  readonly type: 'error';
  readonly name: string;
  readonly inputs: readonly AbiParameter[];
}

type SolidityValue<T extends string> = T extends `uint${string}` | `int${string}`
  ? bigint
  : T extends 'bool'
    ? boolean
    : string;
type ErrorArgs<E extends AbiError> = { [P in E['inputs'][number] as P['name']]: SolidityValue<P['type']> };
type Decoded<E> = E extends AbiError ? { name: E['name']; args: ErrorArgs<E> } : never;
type ErrorsOf<Abi extends readonly unknown[]> = Extract<Abi[number], { type: 'error' }>;

/**
 * A revert of either contract, decoded: a custom error of the ABIs (a discriminated union, so
 * `switch (error.name)` narrows `args`), or Solidity's built-in `Error(string)` / `Panic(uint256)`.
 */
export type ContractError =
  | Decoded<ErrorsOf<typeof jobRegistryAbi> | ErrorsOf<typeof workerRegistryAbi>>
  | { name: 'Error'; args: { message: string } }
  | { name: 'Panic'; args: { code: bigint } };

export type ContractErrorName = ContractError['name'];

const ERROR_STRING_SELECTOR = '0x08c379a0';
const PANIC_SELECTOR = '0x4e487b71';
const INTERFACES: readonly Interface[] = [jobRegistryInterface, workerRegistryInterface];
const MAX_NESTING = 6;

/** Decodes raw revert data; undefined when it is not an error either contract can raise. */
export function decodeRevertData(data: string): ContractError | undefined {
  if (!isHexString(data) || data.length < 10) return undefined;
  const selector = data.slice(0, 10).toLowerCase();
  const payload = `0x${data.slice(10)}`;
  try {
    if (selector === ERROR_STRING_SELECTOR) {
      const [message] = AbiCoder.defaultAbiCoder().decode(['string'], payload) as unknown as [string];
      return { name: 'Error', args: { message } };
    }
    if (selector === PANIC_SELECTOR) {
      const [code] = AbiCoder.defaultAbiCoder().decode(['uint256'], payload) as unknown as [bigint];
      return { name: 'Panic', args: { code } };
    }
    for (const contractInterface of INTERFACES) {
      const fragment = contractInterface.getError(selector);
      if (!fragment) continue;
      const values = contractInterface.decodeErrorResult(fragment, data);
      const args = Object.fromEntries(fragment.inputs.map((input, index) => [input.name, values[index]]));
      return { name: fragment.name, args } as ContractError;
    }
  } catch {
    // Data that starts with a known selector but does not decode is not that error.
  }
  return undefined;
}

/**
 * The revert data carried by an ethers error (or any error wrapping one), wherever the provider put
 * it: `data` of a CALL_EXCEPTION, or the JSON-RPC error nested in `info.error` / `error` / `cause`.
 */
export function findRevertData(error: unknown, depth = 0): string | undefined {
  if (depth > MAX_NESTING || error === null || error === undefined) return undefined;
  if (typeof error === 'string') return isHexString(error) && error.length >= 10 ? error : undefined;
  if (typeof error !== 'object') return undefined;
  const record = error as Record<string, unknown>;
  const direct = record['data'];
  if (typeof direct === 'string' && isHexString(direct) && direct.length >= 10) return direct;
  const info = record['info'] as Record<string, unknown> | undefined;
  for (const nested of [direct, info?.['error'], record['error'], record['cause']]) {
    const found = findRevertData(nested, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** Decodes the revert inside an ethers error; undefined when the error is not a decodable revert. */
export function decodeContractError(error: unknown): ContractError | undefined {
  const data = findRevertData(error);
  return data === undefined ? undefined : decodeRevertData(data);
}

/** A contract revert with its decoded error; the original error is the `cause`. */
export class ContractRevertError extends Error {
  readonly revert: ContractError;

  constructor(revert: ContractError, cause: unknown) {
    super(`contract reverted with ${formatContractError(revert)}`, { cause });
    this.name = 'ContractRevertError';
    this.revert = revert;
  }
}

/**
 * Runs a contract call and rethrows a decodable revert as a ContractRevertError; every other
 * failure is rethrown as it is. Nothing is ever swallowed.
 */
export async function withDecodedRevert<T>(action: Promise<T> | (() => Promise<T>)): Promise<T> {
  try {
    return await (typeof action === 'function' ? action() : action);
  } catch (error) {
    const revert = decodeContractError(error);
    if (revert) throw new ContractRevertError(revert, error);
    throw error;
  }
}

export function formatContractError(error: ContractError): string {
  const args = Object.entries(error.args).map(([name, value]) => `${name}=${String(value)}`);
  return `${error.name}(${args.join(', ')})`;
}
