-- The authenticated principal that acquired the key's lease: only it may
-- renew, commit or release the lease, and a takeover needs it too.
ALTER TABLE consumer_keys ADD COLUMN lease_principal text;
