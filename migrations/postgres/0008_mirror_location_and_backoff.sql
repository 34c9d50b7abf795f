-- Expand only (a release before this one keeps working on it): each mirror
-- record says where its file was written, so a record from a round that
-- read a table's previous location never counts for the new one; and a
-- failing record waits before its next attempt, longer after each failure.
--
-- location: the table location the file was written at; NULL for records
--   written by a release before this one (taken as the current location).
-- retry_at: after a failed attempt, when the mirror may try again; NULL
--   once written.
ALTER TABLE consumer_mirrors ADD COLUMN IF NOT EXISTS location text;
ALTER TABLE consumer_mirrors ADD COLUMN IF NOT EXISTS retry_at timestamptz;
