-- Endpoints from W&B registry artifacts. A version's model comes either from
-- a hub repository or from a registry artifact, never both.
ALTER TABLE endpoint_versions ALTER COLUMN hf_model_repo DROP NOT NULL;
ALTER TABLE endpoint_versions ADD COLUMN wandb_artifact text;
ALTER TABLE endpoint_versions ADD CONSTRAINT endpoint_versions_one_model_source
  CHECK ((hf_model_repo IS NULL) <> (wandb_artifact IS NULL));

-- A webhook automation calls again and again with one key: the key names one
-- live endpoint per project, enforced here rather than by check-then-insert.
ALTER TABLE endpoints ADD COLUMN idempotency_key text;
CREATE UNIQUE INDEX endpoints_idempotency_key_idx ON endpoints (project_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL AND deleted_at IS NULL;
