-- Every table of the DuckDB feature store (`lorehouse.stores.database`).
CREATE TABLE IF NOT EXISTS documents_raw (
    doc_id VARCHAR PRIMARY KEY,
    source_uri VARCHAR NOT NULL,
    rel_path VARCHAR NOT NULL,
    file_type VARCHAR NOT NULL,
    size_bytes BIGINT NOT NULL,
    content_sha256 VARCHAR NOT NULL,
    modified_at TIMESTAMPTZ NOT NULL,
    acl_groups VARCHAR[] NOT NULL,
    inventoried_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
);
CREATE TABLE IF NOT EXISTS documents_parsed (
    doc_id VARCHAR PRIMARY KEY,
    content_sha256 VARCHAR NOT NULL,
    title VARCHAR,
    markdown VARCHAR NOT NULL,
    page_map JSON NOT NULL,
    page_count INTEGER NOT NULL,
    parser VARCHAR NOT NULL,
    parser_version VARCHAR NOT NULL,
    parse_ms DOUBLE NOT NULL,
    warnings VARCHAR[] NOT NULL,
    parsed_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
);
CREATE TABLE IF NOT EXISTS documents_failed (
    doc_id VARCHAR NOT NULL,
    stage VARCHAR NOT NULL,
    rel_path VARCHAR NOT NULL,
    content_sha256 VARCHAR NOT NULL,
    version VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    detail VARCHAR NOT NULL,
    "at" TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (doc_id, stage)
);
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id VARCHAR PRIMARY KEY,
    doc_id VARCHAR NOT NULL,
    position INTEGER NOT NULL,
    heading_path VARCHAR[] NOT NULL,
    text_embed VARCHAR NOT NULL,
    text_chat VARCHAR NOT NULL,
    page_start INTEGER,
    page_end INTEGER,
    is_table BOOLEAN NOT NULL,
    token_count INTEGER NOT NULL,
    acl VARCHAR[] NOT NULL,
    source_fingerprint VARCHAR NOT NULL,
    chunked_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    -- ISO 639-1, told among the deployment's languages (lorehouse/language.py).
    language VARCHAR
);
-- Parsed documents whose current parse yields no chunk (an empty page, a lone heading):
-- without a row here they would have no chunk carrying the fingerprint, and every run would
-- chunk them again.
CREATE TABLE IF NOT EXISTS chunkless_documents (
    doc_id VARCHAR PRIMARY KEY,
    source_fingerprint VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS enrichment_cache (
    cache_key VARCHAR PRIMARY KEY,
    kind VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    payload JSON NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
);
CREATE TABLE IF NOT EXISTS enriched_chunks (
    chunk_id VARCHAR PRIMARY KEY,
    doc_id VARCHAR NOT NULL,
    summary VARCHAR,
    faqs VARCHAR[] NOT NULL,
    keywords VARCHAR[] NOT NULL,
    enrichment_mode VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    prompt_version VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    error VARCHAR
);
CREATE TABLE IF NOT EXISTS document_enrichment (
    doc_id VARCHAR PRIMARY KEY,
    summary VARCHAR,
    generated_title VARCHAR,
    enrichment_mode VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    error VARCHAR,
    input_fingerprint VARCHAR
);
-- Each index partition's last merge into this store: what its stage tables held then.
CREATE TABLE IF NOT EXISTS partition_merges (
    partition_key VARCHAR PRIMARY KEY,
    digest VARCHAR NOT NULL,
    merged_at TIMESTAMPTZ NOT NULL
);
-- What the last index merge took of each partition's search tables: the stage digest its
-- rows were built from, so the next merge compares only partitions that changed since.
CREATE TABLE IF NOT EXISTS partition_index_merges (
    partition_key VARCHAR NOT NULL,
    table_name VARCHAR NOT NULL,
    digest VARCHAR NOT NULL,
    merged_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (partition_key, table_name)
);
CREATE TABLE IF NOT EXISTS documents (
    doc_id VARCHAR PRIMARY KEY,
    title VARCHAR NOT NULL,
    source_uri VARCHAR NOT NULL,
    rel_path VARCHAR NOT NULL,
    summary VARCHAR,
    n_chunks INTEGER NOT NULL,
    n_pages INTEGER NOT NULL,
    acl VARCHAR[] NOT NULL,
    content_sha256 VARCHAR NOT NULL,
    enrichment_mode VARCHAR,
    updated_at TIMESTAMPTZ NOT NULL,
    -- The language most of its chunks' tokens are in.
    language VARCHAR
);
CREATE TABLE IF NOT EXISTS chunk_faqs (
    chunk_id VARCHAR NOT NULL,
    doc_id VARCHAR NOT NULL,
    question VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS eval_retrieval (
    run_id VARCHAR NOT NULL,
    evaluated_at TIMESTAMPTZ NOT NULL,
    index_version VARCHAR NOT NULL,
    golden_set VARCHAR NOT NULL,
    retriever VARCHAR NOT NULL,
    case_type VARCHAR NOT NULL,
    k INTEGER NOT NULL,
    recall DOUBLE NOT NULL,
    mrr DOUBLE NOT NULL,
    n_questions INTEGER NOT NULL,
    is_default BOOLEAN NOT NULL
);
CREATE TABLE IF NOT EXISTS eval_retrieval_misses (
    run_id VARCHAR NOT NULL,
    golden_set VARCHAR NOT NULL,
    retriever VARCHAR NOT NULL,
    case_id VARCHAR NOT NULL,
    case_type VARCHAR NOT NULL,
    question VARCHAR NOT NULL,
    file VARCHAR NOT NULL,
    excerpt VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    detail VARCHAR NOT NULL,
    rank_vector INTEGER,
    rank_bm25 INTEGER,
    rank_hybrid INTEGER
);
CREATE TABLE IF NOT EXISTS answer_feedback (
    -- a reader's verdict on one answer, kept for review as a golden-set candidate
    answer_id VARCHAR NOT NULL,
    given_at TIMESTAMPTZ NOT NULL,
    caller VARCHAR NOT NULL,
    rating VARCHAR NOT NULL,
    comment VARCHAR,
    question VARCHAR NOT NULL,
    answer VARCHAR NOT NULL,
    -- the cited chunks, as (chunk id, file) in citation order
    cited_chunk_ids VARCHAR[] NOT NULL,
    cited_files VARCHAR[] NOT NULL
);
CREATE TABLE IF NOT EXISTS eval_answers (
    run_id VARCHAR NOT NULL,
    evaluated_at TIMESTAMPTZ NOT NULL,
    golden_set VARCHAR NOT NULL,
    case_id VARCHAR NOT NULL,
    case_type VARCHAR NOT NULL,
    question VARCHAR NOT NULL,
    reference_answer VARCHAR NOT NULL,
    answer VARCHAR NOT NULL,
    answer_mode VARCHAR NOT NULL,
    degraded BOOLEAN NOT NULL,
    n_citations INTEGER NOT NULL,
    judge_model VARCHAR NOT NULL,
    -- NULL score and label: the judge failed for this case; judge_error says why
    score INTEGER,
    label VARCHAR,
    reasoning VARCHAR,
    judge_error VARCHAR,
    answer_seconds DOUBLE NOT NULL,
    -- the offline metric: the reference's numbers and named terms, and those stated
    key_facts INTEGER DEFAULT 0,
    key_facts_found INTEGER DEFAULT 0,
    declined BOOLEAN DEFAULT false,
    -- the lead (the answer's first statement): its words and the reference facts it states,
    -- and the facts the lead and the excerpts state together
    lead VARCHAR DEFAULT '',
    lead_words INTEGER DEFAULT 0,
    lead_key_facts_found INTEGER DEFAULT 0,
    shown_key_facts_found INTEGER DEFAULT 0,
    -- whether the lead was taken from an evidence excerpt; NULL for a case without evidence
    lead_from_evidence BOOLEAN,
    -- whether the answer asserted its lead (false: the closest passages only, or declined)
    asserted BOOLEAN DEFAULT false
);
CREATE TABLE IF NOT EXISTS chunk_keywords (
    chunk_id VARCHAR NOT NULL,
    doc_id VARCHAR NOT NULL,
    keyword VARCHAR NOT NULL
);
