-- Per-table consumer options (SPEC E1), indexes for fences, expiration,
-- operator listings and pruning.

-- The one clock every deadline and expiry is judged by. Tests replace it in
-- their own schema to move time; it is inlined, so it costs what now() costs.
CREATE FUNCTION tidemark_now() RETURNS timestamptz LANGUAGE sql STABLE AS 'SELECT now()';

CREATE TABLE table_options (
    table_name      text        PRIMARY KEY,
    -- consumer.expiration-time in microseconds; NULL = consumers never expire.
    expiration_us   bigint      CHECK (expiration_us IS NULL OR expiration_us > 0),
    changelog_only  boolean     NOT NULL DEFAULT false,
    mode            text        CHECK (mode IS NULL OR mode IN ('exactly-once', 'at-least-once')),
    version         bigint      NOT NULL,
    updated_at      timestamptz NOT NULL,
    updated_by      text        NOT NULL
);

-- Full-scan pins of live leases, lowest first (E5).
CREATE INDEX consumer_keys_by_pin
    ON consumer_keys (table_name, branch, full_scan_pin, consumer_id)
    WHERE full_scan_pin IS NOT NULL;

-- The sweeper looks for the longest-idle consumers of tables with an
-- expiration time.
CREATE INDEX consumer_keys_by_idle
    ON consumer_keys (table_name, consumer_updated_at)
    WHERE next_snapshot IS NOT NULL;

-- ListHistory by table, and pruning by age.
CREATE INDEX history_by_table ON history (table_name, id);
CREATE INDEX history_by_time ON history (at);
CREATE INDEX lease_grants_by_time ON lease_grants (granted_at);
