-- The gauge collector's claim behind a transaction pooler (--db-pooler
-- transaction), where a session-level advisory lock does not hold: one row,
-- held by one replica until `until`, renewed each gauge round.
CREATE TABLE IF NOT EXISTS collector_lease (
    id smallint PRIMARY KEY CHECK (id = 1),
    holder uuid NOT NULL,
    until timestamptz NOT NULL
);
