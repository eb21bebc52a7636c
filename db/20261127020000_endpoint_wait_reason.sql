-- Why an endpoint waits while its phase is REQUESTING_VIRTUAL_MACHINE ("waiting for 1 × H100: 2 of 2 in use", or a
-- cluster scheduler's message); cleared with any other phase.
ALTER TABLE endpoints ADD COLUMN wait_reason text;
