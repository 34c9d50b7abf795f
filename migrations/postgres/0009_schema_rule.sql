-- The migration rule (docs/deploy.md, "Migrations"): each migration records
-- the oldest migration a running binary may have been built with and still
-- use the schema once it is applied. An expand step (a new table, a column
-- with a default or nullable, an index) keeps the floor; a contract step (a
-- dropped or renamed column or table, a changed type, a new NOT NULL
-- without a default) raises it. A binary whose newest migration is below
-- the highest floor recorded refuses to start; a CI check refuses a floor
-- above the previous release's newest migration.
-- 0001-0008 were expand steps for every binary that ran on them (0004
-- dropped indexes and history's primary key, which no statement names).
CREATE TABLE IF NOT EXISTS tidemark_schema_rule (
    migration         bigint PRIMARY KEY,
    oldest_compatible bigint NOT NULL CHECK (oldest_compatible <= migration)
);
INSERT INTO tidemark_schema_rule (migration, oldest_compatible)
VALUES (1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 1), (7, 1), (8, 1), (9, 1)
ON CONFLICT (migration) DO NOTHING;
