import type { JsonRpcProvider } from 'ethers';

/**
 * Test control of a dev chain's state and time: snapshots to undo a test's changes, and moving
 * `block.timestamp` to reach deadlines without waiting for them.
 */
export class ChainClock {
  constructor(private readonly provider: JsonRpcProvider) {}

  async snapshot(): Promise<string> {
    return (await this.provider.send('evm_snapshot', [])) as string;
  }

  /** Restores a snapshot; anvil consumes it, so take a new one to revert again. */
  async revert(snapshotId: string): Promise<void> {
    const reverted = (await this.provider.send('evm_revert', [snapshotId])) as boolean;
    if (!reverted) throw new Error(`evm_revert(${snapshotId}) failed`);
  }

  /** Timestamp of the latest block. */
  async now(): Promise<number> {
    const block = await this.provider.getBlock('latest');
    if (!block) throw new Error('no latest block');
    return block.timestamp;
  }

  /** Mines a block `seconds` after the latest one; returns its timestamp. */
  async advance(seconds: number): Promise<number> {
    await this.setNextBlockTimestamp((await this.now()) + seconds);
    await this.mine();
    return this.now();
  }

  /**
   * Makes the next block carry exactly `timestamp`: the next transaction is mined at it, and pending
   * calls (gas estimates) already see it.
   */
  async setNextBlockTimestamp(timestamp: number): Promise<void> {
    await this.provider.send('evm_setNextBlockTimestamp', [timestamp]);
  }

  async mine(): Promise<void> {
    await this.provider.send('evm_mine', []);
  }
}
