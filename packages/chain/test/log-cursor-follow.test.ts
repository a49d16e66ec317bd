import { describe, expect, it } from '@jest/globals';
import { toQuantity, type TransactionReceipt, type Wallet } from 'ethers';
import { connectJobRegistry } from '@svc/contracts';
import { useDevnet, waitFor } from '@svc/testkit';
import { ProtocolLogCursor, type ProtocolEvent, type ProtocolLogBatch } from '../src/index.js';

const devnet = useDevnet({ warmBlobs: true, snapshots: true });

const CONFIRMATIONS = 2;
const POLL_INTERVAL_MS = 25;

function cursorFrom(fromBlock: number, maxBlockRange?: number): ProtocolLogCursor {
  const { provider, deployment } = devnet();
  return new ProtocolLogCursor({
    provider,
    addresses: {
      jobRegistry: deployment.jobRegistryAddress,
      workerRegistry: deployment.workerRegistryAddress,
    },
    fromBlock,
    confirmations: CONFIRMATIONS,
    ...(maxBlockRange === undefined ? {} : { maxBlockRange }),
  });
}

async function deposit(from: Wallet, value: bigint): Promise<TransactionReceipt> {
  const registry = connectJobRegistry(devnet().deployment.jobRegistryAddress, from);
  const receipt = await (await registry.deposit({ value })).wait();
  if (!receipt) throw new Error('deposit not mined');
  return receipt;
}

/** Where an event sits: two deliveries of one log have the same key. */
function keyOf(event: ProtocolEvent): string {
  return `${event.blockNumber}:${event.logIndex}`;
}

/**
 * Follows `cursor` in the background, checking on every batch that it holds only logs buried
 * under at least CONFIRMATIONS blocks at the moment it is handled (the head never moves back).
 */
function followInBackground(cursor: ProtocolLogCursor) {
  const controller = new AbortController();
  const events: ProtocolEvent[] = [];
  const batches: ProtocolLogBatch[] = [];
  const tooFresh: number[] = [];
  const following = cursor.follow(
    async (batch) => {
      const head = await devnet().provider.getBlockNumber();
      for (const event of batch.events) {
        if (event.blockNumber > head - CONFIRMATIONS || event.blockNumber > batch.toBlock)
          tooFresh.push(event.blockNumber);
      }
      batches.push(batch);
      events.push(...batch.events);
    },
    { pollIntervalMs: POLL_INTERVAL_MS, signal: controller.signal },
  );
  return {
    events,
    batches,
    tooFresh,
    following,
    stop: async () => {
      controller.abort();
      await following;
    },
  };
}

/** Every protocol event from `fromBlock` up to the confirmed head, read in one go. */
async function everyConfirmedEvent(fromBlock: number): Promise<ProtocolEvent[]> {
  const cursor = cursorFrom(fromBlock);
  const events: ProtocolEvent[] = [];
  for (let batch = await cursor.next(); batch; batch = await cursor.next()) events.push(...batch.events);
  return events;
}

