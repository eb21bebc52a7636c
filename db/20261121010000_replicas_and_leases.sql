-- Replicas: one row per engine process the controller started, so that any
-- gateway process can route to it, and a restarted gateway can re-adopt it.
CREATE TABLE replicas (
  id             text PRIMARY KEY,
  endpoint_id    text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  version_index  integer NOT NULL,
  -- which runtime and which machine run it
  runtime        text NOT NULL,
  node           text NOT NULL,
  gpu_type       text NOT NULL,
  num_gpu        integer NOT NULL,
  -- STARTING, READY, DRAINING, STOPPED, FAILED
  state          text NOT NULL,
  address        text,
  pid            integer,
  last_error     text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  ready_at       timestamptz,
  stopped_at     timestamptz
);
CREATE INDEX replicas_live_idx ON replicas (endpoint_id) WHERE state IN ('STARTING', 'READY', 'DRAINING');
CREATE INDEX replicas_node_idx ON replicas (node, gpu_type) WHERE state IN ('STARTING', 'READY', 'DRAINING');

-- Exactly one gateway process acts on an endpoint at a time: the holder of
-- its lease, which it renews while alive; an expired lease may be taken.
CREATE TABLE endpoint_leases (
  endpoint_id  text PRIMARY KEY REFERENCES endpoints (id) ON DELETE CASCADE,
  owner        text NOT NULL,
  expires_at   timestamptz NOT NULL
);

-- Download progress while in DOWNLOADING_MODEL: { "bytesDone": n, "bytesTotal": n }.
ALTER TABLE endpoints ADD COLUMN progress jsonb;
-- Set once the controller has stopped every replica of a deleted endpoint.
ALTER TABLE endpoints ADD COLUMN cleaned_at timestamptz;
-- Idle tracking for the autoscaler: the last time a request reached the endpoint.
ALTER TABLE endpoints ADD COLUMN last_request_at timestamptz;

-- What a version resolved to when it was first started: commit, file and digest.
ALTER TABLE endpoint_versions ADD COLUMN model jsonb;
