-- The replicas that ended (STOPPED, FAILED) are an endpoint's history, and they pile up: every scale-in, restart,
-- update and crash leaves one. Their reads are by endpoint and by when they ended: the crash policy's count of recent
-- deaths (before every scale-out and after every death), the replicas' view of those that ended lately, an endpoint's
-- recent failures. Without this index each of them scanned every endpoint's replicas.
CREATE INDEX replicas_ended_idx ON replicas (endpoint_id, (coalesce(stopped_at, created_at))) WHERE state IN ('STOPPED', 'FAILED');
-- Built in the migration's transaction, as every index here: writes to replicas wait while it builds (a second or so
-- per million rows).
