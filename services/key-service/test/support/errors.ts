import { expect } from '@jest/globals';
import { RpcError } from '@svc/proto';

/** Awaits a call expected to fail and returns the catalogue code it failed with. */
export async function errorCodeOf(call: Promise<unknown>): Promise<string | undefined> {
  try {
    await call;
  } catch (error) {
    expect(error).toBeInstanceOf(RpcError);
    return (error as RpcError).appCode;
  }
  throw new Error('expected the call to fail, it succeeded');
}