describe('ProtocolLogCursor.follow', () => {
  it('delivers logs as their blocks are buried, never past head - confirmations, and stops when aborted', async () => {
    const { wallet, provider, rpc } = devnet();
    const user = wallet(1);
    const startBlock = (await provider.getBlockNumber()) + 1;
    const cursor = cursorFrom(startBlock);
    const follower = followInBackground(cursor);
    try {
      const receipts: TransactionReceipt[] = [];
      for (let index = 0; index < 4; index++) receipts.push(await deposit(user, BigInt(index + 1)));
      const head = await provider.getBlockNumber();
      expect(receipts.map((receipt) => receipt.blockNumber)).toEqual([0, 1, 2, 3].map((i) => startBlock + i));

      // Two of the four deposits are buried deep enough; the two newest are not, however long it waits.
      await waitFor(() => follower.events.length >= 2 || undefined, { what: 'two confirmed deposits' });
      await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS * 8));
      expect(follower.events.map((event) => event.transactionHash)).toEqual(
        receipts.slice(0, 2).map((receipt) => receipt.hash),
      );
      expect(cursor.nextBlock).toBe(head - CONFIRMATIONS + 1);

      // Burying the newest two delivers them, in chain order, each exactly once.
      await rpc('anvil_mine', [toQuantity(CONFIRMATIONS)]);
      await waitFor(() => follower.events.length >= 4 || undefined, { what: 'all four deposits' });
      const delivered = follower.events;
      expect(delivered.map((event) => event.transactionHash)).toEqual(
        receipts.map((receipt) => receipt.hash),
      );
      expect(delivered.map((event) => event.name)).toEqual([
        'Deposited',
        'Deposited',
        'Deposited',
        'Deposited',
      ]);
      expect(delivered.map((event) => (event.name === 'Deposited' ? event.args.amount : undefined))).toEqual([
        1n,
        2n,
        3n,
        4n,
      ]);
      expect(follower.batches.every((batch) => batch.events.length > 0)).toBe(true);
      expect(follower.tooFresh).toEqual([]);

      await follower.stop();
      const stoppedAt = cursor.nextBlock;
      await deposit(user, 5n);
      await rpc('anvil_mine', [toQuantity(CONFIRMATIONS + 1)]);
      await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS * 8));
      expect(follower.events).toHaveLength(4);
      expect(cursor.nextBlock).toBe(stoppedAt);
    } finally {
      await follower.stop();
    }
  });

  it('resumes from nextBlock of a stopped follower without duplicates or gaps while blocks keep coming', async () => {
    const { wallet, provider, rpc } = devnet();
    const depositors = [wallet(2), wallet(3)];
    const startBlock = (await provider.getBlockNumber()) + 1;
    // Two deposits a block, so a block holds more than one log and ranges split between them.
    let depositing = true;
    const depositLoop = (async () => {
      await rpc('evm_setAutomine', [false]);
      try {
        for (let round = 1; depositing; round++) {
          const registries = depositors.map((depositor) =>
            connectJobRegistry(devnet().deployment.jobRegistryAddress, depositor),
          );
          const sent = await Promise.all(registries.map((registry) => registry.deposit({ value: round })));
          await rpc('evm_mine');
          await Promise.all(sent.map((response) => response.wait()));
        }
      } finally {
        await rpc('evm_setAutomine', [true]);
      }
    })();

    const stopped = cursorFrom(startBlock, 3);
    const first = followInBackground(stopped);
    await waitFor(() => first.events.length >= 6 || undefined, { what: 'the first follower to read' });
    await first.stop();

    // As a restarted process would, from the position the stopped one left.
    const resumed = cursorFrom(stopped.nextBlock, 3);
    const second = followInBackground(resumed);
    await waitFor(() => second.events.length >= 6 || undefined, { what: 'the second follower to read' });
    depositing = false;
    await depositLoop;
    const head = await provider.getBlockNumber();
    await waitFor(() => resumed.nextBlock === head - CONFIRMATIONS + 1 || undefined, {
      what: 'the second follower to catch up',
    });
    await second.stop();

    const expected = await everyConfirmedEvent(startBlock);
    const followed = [...first.events, ...second.events];
    expect(followed.map(keyOf)).toEqual(expected.map(keyOf));
    expect(new Set(followed.map(keyOf)).size).toBe(followed.length);
    expect(expected.length).toBeGreaterThanOrEqual(12);
    expect(new Set(expected.map((event) => event.blockNumber)).size).toBeLessThan(expected.length);
    expect([...first.tooFresh, ...second.tooFresh]).toEqual([]);
  });

  it('stops with the error of a handler that throws, before its batch, which the next follow delivers again', async () => {
    const { wallet, provider } = devnet();
    const user = wallet(4);
    const startBlock = (await provider.getBlockNumber()) + 1;
    const receipts = [await deposit(user, 1n), await deposit(user, 2n)];
    await devnet().rpc('anvil_mine', [toQuantity(CONFIRMATIONS)]);
    const cursor = cursorFrom(startBlock, 1);
    const failure = new Error('the store is down');
    const seen: string[] = [];

    await expect(
      cursor.follow(
        (batch) => {
          seen.push(...batch.events.map((event) => event.transactionHash));
          if (seen.length === 2) throw failure;
        },
        { pollIntervalMs: POLL_INTERVAL_MS, signal: new AbortController().signal },
      ),
    ).rejects.toBe(failure);
    expect(cursor.nextBlock).toBe(receipts[1]!.blockNumber);

    const retry = followInBackground(cursor);
    await waitFor(() => retry.events.length >= 1 || undefined, { what: 'the failed batch again' });
    await retry.stop();
    expect(retry.events.map((event) => event.transactionHash)).toEqual([receipts[1]!.hash]);
    expect(seen).toEqual(receipts.map((receipt) => receipt.hash));
  });

  it('stops at once when aborted while reading, not a poll interval later', async () => {
    const { provider, deployment } = devnet();
    const controller = new AbortController();
    // The abort lands while the cursor waits for the head, as a shutdown mid-read would.
    const abortingProvider = new Proxy(provider, {
      get(target, property) {
        if (property === 'getBlockNumber') {
          return async () => {
            const head = await target.getBlockNumber();
            controller.abort();
            return head;
          };
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const cursor = new ProtocolLogCursor({
      provider: abortingProvider,
      addresses: {
        jobRegistry: deployment.jobRegistryAddress,
        workerRegistry: deployment.workerRegistryAddress,
      },
      fromBlock: (await provider.getBlockNumber()) + 1,
      confirmations: CONFIRMATIONS,
    });
    const handled: ProtocolLogBatch[] = [];
    const following = cursor.follow((batch) => void handled.push(batch), {
      pollIntervalMs: 600_000,
      signal: controller.signal,
    });
    let hangTimer: NodeJS.Timeout | undefined;
    const hang = new Promise<'still following'>((resolve) => {
      hangTimer = setTimeout(() => resolve('still following'), 5_000);
    });
    try {
      expect(await Promise.race([following.then(() => 'stopped'), hang])).toBe('stopped');
    } finally {
      clearTimeout(hangTimer);
    }
    expect(handled).toEqual([]);
  });
});
