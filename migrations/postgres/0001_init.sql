-- tidemark schema, Postgres flavour. Keep it portable to Postgres-compatible
-- distributed databases (CockroachDB, YugabyteDB): no advisory locks, no
-- LISTEN/NOTIFY, no triggers on the hot path.

-- One row per (table, branch, consumer_id), created on first use and never
-- deleted, so the epoch high-water mark survives consumer deletion and epochs
-- are never reused. The consumer record and the key's current (or last)
-- lease live in the same row: a commit is one conditional single-row update.
CREATE TABLE consumer_keys (
    table_name              text        NOT NULL,
    branch                  text        NOT NULL,
    consumer_id             text        NOT NULL,
    -- Bumped by every write; writers compare-and-set on it.
    version                 bigint      NOT NULL,
    -- Highest epoch ever issued or burned for the key.
    epoch                   bigint      NOT NULL,
    -- The consumer record; all NULL when the key has no consumer.
    next_snapshot           bigint,
    consumer_created_at     timestamptz,
    consumer_updated_at     timestamptz,
    -- Latest snapshot last reported by a worker, for lag.
    latest_snapshot         bigint,
    -- The current or last lease; all NULL when the key was never leased.
    lease_id                uuid,
    lease_holder            text,
    lease_epoch             bigint,
    lease_status            smallint,   -- 1 active, 2 released, 3 revoked
    lease_ttl_us            bigint,
    lease_acquired_at       timestamptz,
    lease_deadline          timestamptz,
    -- The lease's last committed batch (idempotent retries).
    last_batch_id           bigint,
    last_end_snapshot       bigint,
    last_end_index          bigint,
    last_end_full           boolean,
    last_end_total_splits   bigint,
    lease_wrote_consumer    boolean,
    legacy_warned_snapshot  bigint,
    -- Initial full-scan snapshot pinned by the live lease.
    full_scan_pin           bigint,
    PRIMARY KEY (table_name, branch, consumer_id),
    CONSTRAINT next_snapshot_positive CHECK (next_snapshot IS NULL OR next_snapshot >= 1),
    CONSTRAINT consumer_complete CHECK ((next_snapshot IS NULL) = (consumer_updated_at IS NULL)),
    CONSTRAINT epoch_covers_lease CHECK (lease_epoch IS NULL OR lease_epoch <= epoch)
);

-- Retention fences: min(next_snapshot) per branch.
CREATE INDEX consumer_keys_by_position
    ON consumer_keys (table_name, branch, next_snapshot, consumer_id)
    WHERE next_snapshot IS NOT NULL;

-- Every lease ever granted, so a superseded lease id still finds its key and
-- its caller learns the current epoch.
CREATE TABLE lease_grants (
    lease_id    uuid        PRIMARY KEY,
    table_name  text        NOT NULL,
    branch      text        NOT NULL,
    consumer_id text        NOT NULL,
    epoch       bigint      NOT NULL,
    holder      text        NOT NULL,
    granted_at  timestamptz NOT NULL
);

-- Append-only history of position changes and lifecycle events.
CREATE TABLE history (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    table_name  text        NOT NULL,
    branch      text        NOT NULL,
    consumer_id text        NOT NULL,
    event       text        NOT NULL,
    old_next    bigint,
    new_next    bigint,
    epoch       bigint,
    lease_id    uuid,
    batch_id    bigint,
    holder      text,
    principal   text        NOT NULL,
    request_id  text        NOT NULL,
    detail      text
);

CREATE INDEX history_by_key ON history (table_name, branch, consumer_id, id);
