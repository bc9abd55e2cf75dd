-- Batch rows drop their foreign keys (file_id -> files, (topic_id, partition) ->
-- partitions). PostgreSQL checks a foreign key once per inserted row, which was about half
-- the server's time in a commit of 1,600 batches. The coordinator keeps both invariants
-- itself: batch rows are written only for partitions locked in the same transaction and for
-- the file row it just claimed; a file row is deleted only once marked `deleting`, i.e.
-- when no batch points into it; partitions go only with their topic, which drops its batch
-- rows in the same transaction.
DO $$
DECLARE
    fk record;
BEGIN
    FOR fk IN
        SELECT conname FROM pg_constraint
        WHERE conrelid = 'batches'::regclass AND contype = 'f'
    LOOP
        EXECUTE format('ALTER TABLE batches DROP CONSTRAINT %I', fk.conname);
    END LOOP;
END
$$;
