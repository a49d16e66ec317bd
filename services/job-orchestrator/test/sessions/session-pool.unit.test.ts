import { describe, expect, it } from '@jest/globals';
import { SessionState } from '@svc/chain';
import { createLogger, isAppError, MemoryStore } from '@svc/platform';
import type { LiveWorker } from '../../src/link/worker-presence.js';
import { SessionPool, type SessionPoolOptions } from '../../src/sessions/session-pool.js';
import { poolSession, OPEN_SESSIONS_GROUP } from '../../src/sessions/session-records.js';

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
  #next = 1n;

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

function poolWith(live: LiveWorker[], overrides: Partial<SessionPoolOptions> = {}) {
  const store = new MemoryStore();
  const chain = new FakeChain();
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
    opensPerMinute: 100,
    holdTtlMs: 60_000,
    idleTtlMs: 60_000,
    affinityTtlMs: 60_000,
    claimPollIntervalMs: 1,
    slotHoldMs: 1_000,
    recovery: { ensure: async () => false },
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
    const { pool } = poolWith([worker('0x00000000000000000000000000000000000000b1')], { opensPerMinute: 1 });
    await pool.acquire(request('call-1'));
    const refused = await pool.acquire(request('call-2')).catch((error: unknown) => error);
    expect(isAppError(refused) && refused.code).toBe('session_open_limit_exceeded');

    const none = poolWith([worker('0x00000000000000000000000000000000000000b1', { models: ['other'] })]);
    const unserved = await none.pool.acquire(request('call-3')).catch((error: unknown) => error);
    expect(isAppError(unserved) && unserved.code).toBe('no_worker_available');
  });
});
