-- Expand/contract mend for 20261126000000_invitation_expiry.sql, which made `expires_at` NOT NULL with no default: the
-- release before it inserts invitations without the column, and during a rolling upgrade its gateways answered 500
-- (a not-null violation) to every invite. With this default such an invitation gets the lifetime the code gives one
-- (INVITATION_TTL_DAYS in src/domain/identity.ts, 14 days); the code itself always writes the column.
ALTER TABLE team_invitations ALTER COLUMN expires_at SET DEFAULT now() + interval '14 days';
