import type { Provider } from 'ethers';

/**
 * The chain's clock as the next transaction will see it, in seconds: the latest block's timestamp, or this
 * machine's clock when that is later. Every deadline the contracts check against `block.timestamp` is
 * judged with it. A chain that mines on demand (anvil's automine) stamps its next block with the wall
 * clock, so deadlines judged against the last block alone would never pass while it is idle; on a chain
 * that mines on its own the two agree within a block. (A test that moves the chain's time ahead with
 * `ChainClock` is ahead of the wall clock, and is followed.)
 */
export async function chainTimeNow(provider: Pick<Provider, 'getBlock'>): Promise<number> {
  return chainTimeAfter(await provider.getBlock('latest'));
}

/** `chainTimeNow` for a caller that read the latest block already (for its number too). */
export function chainTimeAfter(latest: { readonly timestamp: number } | null): number {
  return Math.max(latest?.timestamp ?? 0, Math.floor(Date.now() / 1000));
}
