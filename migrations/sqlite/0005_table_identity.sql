-- SPEC §9: a registered table's identity (a digest of its first schema
-- file), so a table dropped and recreated under the same name is told apart.
-- NULL for registrations made before this column existed (filled in at the
-- next recovery on the table).
ALTER TABLE paimon_tables ADD COLUMN identity TEXT;
