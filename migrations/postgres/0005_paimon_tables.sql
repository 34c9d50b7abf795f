-- SPEC §9: Paimon tables registered with their storage location, and what
-- each consumer's Paimon file (consumer/consumer-<id>) shows.

CREATE TABLE paimon_tables (
    table_name      text        PRIMARY KEY,
    -- An absolute path, file:// or s3:// URL of the table's directory.
    location        text        NOT NULL,
    registered_at   timestamptz NOT NULL,
    registered_by   text        NOT NULL
);

CREATE TABLE consumer_mirrors (
    table_name          text        NOT NULL,
    branch              text        NOT NULL,
    consumer_id         text        NOT NULL,
    -- The position the file shows; NULL once the file was deleted.
    mirrored_next       bigint,
    -- The consumer's updated_at the file reflects (its mtime follows it).
    mirrored_updated_at timestamptz,
    -- When the file was last written or deleted.
    mirrored_at         timestamptz,
    -- Consecutive failed attempts, and the last error.
    failures            integer     NOT NULL DEFAULT 0,
    last_error          text,
    PRIMARY KEY (table_name, branch, consumer_id)
);
