// The store port: the few shared-state primitives the services need, each one atomic on its own, so any
// service can run with N replicas. Times are read from the store's clock (Redis server time), never from
// the calling replica, so replicas with skewed clocks still agree on every window, lease and expiry.

/** Milliseconds since the Unix epoch, read from the store's clock. */
export type EpochMs = number;

/** Outcome of one hit on a sliding rate window. */
export interface RateWindowVerdict {
  readonly allowed: boolean;
  readonly limit: number;
  /** Hits still allowed in the window after this one. */
  readonly remaining: number;
  /** 0 when allowed; otherwise the wait until enough counted hits leave the window for one more to pass. */
  readonly retryAfterMs: number;
  /** When the window will hold no counted hit, i.e. the whole limit is available again. */
  readonly resetAtMs: EpochMs;
}

/** Sliding-window rate limits (an exact log of hits). A refused hit is not counted. */
export interface RateWindows {
  /** Counts one hit against `key` when fewer than `limit` hits happened in the last `windowMs`. */
  hit(key: string, limit: number, windowMs: number): Promise<RateWindowVerdict>;
}

export interface LeaseGranted {
  readonly granted: true;
  readonly leaseId: string;
  /** Live leases of the key, this one included. */
  readonly active: number;
  readonly expiresAtMs: EpochMs;
}

export interface LeaseRefused {
  readonly granted: false;
  readonly active: number;
  /** Wait until enough leases expire for one more to fit; a release may free a slot sooner. */
  readonly retryAfterMs: number;
}

export type LeaseOutcome = LeaseGranted | LeaseRefused;

/** Counted leases: at most `limit` live leases per key; a lease nobody releases frees its slot at its TTL. */
export interface ConcurrencyLeases {
  acquire(key: string, limit: number, ttlMs: number): Promise<LeaseOutcome>;
  /** Moves a live lease's expiry to `ttlMs` from now; false when the lease expired or was released. */
  renew(key: string, leaseId: string, ttlMs: number): Promise<boolean>;
  /** Idempotent; true when the lease was still live. */
  release(key: string, leaseId: string): Promise<boolean>;
  /** Live leases of the key. */
  count(key: string): Promise<number>;
}

export type LockAttempt =
  | { readonly acquired: true; readonly expiresAtMs: EpochMs }
  | { readonly acquired: false; readonly holderId: string; readonly retryAfterMs: number };

/** Exclusive locks with an owner and a TTL (e.g. one pooled session serves one job at a time). */
export interface ExclusiveLocks {
  /** Takes the lock when free; the current owner calling again refreshes its TTL (re-entrant). */
  tryAcquire(key: string, ownerId: string, ttlMs: number): Promise<LockAttempt>;
  /** Only the owner renews; false when the lock is not (or no longer) held by `ownerId`. */
  renew(key: string, ownerId: string, ttlMs: number): Promise<boolean>;
  /** Only the owner releases; false when the lock is not held by `ownerId`. */
  release(key: string, ownerId: string): Promise<boolean>;
  holder(key: string): Promise<string | null>;
}

/** String values that expire (affinity map, single-use tokens, reservations). */
export interface ExpiringValues {
  set(key: string, value: string, ttlMs: number): Promise<void>;
  /** Stores the value only when the key holds none; true when it was stored. */
  setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean>;
  get(key: string): Promise<string | null>;
  /** Reads and deletes in one step: of N concurrent takers exactly one gets the value. */
  take(key: string): Promise<string | null>;
  delete(key: string): Promise<boolean>;
  /** Deletes only while the key still holds `expected` (releasing what the caller itself reserved). */
  compareAndDelete(key: string, expected: string): Promise<boolean>;
}

export interface CounterIncrementOptions {
  /** Expiry of the whole counter record, set when the record has none yet (so later increments keep it). */
  readonly ttlMs?: number;
}

/** Records of named signed 64-bit counters; overflow is refused, never wrapped. */
export interface Counters {
  /** Adds `by` (default 1) to one field and returns the field's new value. */
  increment(
    key: string,
    field: string,
    by?: bigint | number,
    options?: CounterIncrementOptions,
  ): Promise<bigint>;
  /** Every field of the record; `{}` when there is none. */
  get(key: string): Promise<Record<string, bigint>>;
  delete(key: string): Promise<boolean>;
}

/** A tally's sealed counts, handed out for delivery and kept in the store until acknowledged. */
export interface TallyBatch {
  /** Unique per batch and kept by every redelivery of it, so the receiver can count a batch once. */
  readonly batchId: string;
  /** Count per field (each one positive). */
  readonly counts: Readonly<Record<string, bigint>>;
}

