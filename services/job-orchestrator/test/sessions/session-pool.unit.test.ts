import { describe, expect, it } from '@jest/globals';
import { SessionState } from '@svc/chain';
import { createLogger, isAppError, MemoryStore } from '@svc/platform';
import type { LiveWorker } from '../../src/link/worker-presence.js';
import { SessionOpenBudget, type SessionOpenSettings } from '../../src/sessions/session-open-budget.js';
import { SessionPool, type SessionPoolOptions } from '../../src/sessions/session-pool.js';
import {
  announceOpenSession,
  parseOpenSession,
  poolSession,
  OPEN_SESSIONS_GROUP,
  sessionPoolGroup,
} from '../../src/sessions/session-records.js';
import { SessionWarmer } from '../../src/sessions/session-warmer.js';
import { WorkerReputation } from '../../src/sessions/worker-reputation.js';

// The session pool over the in-memory store with the chain and the workers faked: milliseconds a case.
// The devnet suites (completions, session-recovery) run the same pool against anvil and real workers.

const OWNER = '0x00000000000000000000000000000000000000aa';
const MODEL = 'model-a';
const MODEL_ID = '0x' + '11'.repeat(32);
const KEY = '0x04' + '22'.repeat(64);
const logger = createLogger({ service: 'session-pool-test', level: 'silent' });

function worker(address: string, overrides: Partial<LiveWorker> = {}): LiveWorker {
  return {
    address,
    linkId: `link-${address}`,
    replicaId: 'replica',
    models: [MODEL],
    freeJobSlots: 4,
    freeSessionSlots: 4,
    expiresAtMs: Date.now() + 60_000,
    ...overrides,
  };
}

/** A chain whose sessions the named workers claim at once, unless they decline. */
class FakeChain {
  readonly opened: { sessionId: bigint; worker: string }[] = [];
  readonly closed: bigint[] = [];
  readonly states = new Map<bigint, SessionState>();
  #next: bigint;

  constructor(firstSessionId = 1n) {
    this.#next = firstSessionId;
  }

  async openSession(_owner: string, _modelId: string, workerAddress: string) {
    const sessionId = this.#next++;
    this.opened.push({ sessionId, worker: workerAddress });
    this.states.set(sessionId, SessionState.Active);
    return {
      sessionId,
      claimDeadline: Math.floor(Date.now() / 1000) + 30,
      tx: { hash: '0x01', blockNumber: 1, events: [] },
    };
  }

  async closeSession(sessionId: bigint) {
    this.closed.push(sessionId);
    this.states.set(sessionId, SessionState.Closed);
    return { hash: '0x02', blockNumber: 2, events: [] };
  }

  readonly reads = {
    getSession: async (sessionId: bigint) => ({
      state: this.states.get(sessionId) ?? SessionState.None,
      publicKey: KEY,
    }),
  };

  async now() {
    return Math.floor(Date.now() / 1000);
  }
}

/** Budgets no old case reaches: the cases about them set their own. */
const LOOSE_BUDGETS: SessionOpenSettings = {
  opensPerMinute: 100,
  perPayer: 1_000,
  perKey: 1_000,
  closeAfterMs: 60_000,
  unpaidOpensPerMinute: 1_000,
  paidMarkTtlMs: 60_000,
};

function poolWith(
  live: LiveWorker[],
  {
    budget,
    firstSessionId,
    ...overrides
  }: Partial<SessionPoolOptions> & { budget?: Partial<SessionOpenSettings>; firstSessionId?: bigint } = {},
  shared?: MemoryStore,
) {
  const store = shared ?? new MemoryStore();
  const chain = new FakeChain(firstSessionId);
  const hints: { worker: string; sessionId: string }[] = [];
  const pool = new SessionPool({
    store,
    chain: chain as unknown as SessionPoolOptions['chain'],
    workers: {
      live: async () => live,
      sendHint: (address, hint) => {
        if (hint.case === 'sessionOpened') hints.push({ worker: address, sessionId: hint.value.sessionId! });
        return true;
      },
      hintDeclined: () => false,
    },
    holdTtlMs: 60_000,
    idleTtlMs: 60_000,
    affinityTtlMs: 60_000,
    claimPollIntervalMs: 1,
    slotHoldMs: 1_000,
    recovery: { ensure: async () => false },
    opens: new SessionOpenBudget(store, { ...LOOSE_BUDGETS, ...budget }),
    reputation: new WorkerReputation(store, {
      backoffMs: 60_000,
      maxBackoffMs: 600_000,
      recordTtlMs: 3_600_000,
    }),
    trialSessions: 1_000,
    logger,
    ...overrides,
  });
  return { store, chain, pool, hints };
}

