-- The usage history of /v1 calls (GET /api/usage), one row per call, written from job lifecycle events.
-- The call id (the event key) is the primary key and every event of a call merges into its row with one
-- upsert, so a redelivered event, or the same fact from two publishers, leaves the row as it was.

-- CreateTable
CREATE TABLE "usage_calls" (
    "call_id" VARCHAR(128) NOT NULL,
    "called_at" TIMESTAMPTZ(3) NOT NULL,
    "has_requested" BOOLEAN NOT NULL DEFAULT false,
    "payment_path" VARCHAR(16) NOT NULL,
    "payer" VARCHAR(42) NOT NULL,
    "key_id" VARCHAR(64),
    "model" VARCHAR(128) NOT NULL,
    "request_id" VARCHAR(128),
    "outcome" VARCHAR(64),
    "outcome_rank" SMALLINT NOT NULL DEFAULT 0,
    "job_id" VARCHAR(78),
    "attempt" INTEGER NOT NULL DEFAULT 0,
    "session_id" VARCHAR(78),
    "tx_hash" VARCHAR(66),
    "worker" VARCHAR(42),
    "escrowed_wei" DECIMAL(78,0),
    "charged_wei" DECIMAL(78,0),
    "refunded" BOOLEAN NOT NULL DEFAULT false,
    "dropped_messages" INTEGER NOT NULL DEFAULT 0,
    "first_output_ms" INTEGER,
    "duration_ms" INTEGER,
    "updated_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "usage_calls_pkey" PRIMARY KEY ("call_id")
);

-- CreateIndex
CREATE INDEX "usage_calls_key_id_called_at_idx" ON "usage_calls"("key_id", "called_at" DESC, "call_id" DESC);

-- CreateIndex
CREATE INDEX "usage_calls_payer_called_at_idx" ON "usage_calls"("payer", "called_at" DESC, "call_id" DESC);
