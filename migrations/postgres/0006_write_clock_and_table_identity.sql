-- SPEC §1: a deadline is judged by the database clock read at the moment of
-- the write, after the row's lock is taken (a write that waited on a lock
-- must not be judged by the time it started). Volatile, so each statement
-- reads it where it is called; tests replace it in their own schema, like
-- tidemark_now().
CREATE FUNCTION tidemark_write_now() RETURNS timestamptz LANGUAGE sql VOLATILE AS 'SELECT clock_timestamp()';

-- SPEC §9: a registered table's identity (a digest of its first schema
-- file), so a table dropped and recreated under the same name is told apart.
-- NULL for registrations made before this column existed (filled in at the
-- next recovery on the table).
ALTER TABLE paimon_tables ADD COLUMN identity text;