export interface TallyClaimOptions {
  /**
   * How long the claim keeps other claimants off the batch, so one delivery is under way at a time; the
   * claimant itself may claim it again at any time (a retry). A claimant that vanished frees it at this TTL.
   */
  readonly claimTtlMs: number;
  /** Most fields sealed into a new batch (default 1000); the rest stay open for the next one. */
  readonly maxFields?: number;
}

/** What a tally has not yet handed over of some fields (see `Tallies.pending`). */
export interface TallyPending {
  /** Open counts of the fields asked for; a field with none is left out. */
  readonly open: Readonly<Record<string, bigint>>;
  /**
   * The sealed batch, claimed or not, with its counts of the fields asked for; null when no batch is sealed
   * or it holds none of them. Until it is acknowledged, its receiver may or may not have applied it already:
   * a reader adding these counts to the receiver's totals asks the receiver whether it applied `batchId`.
   */
  readonly sealed: TallyBatch | null;
}

/**
 * Counts taken on a hot path as single atomic increments and delivered to their system of record in
 * aggregates (limit hits: one increment per refusal, one key-service call per flush). A tally holds open
 * counts and at most one sealed batch. Delivery is at least once, under the batch's id: the receiver applies
 * a batch id once. Nothing expires, so nothing counted is lost while the receiver is down.
 */
export interface Tallies {
  /** Adds `by` (default 1, positive) to `field` of the tally's open counts. */
  add(tally: string, field: string, by?: bigint | number): Promise<void>;
  /**
   * The batch to deliver, now claimed by `claimant`: the sealed batch when there is one, else the open counts
   * (up to `maxFields` of them) sealed into a new batch under a fresh id, in the same atomic step, so every
   * increment lands in exactly one batch. null when there is nothing to deliver, or when the sealed batch is
   * claimed by another claimant whose claim is live.
   */
  claim(tally: string, claimant: string, options: TallyClaimOptions): Promise<TallyBatch | null>;
  /** Drops the sealed batch once delivered; false when `batchId` is not (or no longer) the sealed batch. */
  acknowledge(tally: string, batchId: string): Promise<boolean>;
  /**
   * What `fields` hold that was not yet acknowledged: their open counts and their counts in the sealed batch,
   * read in one atomic step, so every increment not yet acknowledged is seen exactly once (open or sealed).
   * Changes nothing; no claim is needed.
   */
  pending(tally: string, fields: readonly string[]): Promise<TallyPending>;
}

/** Position of a frame in its stream; opaque to callers, ordered by append. */
export type FrameCursor = string;

export interface Frame {
  readonly cursor: FrameCursor;
  readonly dedupId: string;
  readonly payload: Uint8Array;
}

export interface FrameAppendResult {
  /** false when a frame with the same dedup id was appended before; nothing was appended then. */
  readonly appended: boolean;
  /** Cursor of the frame holding this dedup id (the earlier one for a duplicate). */
  readonly cursor: FrameCursor;
}

export interface FrameReadOptions {
  /** Wait up to this long for a frame when none is there yet; 0 (default) returns at once. */
  readonly blockMs?: number;
  /** Most frames returned by one read (default 100). */
  readonly count?: number;
}

/** Per-job append-only frame streams, read from the start by whichever replica serves the request. */
export interface FrameStreams {
  /** Appends unless `dedupId` is already in the stream (checked and written in one step). */
  append(streamKey: string, dedupId: string, payload: Uint8Array): Promise<FrameAppendResult>;
  /** Frames after `after` (null: from the start), oldest first; may block, see options. */
  read(streamKey: string, after: FrameCursor | null, options?: FrameReadOptions): Promise<Frame[]>;
  /** Drops the stream and its dedup ids `ttlMs` from now; false when the stream does not exist. */
  expire(streamKey: string, ttlMs: number): Promise<boolean>;
}

export interface PresenceEntry {
  readonly member: string;
  readonly value: string;
  readonly expiresAtMs: EpochMs;
}

/** Members of a group that announced themselves recently (worker presence with models and capacity). */
export interface Presence {
  /** Adds or refreshes a member with its value, live for `ttlMs`. */
  announce(group: string, member: string, value: string, ttlMs: number): Promise<void>;
  /** Live members, sorted by member. */
  list(group: string): Promise<PresenceEntry[]>;
  withdraw(group: string, member: string): Promise<boolean>;
}

/** Position of an entry in its queue; opaque to callers, ordered by push. */
export type QueueEntryId = string;

export interface QueuedEntry {
  readonly id: QueueEntryId;
  readonly payload: Uint8Array;
}

/**
 * Durable first-in first-out queues, kept until their entries are removed (nothing expires): an outbox
 * of events a relay hands on to the bus, so an event outlives the replica that queued it and an outage of
 * the bus. Pushes that follow one another (each awaited) keep their order for every reader.
 */