const request = (holder: string, extra: object = {}) => ({
  owner: OWNER,
  model: MODEL,
  modelId: MODEL_ID,
  holder,
  ...extra,
});

describe('the session pool (fakes)', () => {
  it('opens a session with the least loaded worker, pools it on release and reuses it', async () => {
    const busy = worker('0x00000000000000000000000000000000000000b1', { freeJobSlots: 1 });
    const idle = worker('0x00000000000000000000000000000000000000b2', { freeJobSlots: 3 });
    const { pool, chain, hints } = poolWith([busy, idle]);
    const first = await pool.acquire(request('call-1'));
    expect(first.session.worker).toBe(idle.address);
    expect(hints).toEqual([{ worker: idle.address, sessionId: '1' }]);
    await first.release();
    const second = await pool.acquire(request('call-2'));
    expect(second.session.sessionId).toBe(1n);
    expect(chain.opened).toHaveLength(1);
  });

  it('gives a session to one call at a time: a second call opens another', async () => {
    const { pool, chain } = poolWith([worker('0x00000000000000000000000000000000000000b1')]);
    const first = await pool.acquire(request('call-1'));
    await first.release();
    const [a, b] = await Promise.all([pool.acquire(request('call-2')), pool.acquire(request('call-3'))]);
    expect(new Set([a.session.sessionId, b.session.sessionId]).size).toBe(2);
    expect(chain.opened).toHaveLength(2);
  });

  it('prefers the session that last served the conversation', async () => {
    const { pool } = poolWith([worker('0x00000000000000000000000000000000000000b1')]);
    const [a, b] = await Promise.all([
      pool.acquire(request('call-1', { conversationId: 'c-1' })),
      pool.acquire(request('call-2', { conversationId: 'c-2' })),
    ]);
    await b.release();
    await a.release();
    for (let i = 0; i < 3; i++) {
      const lease = await pool.acquire(request(`again-${i}`, { conversationId: 'c-2' }));
      expect(lease.session.sessionId).toBe(b.session.sessionId);
      await lease.release();
    }
  });

  it('lets the busy lock go, exactly once, even when the store writes of a release or discard fail', async () => {
    const { pool, store } = poolWith([worker('0x00000000000000000000000000000000000000b1')]);
    const announce = store.presence.announce.bind(store.presence);
    const withdraw = store.presence.withdraw.bind(store.presence);
    const failing = async (): Promise<never> => {
      throw new Error('store down');
    };
    for (const end of ['release', 'discard'] as const) {
      const lease = await pool.acquire(request(`call-${end}`, { conversationId: 'c-1' }));
      const busy = `sessions:busy:${lease.session.sessionId}`;
      expect(await store.locks.holder(busy)).toBe(`call-${end}`);
      store.presence.announce = failing;
      store.presence.withdraw = failing;
      await expect(lease[end]('answered')).resolves.toBeUndefined();
      store.presence.announce = announce;
      store.presence.withdraw = withdraw;
      expect(await store.locks.holder(busy)).toBeNull();
      // Once: a second end does not release a lock another call took meanwhile.
      expect((await store.locks.tryAcquire(busy, 'next-call', 60_000)).acquired).toBe(true);
      await lease.release();
      expect(await store.locks.holder(busy)).toBe('next-call');
      await store.locks.release(busy, 'next-call');
    }
  });

  it('does not close a session it discards while another call holds it (its own lock was lost with the store)', async () => {
    const { pool, store, chain } = poolWith([worker('0x00000000000000000000000000000000000000b1')]);
    const failed = await pool.acquire(request('call-failed'));
    const busy = `sessions:busy:${failed.session.sessionId}`;
    // The store lost the lock; the session went back to the pool and another call took it.
    await store.locks.release(busy, 'call-failed');
    expect((await store.locks.tryAcquire(busy, 'call-next', 60_000)).acquired).toBe(true);
    await failed.discard('failed');
    await new Promise((resolve) => setImmediate(resolve));
    expect(chain.closed).toEqual([]);
    expect(await store.locks.holder(busy)).toBe('call-next');
    // Its own discard, lock in hand, closes it.
    await store.locks.release(busy, 'call-next');
    const own = await pool.acquire(request('call-own'));
    await own.discard('failed');
    await new Promise((resolve) => setImmediate(resolve));
    expect(chain.closed).toEqual([own.session.sessionId]);
  });

  it('does not give a session its own replica still holds to a second call when the store lost its lock', async () => {
    const { pool, store, chain } = poolWith([worker('0x00000000000000000000000000000000000000b1')]);
    const first = await pool.acquire(request('call-1'));
    await first.release();
    const holding = await pool.acquire(request('call-2'));
    expect(holding.session.sessionId).toBe(first.session.sessionId);
    // Redis restarted empty: the lock is gone from the store while call-2 still runs its job in the session.
    await store.locks.release(`sessions:busy:${holding.session.sessionId}`, 'call-2');
    const next = await pool.acquire(request('call-3'));
    expect(next.session.sessionId).not.toBe(holding.session.sessionId);
    expect(chain.opened).toHaveLength(2);
    // Once call-2 lets it go, it serves again.
    await holding.release();
    await next.release();
    const again = await pool.acquire(request('call-4'));
    expect([first.session.sessionId, next.session.sessionId]).toContain(again.session.sessionId);
  });

  it('does not take a session retired between listing the pool and taking its lock', async () => {
    const live = [worker('0x00000000000000000000000000000000000000b1')];
    const store = new MemoryStore();
    const holding = poolWith(live, {}, store);
    await (await holding.pool.acquire(request('call-warm'))).release();
    const failing = await holding.pool.acquire(request('call-failing'));
    // The second call lists the pool while the first still holds the session; the first then fails and
    // retires it (out of the pool, its lock let go) before the second tries the lock.
    let retireAfterListing = true;
    const racingStore = new Proxy(store, {
      get: (target, property) =>
        property === 'presence'
          ? {
              ...target.presence,
              announce: (...args: Parameters<MemoryStore['presence']['announce']>) =>
                target.presence.announce(...args),
              withdraw: (...args: Parameters<MemoryStore['presence']['withdraw']>) =>
                target.presence.withdraw(...args),
              list: async (group: string) => {
                const listed = await target.presence.list(group);
                if (retireAfterListing && group.startsWith('sessions:pool:')) {
                  retireAfterListing = false;
                  await failing.discard('failed');
                }
                return listed;
              },
            }
          : Reflect.get(target, property),
    });
    const racing = poolWith(live, {}, racingStore as MemoryStore);
    const next = await racing.pool.acquire(request('call-next'));
    expect(retireAfterListing).toBe(false);
    // A session of its own (each fake chain numbers its sessions from 1).
    expect(racing.chain.opened).toHaveLength(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(holding.chain.closed).toEqual([failing.session.sessionId]);
    await next.release();
  });

  it('keeps a session busy for as long as its call lives, and frees it within holdTtlMs of its replica dying', async () => {
    const store = new MemoryStore();
    // The replica whose call holds the session: once it dies, its renewals never reach the store.
    let replicaAlive = true;
    const replicaStore = new Proxy(store, {
      get: (target, property) =>
        property === 'locks'
          ? {
              renew: async (...args: Parameters<MemoryStore['locks']['renew']>) =>
                replicaAlive && target.locks.renew(...args),
              // A renewal takes a lost lock again: never from a dead replica.
              tryAcquire: async (...args: Parameters<MemoryStore['locks']['tryAcquire']>) =>
                replicaAlive
                  ? target.locks.tryAcquire(...args)
                  : { acquired: false, holderId: '', retryAfterMs: 1 },
              release: (...args: Parameters<MemoryStore['locks']['release']>) =>
                target.locks.release(...args),
              holder: (key: string) => target.locks.holder(key),
            }
          : Reflect.get(target, property),
    });
    const live = [worker('0x00000000000000000000000000000000000000b1')];
    const dying = poolWith(live, { holdTtlMs: 150 }, replicaStore as MemoryStore);
    const other = poolWith(live, { holdTtlMs: 150 }, store);
    await (await dying.pool.acquire(request('call-warm'))).release();
    const held = await dying.pool.acquire(request('call-long'));
    const busy = `sessions:busy:${held.session.sessionId}`;
    // A job longer than the TTL: the lock is renewed.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await store.locks.holder(busy)).toBe('call-long');
    // SIGKILL: nothing releases the lock, and it lapses.
    replicaAlive = false;
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await store.locks.holder(busy)).toBeNull();
    const next = await other.pool.acquire(request('call-next'));
    expect(next.session.sessionId).toBe(held.session.sessionId);
    expect(other.chain.opened).toEqual([]);
    await next.release();
  });

  it('lets the busy lock of a session it opened go when waiting for the claim fails, so the keeper can close it', async () => {
    const { pool, store, chain } = poolWith([worker('0x00000000000000000000000000000000000000b1')]);
    chain.reads.getSession = async () => {
      throw new Error('rpc down');
    };
    await expect(pool.acquire(request('call-1'))).rejects.toThrow('rpc down');
    expect(chain.opened).toHaveLength(1);
    expect(await store.locks.holder('sessions:busy:1')).toBeNull();
  });

  it('retires a recovered session its worker no longer holds, and opens a new one', async () => {
    const address = '0x00000000000000000000000000000000000000b1';
    const { pool, store, chain } = poolWith([worker(address, { heldSessions: ['8'] })]);
    const recovered = { sessionId: 9n, owner: OWNER, model: MODEL, modelId: MODEL_ID, worker: address };
    await poolSession(store, { ...recovered, publicKey: new Uint8Array(65), recovered: true }, 60_000);
    const lease = await pool.acquire(request('call-1'));
    expect(lease.session.sessionId).not.toBe(9n);
    expect(chain.opened).toHaveLength(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(chain.closed).toEqual([9n]);
  });

  it('takes a recovered session its worker lists as held', async () => {
    const address = '0x00000000000000000000000000000000000000b1';
    const { pool, store, chain } = poolWith([worker(address, { heldSessions: ['8'] })]);
    const recovered = { sessionId: 8n, owner: OWNER, model: MODEL, modelId: MODEL_ID, worker: address };
    await poolSession(store, { ...recovered, publicKey: new Uint8Array(65), recovered: true }, 60_000);
    const lease = await pool.acquire(request('call-1'));
    expect(lease.session.sessionId).toBe(8n);
    expect(chain.opened).toHaveLength(0);
    expect(chain.closed).toEqual([]);
  });

  it('asks for recovery before opening, and takes what it put back', async () => {
    const address = '0x00000000000000000000000000000000000000b1';
    let asked = 0;
    const setup = poolWith([worker(address)], {
      recovery: {
        ensure: async () => {
          asked += 1;
          await poolSession(
            setup.store,
            {
              sessionId: 5n,
              owner: OWNER,
              model: MODEL,
              modelId: MODEL_ID,
              worker: address,
              publicKey: new Uint8Array(65),
              recovered: true,
            },
            60_000,
          );
          return true;
        },
      },
    });
    const lease = await setup.pool.acquire(request('call-1'));
    expect(asked).toBe(1);
    expect(lease.session.sessionId).toBe(5n);
    expect(setup.chain.opened).toHaveLength(0);
  });

  it("after a store loss, keeps another replica's call out of a recovered session a live call still holds", async () => {
    // Two replicas on one store; a call of the first holds session 1 (its job unmined) when the store loses
    // every key. The second recovers the session from the chain (held back for two renewals), and the
    // first call's renewal takes its lock again meanwhile: the second replica opens a session of its own.
    const store = new MemoryStore();
    const address = '0x00000000000000000000000000000000000000b1';
    const live = [worker(address, { heldSessions: ['1'] })];
    const holding = poolWith(live, { holdTtlMs: 150 }, store);
    const call = await holding.pool.acquire(request('call-holding'));
    const busy = `sessions:busy:${call.session.sessionId}`;
    let recoveries = 0;
    const other = poolWith(
      live,
      {
        holdTtlMs: 150,
        firstSessionId: 100n,
        recovery: {
          ensure: async () => {
            recoveries += 1;
            await poolSession(
              store,
              { ...call.session, recovered: true, heldBackUntilMs: Date.now() + 100 },
              60_000,
            );
            return true;
          },
        },
      },
      store,
    );
    await store.locks.release(busy, 'call-holding');
    const next = await other.pool.acquire(request('call-next'));
    expect(recoveries).toBe(1);
    expect(next.session.sessionId).not.toBe(call.session.sessionId);
    expect(other.chain.opened).toHaveLength(1);
    expect(await store.locks.holder(busy)).toBe('call-holding');
    await call.release();
    await next.release();
  });

  it('waits for a recovered session held back rather than opening one, and takes it once nobody holds it', async () => {
    const address = '0x00000000000000000000000000000000000000b1';
    const { pool, store, chain } = poolWith([worker(address, { heldSessions: ['8'] })]);
    const recovered = { sessionId: 8n, owner: OWNER, model: MODEL, modelId: MODEL_ID, worker: address };
    const heldBackUntilMs = Date.now() + 200;
    await poolSession(
      store,
      { ...recovered, publicKey: new Uint8Array(65), recovered: true, heldBackUntilMs },
      60_000,
    );
    const lease = await pool.acquire(request('call-1'));
    expect(Date.now()).toBeGreaterThanOrEqual(heldBackUntilMs);
    expect(lease.session.sessionId).toBe(8n);
    expect(chain.opened).toHaveLength(0);
  });

  it('never closes a recovered session held back to make room on a full worker', async () => {
    const address = '0x00000000000000000000000000000000000000b1';
    const live = [worker(address, { freeSessionSlots: 0, heldSessions: ['8'] })];
    const { pool, store, chain } = poolWith(live);
    const other = '0x00000000000000000000000000000000000000a2';
    const recovered = { sessionId: 8n, owner: other, model: MODEL, modelId: MODEL_ID, worker: address };
    const heldBackUntilMs = Date.now() + 60_000;
    await announceOpenSession(store, 8n, {
      owner: other,
      modelId: MODEL_ID,
      worker: address,
      heldBackUntilMs,
    });
    await poolSession(
      store,
      { ...recovered, publicKey: new Uint8Array(65), recovered: true, heldBackUntilMs },
      60_000,
    );
    expect(await codeOf(pool.acquire(request('call-1')))).toBe('no_worker_available');
    expect(chain.closed).toEqual([]);
  });

  it('makes room on a full worker by closing the idle session used longest ago', async () => {
    const address = '0x00000000000000000000000000000000000000b1';
    const live = [worker(address, { freeSessionSlots: 1 })];
    // A claimed session's slot counts here for a moment only (until heartbeats report it).
    const { pool, chain, store } = poolWith(live, { slotHoldMs: 1 });
    const other = '0x00000000000000000000000000000000000000a2';
    const old = await pool.acquire({ ...request('old'), owner: other });
    await old.release();
    live[0] = worker(address, { freeSessionSlots: 0 });
    setTimeout(() => (live[0] = worker(address, { freeSessionSlots: 1 })), 5);
    const lease = await pool.acquire(request('new'));
    expect(chain.closed).toEqual([old.session.sessionId]);
    expect(lease.session.sessionId).not.toBe(old.session.sessionId);
    expect((await store.presence.list(OPEN_SESSIONS_GROUP)).map((entry) => entry.member)).toEqual([
      lease.session.sessionId.toString(),
    ]);
  });

  it('refuses a new session beyond the opens per minute, and when no worker serves the model', async () => {
    const { pool } = poolWith([worker('0x00000000000000000000000000000000000000b1')], {
      budget: { opensPerMinute: 1 },
    });
    await pool.acquire(request('call-1'));
    const refused = await pool.acquire(request('call-2')).catch((error: unknown) => error);
    expect(isAppError(refused) && refused.code).toBe('session_open_limit_exceeded');

    const none = poolWith([worker('0x00000000000000000000000000000000000000b1', { models: ['other'] })]);
    const unserved = await none.pool.acquire(request('call-3')).catch((error: unknown) => error);
    expect(isAppError(unserved) && unserved.code).toBe('no_worker_available');
  });
});

const B1 = '0x00000000000000000000000000000000000000b1';
const B2 = '0x00000000000000000000000000000000000000b2';
const B3 = '0x00000000000000000000000000000000000000b3';

async function codeOf(lease: Promise<unknown>): Promise<string | undefined> {
  const error = await lease.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  return isAppError(error) ? error.code : undefined;
}

/** A call of `wallet` (the session owner and payer on the delegate path) with one of its keys. */
function walletCall(holder: string, wallet: string, keyId: string) {
  return { ...request(holder), owner: wallet, payer: wallet, keyId };
}

describe('sessions in which no job was submitted (issue 27, item 2)', () => {
  it('bounds them per key and per wallet, and a submitted job gives the slot back', async () => {
    const roomy = worker(B1, { freeJobSlots: 64, freeSessionSlots: 64 });
    const { pool, chain, store } = poolWith([roomy], {
      budget: { perKey: 2, perPayer: 3 },
    });
    const wallet = '0x00000000000000000000000000000000000000c1';
    // Calls that leave before submitting: their sessions are held here, then handed back unused.
    const a1 = await pool.acquire(walletCall('a1', wallet, 'key-a'));
    const a2 = await pool.acquire(walletCall('a2', wallet, 'key-a'));
    expect(await codeOf(pool.acquire(walletCall('a3', wallet, 'key-a')))).toBe('session_open_limit_exceeded');
    const b1 = await pool.acquire(walletCall('b1', wallet, 'key-b'));
    expect(await codeOf(pool.acquire(walletCall('b2', wallet, 'key-b')))).toBe('session_open_limit_exceeded');
    expect(chain.opened).toHaveLength(3);
    await Promise.all([a1.release(), a2.release(), b1.release()]);

    // The pooled sessions still serve the wallet: no open needed.
    const taken = await Promise.all(
      ['c1', 'c2', 'c3'].map((holder) => pool.acquire(walletCall(holder, wallet, 'key-b'))),
    );
    expect(chain.opened).toHaveLength(3);
    expect(await codeOf(pool.acquire(walletCall('c4', wallet, 'key-b')))).toBe('session_open_limit_exceeded');
    // A job submitted in one of them: that session leaves the budget, so one more may open.
    await taken[0]!.jobSubmitted();
    const fourth = await pool.acquire(walletCall('c5', wallet, 'key-b'));
    expect(chain.opened).toHaveLength(4);
    expect(await store.concurrency.count(`sessions:unused:payer:${wallet}`)).toBe(3);
    await fourth.release();
  });

  it('keeps paying wallets served while wallets that never paid use up their share of the opens', async () => {
    const roomy = worker(B1, { freeJobSlots: 64, freeSessionSlots: 64 });
    const { pool } = poolWith([roomy], {
      budget: { opensPerMinute: 6, unpaidOpensPerMinute: 3 },
    });
    const paying = '0x00000000000000000000000000000000000000d0';
    const first = await pool.acquire(walletCall('p1', paying, 'key-p'));
    await first.jobSubmitted();
    await first.release('answered');
    // Twelve wallets holding one fee each open sessions and leave before paying for a job.
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, (_, i) => {
        const wallet = `0x00000000000000000000000000000000000000${(0xe0 + i).toString(16)}`;
        return codeOf(pool.acquire(walletCall(`s${i}`, wallet, `key-s${i}`)));
      }),
    );
    expect(outcomes.filter((code) => code === undefined)).toHaveLength(2);
    expect(outcomes.filter((code) => code === 'session_open_limit_exceeded')).toHaveLength(10);
    // The paying wallet still opens what it needs (its pooled session is busy with another call).
    const busy = await pool.acquire(walletCall('p2', paying, 'key-p'));
    expect(busy.session.sessionId).toBe(first.session.sessionId);
    const opened = await pool.acquire(walletCall('p3', paying, 'key-p'));
    expect(opened.session.sessionId).not.toBe(first.session.sessionId);
  });

  it('pools a session no job was submitted in only until SESSION_UNUSED_CLOSE, marked for the keeper', async () => {
    const { pool, store } = poolWith([worker(B1)], {
      idleTtlMs: 600_000,
      budget: { closeAfterMs: 5_000 },
    });
    const wallet = '0x00000000000000000000000000000000000000c2';
    const left = await pool.acquire(walletCall('left', wallet, 'key-a'));
    await left.release();
    const group = sessionPoolGroup(wallet, MODEL_ID);
    const [unused] = await store.presence.list(group);
    expect(unused!.expiresAtMs - Date.now()).toBeLessThanOrEqual(5_000);
    const [record] = await store.presence.list(OPEN_SESSIONS_GROUP);
    expect(parseOpenSession(record!.value)?.unusedLeases).toHaveLength(2);
    expect(await store.concurrency.count('sessions:unused:key:key-a')).toBe(1);

    const paid = await pool.acquire(walletCall('paid', wallet, 'key-a'));
    expect(paid.session.sessionId).toBe(left.session.sessionId);
    await paid.jobSubmitted();
    await paid.release('answered');
    const [used] = await store.presence.list(group);
    expect(used!.expiresAtMs - Date.now()).toBeGreaterThan(500_000);
    const [usedRecord] = await store.presence.list(OPEN_SESSIONS_GROUP);
    expect(parseOpenSession(usedRecord!.value)?.unusedLeases).toBeUndefined();
    expect(await store.concurrency.count('sessions:unused:key:key-a')).toBe(0);
    expect(await store.concurrency.count(`sessions:unused:payer:${wallet}`)).toBe(0);
  });
});

