-- Kept in step with Postgres' 0007 (the gauge collector's row claim behind
-- a transaction pooler). An embedded SQLite server is its own only
-- collector and never reads it.
CREATE TABLE IF NOT EXISTS collector_lease (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    holder BLOB NOT NULL,
    until INTEGER NOT NULL
);
