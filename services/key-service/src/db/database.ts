import { PrismaPg } from '@prisma/adapter-pg';
import { Prisma, PrismaClient } from '../gen/prisma/client.js';

export { Prisma, PrismaClient };
export type Transaction = Prisma.TransactionClient;

export interface DatabaseSettings {
  readonly url: string;
  readonly poolSize: number;
  /** Told about errors of idle pooled connections (the pool replaces them by itself). */
  readonly onConnectionError?: (error: Error) => void;
}

/**
 * How long a transaction may wait for a connection and run. Bursts (50 mints of one wallet at once) queue
 * for the pool and for the wallet lock, so the waits are generous; every transaction here is a few statements.
 */
export const TRANSACTION_OPTIONS = { maxWait: 15_000, timeout: 20_000 } as const;

/** A Prisma client over node-postgres with a bounded pool. */
export function openDatabase(settings: DatabaseSettings): PrismaClient {
  const adapter = new PrismaPg(
    { connectionString: settings.url, max: settings.poolSize },
    { onPoolError: settings.onConnectionError, onConnectionError: settings.onConnectionError },
  );
  return new PrismaClient({ adapter, transactionOptions: TRANSACTION_OPTIONS });
}

/** Runs `work` in one transaction (READ COMMITTED: the conditional updates below re-check their rows). */
export function inTransaction<T>(db: PrismaClient, work: (tx: Transaction) => Promise<T>): Promise<T> {
  return db.$transaction(work, TRANSACTION_OPTIONS);
}
