"""The read side: the retriever, its legs and fusion, BM25, rerankers, access and filter SQL,
over the tables the index side writes, read through `lorehouse.search.tables`."""
