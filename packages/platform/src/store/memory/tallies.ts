import { randomUUID } from 'node:crypto';
import { StoreCommandError } from '../errors.js';
import type { Tallies, TallyBatch, TallyClaimOptions, TallyPending } from '../store.js';
import {
  DEFAULT_TALLY_BATCH_FIELDS,
  fitsInt64,
  requireKey,
  requirePositiveInteger,
  toTallyIncrement,
} from '../validation.js';
import type { MemoryContext } from './memory-context.js';

interface SealedBatch {
  readonly batchId: string;
  readonly counts: Map<string, bigint>;
  claim?: { readonly claimant: string; readonly expiresAtMs: number };
}

interface Tally {
  readonly open: Map<string, bigint>;
  sealed?: SealedBatch;
}

export class MemoryTallies implements Tallies {
  readonly #tallies = new Map<string, Tally>();

  constructor(private readonly context: MemoryContext) {}

  async add(tally: string, field: string, by: bigint | number = 1n): Promise<void> {
    requireKey('tally', tally);
    requireKey('field', field);
    const amount = toTallyIncrement(by);
    this.context.assertOpen('tallies.add');
    const entry = this.#entry(tally);
    const value = (entry.open.get(field) ?? 0n) + amount;
    // Same refusal as Redis HINCRBY: an overflowing increment changes nothing.
    if (!fitsInt64(value))
      throw new StoreCommandError('tallies.add', 'increment or decrement would overflow');
    entry.open.set(field, value);
  }

  async claim(tally: string, claimant: string, options: TallyClaimOptions): Promise<TallyBatch | null> {
    requireKey('tally', tally);
    requireKey('claimant', claimant);
    requirePositiveInteger('claimTtlMs', options.claimTtlMs);
    const maxFields = options.maxFields ?? DEFAULT_TALLY_BATCH_FIELDS;
    requirePositiveInteger('maxFields', maxFields);
    this.context.assertOpen('tallies.claim');
    const now = this.context.now();
    const entry = this.#tallies.get(tally);
    if (entry === undefined) return null;
    let sealed = entry.sealed;
    if (sealed !== undefined) {
      const { claim } = sealed;
      if (claim !== undefined && claim.claimant !== claimant && claim.expiresAtMs > now) return null;
    } else {
      if (entry.open.size === 0) return null;
      const counts = new Map<string, bigint>();
      for (const [field, value] of entry.open) {
        if (counts.size >= maxFields) break;
        counts.set(field, value);
      }
      for (const field of counts.keys()) entry.open.delete(field);
      sealed = { batchId: randomUUID(), counts };
      entry.sealed = sealed;
    }
    sealed.claim = { claimant, expiresAtMs: now + options.claimTtlMs };
    return { batchId: sealed.batchId, counts: Object.fromEntries(sealed.counts) };
  }

  async acknowledge(tally: string, batchId: string): Promise<boolean> {
    requireKey('tally', tally);
    requireKey('batchId', batchId);
    this.context.assertOpen('tallies.acknowledge');
    const entry = this.#tallies.get(tally);
    if (entry?.sealed?.batchId !== batchId) return false;
    entry.sealed = undefined;
    if (entry.open.size === 0) this.#tallies.delete(tally);
    return true;
  }

  async pending(tally: string, fields: readonly string[]): Promise<TallyPending> {
    requireKey('tally', tally);
    for (const field of fields) requireKey('field', field);
    this.context.assertOpen('tallies.pending');
    const entry = this.#tallies.get(tally);
    if (entry === undefined) return { open: {}, sealed: null };
    const open = countsOf(entry.open, fields);
    const sealedCounts = entry.sealed === undefined ? {} : countsOf(entry.sealed.counts, fields);
    const sealed =
      entry.sealed === undefined || Object.keys(sealedCounts).length === 0
        ? null
        : { batchId: entry.sealed.batchId, counts: sealedCounts };
    return { open, sealed };
  }

  #entry(tally: string): Tally {
    let entry = this.#tallies.get(tally);
    if (entry === undefined) {
      entry = { open: new Map() };
      this.#tallies.set(tally, entry);
    }
    return entry;
  }
}

function countsOf(counts: ReadonlyMap<string, bigint>, fields: readonly string[]): Record<string, bigint> {
  const found: Record<string, bigint> = {};
  for (const field of fields) {
    const value = counts.get(field);
    if (value !== undefined) found[field] = value;
  }
  return found;
}
