-- Invitations expire. One that waits too long (an invitation to an address
-- that changed hands, or was forgotten) is no longer listed and cannot be
-- accepted; inviting again gives a fresh one. Pending invitations keep the
-- time they had left, counted from when they were sent.
ALTER TABLE team_invitations ADD COLUMN expires_at timestamptz;
UPDATE team_invitations SET expires_at = created_at + interval '14 days';
ALTER TABLE team_invitations ALTER COLUMN expires_at SET NOT NULL;
