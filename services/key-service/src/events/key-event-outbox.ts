import { randomUUID } from 'node:crypto';
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { currentRequestId } from '@svc/platform';
import { KeyEventKind, KeyEventSchema } from '@svc/proto/gen/svc/events/v1/key_event_pb';
import type { Transaction } from '../db/database.js';
import type { WalletAddress } from '../wallet/wallet-address.js';

export { KeyEventKind };

/** One change to one key, as the outbox records it. */
export interface KeyChange {
  readonly kind: KeyEventKind;
  readonly wallet: WalletAddress;
  readonly keyId: string;
  readonly prefix: string;
  /** On minted and cap changed: the cap now in force (null: none). */
  readonly spendCapWei?: bigint | null;
}

/**
 * Writes the change's `KeyEvent` into the outbox inside the caller's transaction, so the change and its
 * event commit together or not at all; the relay publishes it afterwards.
 */
export async function recordKeyChange(tx: Transaction, change: KeyChange): Promise<void> {
  const eventId = randomUUID();
  const event = create(KeyEventSchema, {
    eventId,
    occurredAt: timestampFromDate(new Date()),
    wallet: { hex: change.wallet.checksummed },
    keyId: change.keyId,
    prefix: change.prefix,
    kind: change.kind,
    spendCapWei:
      change.spendCapWei === undefined || change.spendCapWei === null
        ? undefined
        : { decimal: change.spendCapWei.toString() },
  });
  await tx.keyEventOutbox.create({
    data: {
      eventId,
      wallet: change.wallet.lowercase,
      payload: Buffer.from(toBinary(KeyEventSchema, event)),
      requestId: currentRequestId() ?? null,
    },
  });
}
