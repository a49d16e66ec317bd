import type { Provider } from 'ethers';

/**
 * The chain's notion of now: the latest block's timestamp. Deadlines on chain compare against
 * `block.timestamp`, which can run ahead of (or behind) this machine's clock.
 */
export async function latestBlockTimestamp(provider: Provider): Promise<number> {
  const block = await provider.getBlock('latest');
  if (!block) throw new Error('the chain returned no latest block');
  return block.timestamp;
}
