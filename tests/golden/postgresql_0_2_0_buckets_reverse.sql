DROP TABLE IF EXISTS "outbox_buckets";
