-- `joined_at` was added to 20261205000000_controller_members.sql after that file had been applied (commit cf5a3e4):
-- a database that ran its first version never got the column, since a migration already applied is not run again.
-- Here it is added where it is missing, as that file's current text declares it (the file's other change then was
-- its comment). A member row already there counts as joined now: it counts for the others a lease's TTL later.
ALTER TABLE controller_members ADD COLUMN IF NOT EXISTS joined_at timestamptz NOT NULL DEFAULT now();
