import { describe, expect, it } from '@jest/globals';
import { AbiCoder, makeError } from 'ethers';
import { jobRegistryInterface, workerRegistryInterface } from '../src/connect.js';
import {
  ContractRevertError,
  decodeContractError,
  decodeRevertData,
  findRevertData,
  formatContractError,
  withDecodedRevert,
} from '../src/errors.js';

const USER = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const insufficientBalance = jobRegistryInterface.encodeErrorResult('InsufficientBalance', [USER, 10n, 3n]);

describe('decodeRevertData', () => {
  it('decodes custom errors of both contracts with named, typed arguments', () => {
    const decoded = decodeRevertData(insufficientBalance);
    expect(decoded).toEqual({
      name: 'InsufficientBalance',
      args: { user: USER, required: 10n, available: 3n },
    });
    if (decoded?.name === 'InsufficientBalance') {
      // The union narrows: `required` is a bigint here.
      expect(decoded.args.required - decoded.args.available).toBe(7n);
    }
    const locked = workerRegistryInterface.encodeErrorResult('StakeLocked', [USER, 99n]);
    expect(decodeRevertData(locked)).toEqual({
      name: 'StakeLocked',
      args: { worker: USER, unbondingEndsAt: 99n },
    });
    const blob = jobRegistryInterface.encodeErrorResult('BlobMissing', [2n]);
    expect(decodeRevertData(blob)).toEqual({ name: 'BlobMissing', args: { blobIndex: 2n } });
  });

  it("decodes Solidity's Error(string) and Panic(uint256)", () => {
    const coder = AbiCoder.defaultAbiCoder();
    expect(decodeRevertData(`0x08c379a0${coder.encode(['string'], ['nope']).slice(2)}`)).toEqual({
      name: 'Error',
      args: { message: 'nope' },
    });
    expect(decodeRevertData(`0x4e487b71${coder.encode(['uint256'], [0x11]).slice(2)}`)).toEqual({
      name: 'Panic',
      args: { code: 0x11n },
    });
  });

  it('returns undefined for unknown selectors, short data, non-hex and undecodable payloads', () => {
    expect(decodeRevertData('0xdeadbeef')).toBeUndefined();
    expect(decodeRevertData('0x')).toBeUndefined();
    expect(decodeRevertData('not hex')).toBeUndefined();
    expect(decodeRevertData(insufficientBalance.slice(0, 20))).toBeUndefined();
  });
});

describe('findRevertData and decodeContractError', () => {
  it('finds the data of an ethers CALL_EXCEPTION', () => {
    const error = makeError('execution reverted', 'CALL_EXCEPTION', {
      action: 'estimateGas',
      data: insufficientBalance,
      reason: null,
      transaction: { to: null, data: '0x' },
      invocation: null,
      revert: null,
    });
    expect(findRevertData(error)).toBe(insufficientBalance);
    expect(decodeContractError(error)?.name).toBe('InsufficientBalance');
  });

  it('finds data nested in a JSON-RPC error, a wrapped cause or given as raw hex', () => {
    expect(findRevertData({ info: { error: { code: 3, data: insufficientBalance } } })).toBe(
      insufficientBalance,
    );
    expect(findRevertData({ error: { error: { data: insufficientBalance } } })).toBe(insufficientBalance);
    expect(findRevertData(new Error('wrapped', { cause: { data: insufficientBalance } }))).toBe(
      insufficientBalance,
    );
    expect(findRevertData(insufficientBalance)).toBe(insufficientBalance);
    expect(findRevertData({ data: null, message: 'timeout' })).toBeUndefined();
    expect(decodeContractError(new Error('socket hang up'))).toBeUndefined();
  });
});

describe('withDecodedRevert', () => {
  it('rethrows a revert as a ContractRevertError carrying the decoded error and the original cause', async () => {
    const original = { code: 'CALL_EXCEPTION', data: insufficientBalance };
    const failure = await withDecodedRevert(() => Promise.reject(original)).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ContractRevertError);
    const revertError = failure as ContractRevertError;
    expect(revertError.revert.name).toBe('InsufficientBalance');
    expect(revertError.cause).toBe(original);
    expect(revertError.message).toBe(
      `contract reverted with InsufficientBalance(user=${USER}, required=10, available=3)`,
    );
  });

  it('passes results through and rethrows any other failure unchanged', async () => {
    await expect(withDecodedRevert(Promise.resolve(42))).resolves.toBe(42);
    const network = new Error('connect ECONNREFUSED');
    await expect(withDecodedRevert(Promise.reject(network))).rejects.toBe(network);
  });

  it('formats errors for logs', () => {
    expect(formatContractError({ name: 'ZeroAmount', args: {} })).toBe('ZeroAmount()');
  });
});
