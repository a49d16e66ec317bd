-- A reservation whose job was refunded on chain ends 'refunded': nothing is spent, even when the gateway
-- committed it at delivery (a fast-path answer whose worker never committed it, a dispute won afterwards),
-- and no commit arriving later counts it again.
ALTER TABLE "spend_reservations" DROP CONSTRAINT "spend_reservations_state_check";
ALTER TABLE "spend_reservations" ADD CONSTRAINT "spend_reservations_state_check"
    CHECK ("state" IN ('held', 'committed', 'released', 'refunded'));
