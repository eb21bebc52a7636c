-- Users, their API keys (only a SHA-256 hash of each key is stored), teams and membership.
CREATE TABLE users (
  id            text PRIMARY KEY,
  email         text NOT NULL UNIQUE,
  name          text NOT NULL,
  is_admin      boolean NOT NULL DEFAULT false,
  default_team_id text,
  created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE teams (
  id          text PRIMARY KEY,
  name        text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE users ADD CONSTRAINT users_default_team_fk
  FOREIGN KEY (default_team_id) REFERENCES teams (id) ON DELETE SET NULL;

CREATE TABLE team_members (
  team_id     text NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
  user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role        text NOT NULL CHECK (role IN ('OWNER', 'MEMBER')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (team_id, user_id)
);
CREATE INDEX team_members_user_idx ON team_members (user_id);

CREATE TABLE api_keys (
  id            text PRIMARY KEY,
  user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name          text NOT NULL,
  -- the first characters of the key, shown in listings so a user can tell keys apart
  prefix        text NOT NULL,
  key_hash      bytea NOT NULL UNIQUE,
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz,
  revoked_at    timestamptz
);
CREATE INDEX api_keys_user_idx ON api_keys (user_id);

CREATE TABLE projects (
  id          text PRIMARY KEY,
  team_id     text NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
  name        text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX projects_team_idx ON projects (team_id);

-- An endpoint holds its observed status and its desired state; the spec of each
-- version lives in endpoint_versions, and current_version points at the newest.
CREATE TABLE endpoints (
  id                   text PRIMARY KEY,
  seq                  bigserial NOT NULL UNIQUE,
  project_id           text NOT NULL REFERENCES projects (id),
  team_id              text NOT NULL REFERENCES teams (id),
  creator_id           text NOT NULL REFERENCES users (id),
  current_version      integer NOT NULL DEFAULT 0,
  status               text NOT NULL,
  phase                text,
  error_code           text,
  desired_state        text NOT NULL,
  curr_replica_cnt     integer NOT NULL DEFAULT 0,
  desired_replica_cnt  integer NOT NULL DEFAULT 0,
  updated_replica_cnt  integer NOT NULL DEFAULT 0,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  deleted_at           timestamptz
);
CREATE INDEX endpoints_project_idx ON endpoints (project_id, seq) WHERE deleted_at IS NULL;
CREATE INDEX endpoints_team_idx ON endpoints (team_id, seq) WHERE deleted_at IS NULL;

CREATE TABLE endpoint_versions (
  endpoint_id                   text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  version_index                 integer NOT NULL,
  name                          text NOT NULL,
  instance_id                   text NOT NULL,
  hf_model_repo                 text NOT NULL,
  hf_model_repo_revision        text,
  autoscaling_min               integer NOT NULL,
  autoscaling_max               integer NOT NULL,
  autoscaling_cooldown          integer NOT NULL,
  max_batch_size                integer NOT NULL,
  max_token_count               integer NOT NULL,
  max_input_length              integer NOT NULL,
  tokenizer_skip_special_tokens boolean NOT NULL,
  tokenizer_add_special_tokens  boolean NOT NULL,
  enable_content_logging        boolean NOT NULL,
  comment                       text,
  -- RECORDED until a rollout applies it; ROLLED_OUT or FAILED afterwards
  rollout_state                 text NOT NULL DEFAULT 'RECORDED',
  rolled_back_from              integer,
  creator_id                    text NOT NULL REFERENCES users (id),
  created_at                    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (endpoint_id, version_index)
);

-- Append-only: every status or phase change, every new version, creation and deletion.
CREATE TABLE endpoint_events (
  id             bigserial PRIMARY KEY,
  endpoint_id    text NOT NULL,
  project_id     text NOT NULL,
  team_id        text NOT NULL,
  type           text NOT NULL,
  status         text,
  phase          text,
  error_code     text,
  version_index  integer,
  cause          text NOT NULL,
  actor_id       text,
  detail         jsonb,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX endpoint_events_endpoint_idx ON endpoint_events (endpoint_id, id);
CREATE INDEX endpoint_events_project_idx ON endpoint_events (project_id, id);
