-- API keys, their spend reservations, limit-hit reports and the key event outbox.
-- Money is numeric(78,0): every uint256 fits, and no float ever touches an amount.

-- CreateTable
CREATE TABLE "api_keys" (
    "id" UUID NOT NULL,
    "mint_sequence" BIGSERIAL NOT NULL,
    "wallet" VARCHAR(42) NOT NULL,
    "key_hash" BYTEA NOT NULL,
    "prefix" VARCHAR(11) NOT NULL,
    "name" VARCHAR(64) NOT NULL,
    "spend_cap_wei" DECIMAL(78,0),
    "spent_wei" DECIMAL(78,0) NOT NULL DEFAULT 0,
    "reserved_wei" DECIMAL(78,0) NOT NULL DEFAULT 0,
    "rate_hits" BIGINT NOT NULL DEFAULT 0,
    "concurrency_hits" BIGINT NOT NULL DEFAULT 0,
    "spend_cap_hits" BIGINT NOT NULL DEFAULT 0,
    "session_open_hits" BIGINT NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "revoked_at" TIMESTAMPTZ(6),
    "deleted_at" TIMESTAMPTZ(6),

    CONSTRAINT "api_keys_pkey" PRIMARY KEY ("id"),
    -- Wallets are stored lowercase so equality is a plain comparison.
    CONSTRAINT "api_keys_wallet_check" CHECK ("wallet" ~ '^0x[0-9a-f]{40}$'),
    CONSTRAINT "api_keys_amounts_check" CHECK (
        "spent_wei" >= 0 AND "reserved_wei" >= 0 AND ("spend_cap_wei" IS NULL OR "spend_cap_wei" >= 0)
    ),
    -- A deleted key is a tombstone of a revoked one.
    CONSTRAINT "api_keys_deleted_after_revoked_check" CHECK ("deleted_at" IS NULL OR "revoked_at" IS NOT NULL)
);

-- CreateTable
CREATE TABLE "spend_reservations" (
    "id" UUID NOT NULL,
    "key_id" UUID NOT NULL,
    "request_id" VARCHAR(128) NOT NULL,
    "amount_wei" DECIMAL(78,0) NOT NULL,
    "charged_wei" DECIMAL(78,0),
    "state" VARCHAR(16) NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(6) NOT NULL,
    "settled_at" TIMESTAMPTZ(6),
    "settled_by" VARCHAR(16),

    CONSTRAINT "spend_reservations_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "spend_reservations_state_check" CHECK ("state" IN ('held', 'committed', 'released')),
    CONSTRAINT "spend_reservations_amounts_check" CHECK (
        "amount_wei" >= 0 AND ("charged_wei" IS NULL OR ("charged_wei" >= 0 AND "charged_wei" <= "amount_wei"))
    )
);

-- CreateTable
CREATE TABLE "limit_hit_reports" (
    "key_id" UUID NOT NULL,
    "kind" VARCHAR(16) NOT NULL,
    "request_id" VARCHAR(128) NOT NULL,
    "reported_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "limit_hit_reports_pkey" PRIMARY KEY ("key_id","kind","request_id")
);

-- CreateTable
CREATE TABLE "key_event_outbox" (
    "sequence" BIGSERIAL NOT NULL,
    "event_id" UUID NOT NULL,
    "wallet" VARCHAR(42) NOT NULL,
    "payload" BYTEA NOT NULL,
    "request_id" VARCHAR(128),
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "published_at" TIMESTAMPTZ(6),

    CONSTRAINT "key_event_outbox_pkey" PRIMARY KEY ("sequence")
);

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_key_hash_key" ON "api_keys"("key_hash");

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_mint_sequence_key" ON "api_keys"("mint_sequence");

-- CreateIndex
CREATE INDEX "api_keys_wallet_mint_sequence_idx" ON "api_keys"("wallet", "mint_sequence" DESC);

-- CreateIndex
CREATE UNIQUE INDEX "spend_reservations_key_id_request_id_key" ON "spend_reservations"("key_id", "request_id");

-- CreateIndex: the sweeper's scan of lapsed holds (not in schema.prisma: Prisma cannot express partial indexes)
CREATE INDEX "spend_reservations_held_expires_at_idx" ON "spend_reservations"("expires_at") WHERE "state" = 'held';

-- CreateIndex
CREATE INDEX "limit_hit_reports_reported_at_idx" ON "limit_hit_reports"("reported_at");

-- CreateIndex
CREATE UNIQUE INDEX "key_event_outbox_event_id_key" ON "key_event_outbox"("event_id");

-- CreateIndex: the relay's scan of unpublished events (partial, as above)
CREATE INDEX "key_event_outbox_pending_idx" ON "key_event_outbox"("sequence") WHERE "published_at" IS NULL;

-- AddForeignKey
ALTER TABLE "spend_reservations" ADD CONSTRAINT "spend_reservations_key_id_fkey" FOREIGN KEY ("key_id") REFERENCES "api_keys"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