describe('the choice of workers (issue 27, item 5)', () => {
  it('remembers a failure across calls and replicas: the next sessions go to another worker', async () => {
    // The staller claims far more room than the honest worker and was the least loaded pick.
    const staller = worker(B1, { freeJobSlots: 32, freeSessionSlots: 32 });
    const honest = worker(B2, { freeJobSlots: 2, freeSessionSlots: 4 });
    const { pool, store } = poolWith([staller, honest]);
    const first = await pool.acquire(request('call-1'));
    expect(first.session.worker).toBe(B1);
    // Its job timed out: the run discards the session and says the worker failed.
    await first.discard('failed');
    const second = await pool.acquire(request('call-2'));
    expect(second.session.worker).toBe(B2);
    // Another replica, sharing the store, knows it too.
    const replica = poolWith([staller, honest], {}, store);
    const third = await replica.pool.acquire(request('call-3'));
    expect(third.session.worker).toBe(B2);
  });

  it('prefers a worker that answered, and gives an unproven one only its trial sessions meanwhile', async () => {
    const proven = worker(B2, { freeJobSlots: 2, freeSessionSlots: 3 });
    const newcomer = worker(B3, { freeJobSlots: 32, freeSessionSlots: 32 });
    const { pool, chain } = poolWith([proven, newcomer], { trialSessions: 2, slotHoldMs: 60_000 });
    const warmUp = await pool.acquire(request('warm-up'));
    expect(warmUp.session.worker).toBe(B3);
    // The warm-up went to the newcomer (both unproven, it has more room); now only the other one answered.
    await warmUp.discard();
    const firstProven = await pool.acquire({ ...request('answer'), excludeWorkers: new Set([B3]) });
    await firstProven.release('answered');
    const outcomes = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        pool.acquire(request(`call-${i}`)).then(
          (lease) => lease.session.worker,
          (error: unknown) => (isAppError(error) ? error.code : 'thrown'),
        ),
      ),
    );
    // The proven worker's pooled session and its two more free slots first, then the newcomer's trial of
    // two sessions; the sixth call finds no room, however much the newcomer says it has.
    expect(outcomes.filter((outcome) => outcome === B2)).toHaveLength(3);
    expect(outcomes.filter((outcome) => outcome === B3)).toHaveLength(2);
    expect(outcomes.filter((outcome) => outcome === 'no_worker_available')).toHaveLength(1);
    expect(chain.opened.filter((opened) => opened.worker === B3)).toHaveLength(3);
  });
});

