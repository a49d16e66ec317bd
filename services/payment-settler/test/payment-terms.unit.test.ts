import { describe, expect, it } from '@jest/globals';
import type { ChainClient } from '@svc/chain';
import { modelIdOf } from '@svc/contracts';
import { PaymentTerms } from '../src/payments/payment-terms.js';

// The requirements of a 402 are asked for on every keyless call: the fee behind them is read from the
// chain once per model and CHAIN_CACHE_TTL, not once per call (an unknown model's 0 included).

const MODEL = 'llama3.2:1b';

function countingChain() {
  const reads: string[] = [];
  const chain = {
    addresses: { jobRegistry: `0x${'44'.repeat(20)}` },
    jobFee: async (modelId: string) => {
      reads.push(modelId);
      return modelId === modelIdOf(MODEL) ? 10n ** 14n : 0n;
    },
    refreshParameters: async () => ({ jobTimeoutSeconds: 120 }),
    isDelegateAuthorized: async () => true,
  };
  return { chain: chain as unknown as ChainClient, reads };
}

const parties = { chainId: 31337n, facilitator: `0x${'66'.repeat(20)}`, payTo: `0x${'55'.repeat(20)}` };

describe('PaymentTerms', () => {
  it("reads a model's fee once per cache TTL, however many calls ask", async () => {
    const { chain, reads } = countingChain();
    const terms = new PaymentTerms(chain, parties, 60_000);
    const all = await Promise.all(Array.from({ length: 50 }, () => terms.requirementsFor(MODEL)));
    expect(new Set(all.map((requirements) => requirements.amount))).toEqual(
      new Set([(10n ** 14n).toString()]),
    );
    for (let i = 0; i < 20; i++)
      await expect(terms.requirementsFor('missing')).rejects.toThrow(/does not exist/);
    expect(reads).toEqual([modelIdOf(MODEL), modelIdOf('missing')]);
  });

  it('reads the fee again once the TTL passed', async () => {
    const { chain, reads } = countingChain();
    const terms = new PaymentTerms(chain, parties, 20);
    await terms.requirementsFor(MODEL);
    await new Promise((resolve) => setTimeout(resolve, 30));
    await terms.requirementsFor(MODEL);
    expect(reads).toHaveLength(2);
  });
});
