import { PrismaPg } from '@prisma/adapter-pg';
import type { DatabaseConnection } from '@svc/runtime';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import { Prisma, PrismaClient } from '../gen/prisma/client.js';

export { Prisma, PrismaClient };
export type Transaction = Prisma.TransactionClient;

export interface DatabaseSettings {
  /** A PostgreSQL server by URL, or the embedded PGlite of this process. */
  readonly connection: string | DatabaseConnection;
  /** Most connections to a server (the embedded database is one connection). */
  readonly poolSize: number;
  /** Told about errors of idle pooled connections (the pool replaces them by itself). */
  readonly onConnectionError?: (error: Error) => void;
}

/**
 * How long a transaction may wait for a connection and run. Bursts (50 mints of one wallet at once) queue
 * for the pool and for the wallet lock, so the waits are generous; every transaction here is a few statements.
 */
export const TRANSACTION_OPTIONS = { maxWait: 15_000, timeout: 20_000 } as const;

/** A Prisma client over node-postgres with a bounded pool, or over the embedded PGlite. */
export function openDatabase(settings: DatabaseSettings): PrismaClient {
  const { connection } = settings;
  if (typeof connection !== 'string' && connection.kind === 'embedded') {
    return new PrismaClient({
      adapter: new PrismaPGlite(connection.pglite),
      transactionOptions: TRANSACTION_OPTIONS,
    });
  }
  const adapter = new PrismaPg(
    {
      connectionString: typeof connection === 'string' ? connection : connection.url,
      max: settings.poolSize,
    },
    { onPoolError: settings.onConnectionError, onConnectionError: settings.onConnectionError },
  );
  return new PrismaClient({ adapter, transactionOptions: TRANSACTION_OPTIONS });
}

/** Runs `work` in one transaction (READ COMMITTED: the conditional updates below re-check their rows). */
export function inTransaction<T>(db: PrismaClient, work: (tx: Transaction) => Promise<T>): Promise<T> {
  return db.$transaction(work, TRANSACTION_OPTIONS);
}
