"""The extractive answer: what the documents say, chosen from the passages found, with no LLM.

The pipeline reads the hits into units (`units`), scores each unit against the question once
(`reading`), chooses the lead and the sentences that support it within the word budget
(`answer`), and shows each cited unit in its place (`excerpts`). What a question asks for and
whether a unit states it are the pattern tables of `lead`. The assertion model
(`lorehouse.agents.assertion`) decides from the reading's signals whether the lead is
asserted or the closest passages are shown.
"""
