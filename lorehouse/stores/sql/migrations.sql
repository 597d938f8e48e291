-- Columns added to tables after their first release; CREATE TABLE IF NOT EXISTS leaves a
-- table made by an older version as it was.
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS key_facts INTEGER DEFAULT 0;
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS key_facts_found INTEGER DEFAULT 0;
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS declined BOOLEAN DEFAULT false;
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS lead VARCHAR DEFAULT '';
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS lead_words INTEGER DEFAULT 0;
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS lead_key_facts_found INTEGER DEFAULT 0;
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS shown_key_facts_found INTEGER DEFAULT 0;
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS lead_from_evidence BOOLEAN;
ALTER TABLE eval_answers ADD COLUMN IF NOT EXISTS asserted BOOLEAN DEFAULT false;
ALTER TABLE document_enrichment ADD COLUMN IF NOT EXISTS input_fingerprint VARCHAR;
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS language VARCHAR;
ALTER TABLE documents ADD COLUMN IF NOT EXISTS language VARCHAR;
