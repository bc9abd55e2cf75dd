-- The schema registry's `normalize` setting, global ('') and per subject ('true' or
-- 'false'; NULL: not set here), beside compatibility and mode.
ALTER TABLE registry_configs ADD COLUMN normalize TEXT;
