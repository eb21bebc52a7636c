-- Metrics, request activity and opt-in content logs.

-- Request activity pages newest first per endpoint; retention deletes by age.
CREATE INDEX request_log_endpoint_id_idx ON request_log (endpoint_id, id DESC);
CREATE INDEX request_log_started_at_idx ON request_log (started_at);

-- The messages and the whole answer of a request, written only when the
-- version that served it (and the endpoint's current version, at write time)
-- has enable_content_logging on. Deleting the endpoint deletes them (a trigger
-- on the soft delete below; the foreign key on a hard delete).
CREATE TABLE request_content (
  request_log_id  bigint PRIMARY KEY,
  endpoint_id     text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  version_index   integer NOT NULL,
  messages        jsonb NOT NULL,
  response        jsonb NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX request_content_endpoint_idx ON request_content (endpoint_id);
CREATE INDEX request_content_created_at_idx ON request_content (created_at);

CREATE FUNCTION request_content_forget_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM request_content WHERE endpoint_id = NEW.id;
  RETURN NEW;
END $$;
CREATE TRIGGER request_content_on_endpoint_delete
  AFTER UPDATE OF deleted_at ON endpoints
  FOR EACH ROW WHEN (NEW.deleted_at IS NOT NULL AND OLD.deleted_at IS NULL)
  EXECUTE FUNCTION request_content_forget_deleted();

-- Per endpoint and per minute (of the requests' completion): counts and sums
-- add up across gateway processes (each upserts its batches), latencies are
-- kept as fixed-bucket histograms (src/domain/latency-histogram.ts) that add
-- up too, so percentiles over any range are computed from summed buckets.
-- Replica counts are the largest sampled in the minute.
CREATE TABLE endpoint_metrics_minute (
  endpoint_id        text NOT NULL,
  minute             timestamptz NOT NULL,
  requests           integer NOT NULL DEFAULT 0,
  errors_4xx         integer NOT NULL DEFAULT 0,
  errors_5xx         integer NOT NULL DEFAULT 0,
  errors_cut         integer NOT NULL DEFAULT 0,
  cancelled          integer NOT NULL DEFAULT 0,
  prompt_tokens      bigint NOT NULL DEFAULT 0,
  completion_tokens  bigint NOT NULL DEFAULT 0,
  duration_sum_ms    double precision NOT NULL DEFAULT 0,
  duration_max_ms    double precision,
  ttft_count         integer NOT NULL DEFAULT 0,
  ttft_sum_ms        double precision NOT NULL DEFAULT 0,
  ttft_max_ms        double precision,
  ttft_hist          bigint[],
  tpot_count         integer NOT NULL DEFAULT 0,
  tpot_sum_ms        double precision NOT NULL DEFAULT 0,
  tpot_max_ms        double precision,
  tpot_hist          bigint[],
  queue_count        integer NOT NULL DEFAULT 0,
  queue_sum_ms       double precision NOT NULL DEFAULT 0,
  queue_max_ms       double precision,
  queue_hist         bigint[],
  replicas_current   integer,
  replicas_desired   integer,
  replicas_updated   integer,
  PRIMARY KEY (endpoint_id, minute)
);
CREATE INDEX endpoint_metrics_minute_minute_idx ON endpoint_metrics_minute (minute);

-- Element-wise sum of two bucket arrays (a missing one counts as zeros).
CREATE FUNCTION metrics_hist_add(a bigint[], b bigint[]) RETURNS bigint[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a ELSE
    ARRAY(SELECT coalesce(x, 0) + coalesce(y, 0) FROM unnest(a, b) WITH ORDINALITY AS u(x, y, i) ORDER BY i) END
$$;
CREATE AGGREGATE metrics_hist_sum(bigint[]) (SFUNC = metrics_hist_add, STYPE = bigint[]);
