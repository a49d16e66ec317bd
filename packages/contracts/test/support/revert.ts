import { expect } from '@jest/globals';
import { decodeContractError, type ContractError, type ContractErrorName } from '../../src/errors.js';

type ArgsOf<N extends ContractErrorName> = Extract<ContractError, { name: N }>['args'];

/**
 * Asserts that `action` reverts with the custom error `name` (and, when given, these arguments),
 * decoded from the revert data the node returned. Returns the decoded error.
 */
export async function expectRevert<N extends ContractErrorName>(
  action: Promise<unknown> | (() => Promise<unknown>),
  name: N,
  args?: Partial<ArgsOf<N>>,
): Promise<Extract<ContractError, { name: N }>> {
  let failure: unknown;
  try {
    await (typeof action === 'function' ? action() : action);
  } catch (error) {
    failure = error;
  }
  if (failure === undefined) throw new Error(`expected a revert with ${name}, but the call succeeded`);
  const decoded = decodeContractError(failure);
  if (!decoded)
    throw new Error(`expected a revert with ${name}, got an undecodable error`, { cause: failure });
  expect(decoded.name).toBe(name);
  if (args) expect(decoded.args).toMatchObject(args as Record<string, unknown>);
  return decoded as Extract<ContractError, { name: N }>;
}
