-- A failed endpoint's message for its user, beside its error code: what went
-- wrong and what to do about it (never internals). Written by the controller
-- with the status; shown only while error_code is set.
ALTER TABLE endpoints ADD COLUMN error_message text;

-- Token limits that were not given follow the model: max_token_count becomes
-- the model's context (bounded by the instance's memory), max_input_length
-- min(2048, max_token_count). The values stored are placeholders until the
-- controller first reads the model, which then writes the resolved values.
ALTER TABLE endpoint_versions
  ADD COLUMN max_token_count_auto boolean NOT NULL DEFAULT false,
  ADD COLUMN max_input_length_auto boolean NOT NULL DEFAULT false;
