-- Batches of limit hits counted into api_keys (RecordLimitHits). A batch id is inserted in the same
-- transaction as its increments, so a batch delivered again adds nothing. Pruned with the limit-hit
-- report ids (LIMIT_HIT_REPORT_RETENTION).

-- CreateTable
CREATE TABLE "limit_hit_batches" (
    "batch_id" VARCHAR(128) NOT NULL,
    "applied_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "limit_hit_batches_pkey" PRIMARY KEY ("batch_id")
);

-- CreateIndex
CREATE INDEX "limit_hit_batches_applied_at_idx" ON "limit_hit_batches"("applied_at");