describe('spare sessions (SessionWarmer, fakes)', () => {
  const warmerOver = (setup: ReturnType<typeof poolWith>, live: LiveWorker[], spare: number) =>
    new SessionWarmer({
      pool: setup.pool,
      workers: { live: async () => live },
      catalogue: { model: async (name: string) => ({ name, modelId: MODEL_ID, fee: 1n }) as never },
      store: setup.store,
      owner: OWNER,
      spare,
      logger,
    });
  const settled = async (setup: ReturnType<typeof poolWith>, idle: number) => {
    for (let tries = 0; tries < 200; tries++) {
      if ((await setup.pool.idleSessions(OWNER, MODEL_ID)) === idle) return;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    throw new Error(`the pool never had ${idle} idle sessions`);
  };

  it('opens a spare at a round, so the first call waits for no open, then tops the pool up behind each call', async () => {
    const live = [worker(B2)];
    const setup = poolWith(live, { budget: { perPayer: 1, perKey: 1 } });
    const warmer = warmerOver(setup, live, 1);
    await warmer.round();
    await settled(setup, 1);
    expect(setup.chain.opened).toHaveLength(1);
    // A new wallet's first call takes the spare: nothing opened for it, none of its budget used.
    const first = await setup.pool.acquire(request('first', { payer: '0x' + 'c1'.repeat(20), keyId: 'k1' }));
    expect(first.session.sessionId).toBe(1n);
    expect(setup.chain.opened).toHaveLength(1);
    warmer.nudge(MODEL, MODEL_ID);
    await settled(setup, 1);
    expect(setup.chain.opened).toHaveLength(2);
    // Never more than the spare asked for: a second nudge or round opens nothing while one is idle.
    warmer.nudge(MODEL, MODEL_ID);
    await warmer.round();
    await first.release();
    await settled(setup, 2);
    expect(setup.chain.opened).toHaveLength(2);
  });

  it('keeps nothing with a spare of 0, and never closes an idle session of a full worker to make room', async () => {
    const none = poolWith([worker(B2)]);
    await warmerOver(none, [worker(B2)], 0).round();
    expect(none.chain.opened).toEqual([]);

    // One session slot, taken by another owner's idle session: a spare is no reason to evict it.
    const full = [worker(B2, { freeSessionSlots: 0 })];
    const setup = poolWith(full);
    await poolSession(
      setup.store,
      {
        sessionId: 9n,
        owner: '0x' + 'dd'.repeat(20),
        model: MODEL,
        modelId: MODEL_ID,
        worker: B2,
        publicKey: new Uint8Array([4]),
      },
      60_000,
    );
    await warmerOver(setup, full, 1).round();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(setup.chain.opened).toEqual([]);
    expect(setup.chain.closed).toEqual([]);
  });
});
