-- Emails name one user whatever their case. The services store them
-- normalized (lower-cased: normalizeEmail in src/domain/identity.ts); the
-- unique index on lower(email) holds for every writer, plain SQL included.
--
-- Users whose emails already differ only in case cannot be merged here (each
-- has their own keys, teams and endpoints): the migration refuses, naming
-- them, and the gateway does not start until an operator renames or deletes
-- one user of each pair. Nothing is changed by the refusal.
DO $$
DECLARE
  clashes text;
BEGIN
  SELECT string_agg(pair, '; ') INTO clashes FROM (
    SELECT string_agg(format('%s (%s)', email, id), ', ' ORDER BY created_at, id) AS pair
    FROM users GROUP BY lower(trim(email)) HAVING count(*) > 1
  ) c;
  IF clashes IS NOT NULL THEN
    RAISE EXCEPTION 'emails must be unique whatever their case, and these users share one: %', clashes
      USING HINT = 'give one user of each group another email (UPDATE users SET email = ''…'' WHERE id = ''usr_…'') or delete it, then start again';
  END IF;
END $$;

UPDATE users SET email = lower(trim(email)) WHERE email <> lower(trim(email));
CREATE UNIQUE INDEX users_email_lower_key ON users (lower(email));

-- Invitations. A team owner (not an admin) who adds someone not yet in the
-- team records an invitation; it grants nothing (no row in team_members, so
-- no access, no models, no team header) until the invitee accepts it, which
-- turns it into a team_members row. `invitee` is what the owner typed (a user
-- id, or a normalized email), whether or not such a user exists, so that
-- adding tells the owner nothing about other users; an invitation to an email
-- nobody has yet waits for a user created with it. Existing team_members rows
-- are members already: nothing here touches them.
CREATE TABLE team_invitations (
  id          text PRIMARY KEY,
  team_id     text NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
  invitee     text NOT NULL,
  role        text NOT NULL CHECK (role IN ('OWNER', 'MEMBER')),
  invited_by  text REFERENCES users (id) ON DELETE SET NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (team_id, invitee)
);
CREATE INDEX team_invitations_invitee_idx ON team_invitations (invitee);
