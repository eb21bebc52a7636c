-- Why a request ended without a complete answer, when it did: e.g. 'upstream_disconnected'
-- when the replica serving it stopped mid-answer. Null for answers that completed.
ALTER TABLE request_log ADD COLUMN error_code text;