export interface Queues {
  /**
   * Appends `payload` at the tail. With `maxLength`, refuses (null, nothing added) while the queue holds
   * that many entries or more, in the same atomic step; without it, always appends.
   */
  push(queue: string, payload: Uint8Array, maxLength?: number): Promise<QueueEntryId | null>;
  /** Up to `count` entries from the head, oldest first, left in the queue. */
  peek(queue: string, count: number): Promise<QueuedEntry[]>;
  /** Removes these entries (once handed on); ids no longer there are ignored. Returns how many it removed. */
  remove(queue: string, ids: readonly QueueEntryId[]): Promise<number>;
  /** Entries in the queue. */
  length(queue: string): Promise<number>;
}

/** Transaction nonces of one account shared by several replicas that send from it. */
export interface NonceAllocator {
  /**
   * Hands out the next nonce: never one handed out before (until `reset`), never below
   * `chainNonceFloor` (the pending nonce the caller read from the chain).
   */
  allocate(account: string, chainNonceFloor: number): Promise<number>;
  /** Recovery: the next `allocate` hands out `nextNonce` (or the floor, when higher). */
  reset(account: string, nextNonce: number): Promise<void>;
  /** The nonce the next `allocate` would hand out, floor aside; null when none was allocated yet. */
  peek(account: string): Promise<number | null>;
}

/** A rate window to count one hit on: the arguments of `RateWindows.hit`, which counts under the same keys. */
export interface RateWindowHit {
  readonly key: string;
  readonly limit: number;
  readonly windowMs: number;
}

/** The two windows of `RevocationMarkers.hitByMarker`: which one counts depends on the marker. */
export interface MarkerHitWindows {
  /** Counted when the id is not marked (an API key's own rate window). */
  readonly ifClear: RateWindowHit;
  /** Counted when the id is marked (the caller's window of failed keys). */
  readonly ifMarked: RateWindowHit;
}

export interface MarkerHitOutcome {
  readonly marked: boolean;
  /** The hit on the window the marker chose, exactly as `RateWindows.hit` would have answered it. */
  readonly verdict: RateWindowVerdict;
}

/** Permanent revocation markers, written before a revocation is acknowledged and read on every request. */
export interface RevocationMarkers {
  mark(id: string): Promise<void>;
  isMarked(id: string): Promise<boolean>;
  /** The ids among `ids` that are marked. */
  markedAmong(ids: readonly string[]): Promise<Set<string>>;
  /**
   * Reads `id`'s marker and counts one hit on `windows.ifMarked` when it is set, on `windows.ifClear` when it
   * is not, in one atomic step: `isMarked` followed by `RateWindows.hit` on the window it picks, in one round
   * trip (what the gateway does for every `/v1` call of a known key). The window it does not pick is left
   * untouched.
   */
  hitByMarker(id: string, windows: MarkerHitWindows): Promise<MarkerHitOutcome>;
}

/**
 * Messages to whoever listens now, on any replica: nothing is kept, a message nobody hears is gone (a hint
 * to a worker whose link another replica holds, never the only copy of a fact).
 */
export interface Channels {
  /** Delivers `payload` to every current subscriber of `channel` (on every replica), at most once each. */
  publish(channel: string, payload: Uint8Array): Promise<void>;
  /**
   * Calls `onMessage` with each payload published on `channel` from when the returned promise resolves
   * until the returned unsubscribe function is called (and awaited). Messages arrive in the order published
   * by one publisher. A connection lost and regained loses what was published meanwhile (nothing is kept).
   * `onMessage` runs outside the publisher's call and should not throw: an error it throws is rethrown on
   * its own (an uncaught exception, as from an event listener), and other subscribers still get the message.
   * The unsubscribe function never rejects, and may be called more than once, or after `close()`.
   */
  subscribe(channel: string, onMessage: (payload: Uint8Array) => void): Promise<() => Promise<void>>;
}

export interface Store {
  readonly rateWindows: RateWindows;
  readonly concurrency: ConcurrencyLeases;
  readonly locks: ExclusiveLocks;
  readonly values: ExpiringValues;
  readonly counters: Counters;
  readonly tallies: Tallies;
  readonly frames: FrameStreams;
  readonly queues: Queues;
  readonly presence: Presence;
  readonly nonces: NonceAllocator;
  readonly revocations: RevocationMarkers;
  readonly channels: Channels;
  /** Resolves when the store answers; rejects with a StoreError otherwise (health checks). */
  ping(): Promise<void>;
  /**
   * Releases connections and drops every subscription; pending blocking reads and subscribes, and later
   * calls, reject with StoreClosedError.
   */
  close(): Promise<void>;
}
