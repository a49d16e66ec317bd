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

/**
 * `chainTimeNow` for a process that asks often (each running job's relay, every poll interval): the latest
 * block is read at most once per `maxAgeMs`, and callers asking meanwhile share that read, so the chain is
 * read once however many jobs run. A deadline is judged at most `maxAgeMs` late (the wall clock, which
 * `chainTimeAfter` also takes, is never cached).
 */
export class SharedChainTime {
  #latest:
    { readonly readAt: number; readonly block: Promise<{ readonly timestamp: number } | null> } | undefined;

  constructor(
    private readonly provider: { getBlock(tag: 'latest'): Promise<{ readonly timestamp: number } | null> },
    private readonly maxAgeMs: number,
  ) {}

  async now(): Promise<number> {
    const cached = this.#latest;
    if (cached && Date.now() - cached.readAt < this.maxAgeMs) return chainTimeAfter(await cached.block);
    const latest = { readAt: Date.now(), block: this.provider.getBlock('latest') };
    this.#latest = latest;
    try {
      return chainTimeAfter(await latest.block);
    } catch (error) {
      // A failed read is not shared: the next caller reads again.
      if (this.#latest === latest) this.#latest = undefined;
      throw error;
    }
  }
}
