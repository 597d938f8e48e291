"""Extractive answers state the fact the question asks for, once, with its table row whole."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from lorehouse.agents.citations import DraftAnswer, citations_in
from lorehouse.agents.extractive.answer import answer_extractively
from lorehouse.agents.extractive.lead import named_terms, spelled_out
from lorehouse.agents.llm_answer import context_block
from lorehouse.embedding.base import VectorCache
from lorehouse.search.hits import SearchHit
from lorehouse.settings import DEFAULT_ANSWER_MAX_WORDS, DEFAULT_ANSWER_MIN_SIMILARITY
from lorehouse.text import BREADCRUMB_SEPARATOR
from tests.conftest import default_embedder


def _hit(
    number: int,
    body: str,
    *,
    is_table: bool = False,
    heading_path: Sequence[str] = ("Travel",),
) -> SearchHit:
    """A passage as the chunker writes it: its breadcrumb line first, when it has headings."""
    breadcrumb = BREADCRUMB_SEPARATOR.join(heading_path)
    return SearchHit(
        rank=number,
        chunk_id=f"chunk-{number}",
        doc_id=f"doc-{number}",
        title="Travel",
        rel_path=f"travel-{number}.md",
        source_uri=f"file:///travel-{number}.md",
        file_type="md",
        position=number,
        heading_path=list(heading_path),
        page_start=None,
        page_end=None,
        is_table=is_table,
        text_chat=f"{breadcrumb}\n\n{body}" if breadcrumb else body,
        score=1.0 / number,
        scores={},
        citation=f"/v1/chunks/chunk-{number}",
    )


def _answer(question: str, hits: list[SearchHit]) -> str:
    draft = answer_extractively(
        default_embedder(), question, hits, DEFAULT_ANSWER_MIN_SIMILARITY, DEFAULT_ANSWER_MAX_WORDS
    )
    assert draft.answerable
    lead_citations = citations_in(draft.text)
    assert lead_citations == list(range(1, len(lead_citations) + 1))
    return shown_text(draft)


def shown_text(draft: DraftAnswer) -> str:
    """The lead, then the sentences the excerpts mark that the lead does not hold, each with
    its citation: everything a reader is shown, in order."""
    number = dict(zip(draft.passages or draft.cited, draft.cited, strict=True))
    rest = [
        f"{sentence} [{number[excerpt.passage]}]"
        for excerpt in draft.excerpts
        for index, sentence in enumerate(excerpt.sentences)
        if index in excerpt.marked and sentence not in draft.text
    ]
    return " ".join([draft.text, *rest])


HOTEL_POLICY = [
    _hit(
        1,
        "Hotels for business travel should be booked through Navan so that hotel stays for "
        "business trips are easy to find. Choose a hotel close to where you work during the trip.",
    ),
    _hit(
        2,
        "We advise spending within reason, with a $300 USD per night maximum spend limit "
        "(including taxes, fees, and parking). Spending more needs approval from Finance.",
    ),
]


def test_a_how_much_question_is_answered_with_the_amount_first() -> None:
    answer = _answer(
        "What is the maximum I can spend per night on a hotel for a business trip?", HOTEL_POLICY
    )
    assert answer.startswith("We advise spending within reason, with a $300 USD per night")
    assert "Finance" in answer, "a second sentence adding a new fact (who approves) is kept"


def test_a_sentence_repeating_a_stated_fact_is_left_out() -> None:
    repeated = [
        _hit(1, "New teammates may spend up to $2,000 on their desk setup."),
        _hit(2, "Every teammate gets a $2,000 desk setup budget for a comfortable workspace."),
        _hit(3, "Design team members may spend up to $2,650 on their desk setup."),
    ]
    answer = _answer("How much can a new teammate spend on a desk setup?", repeated)
    assert answer.count("$2,000") == 1
    assert "$2,650" in answer


def test_a_long_sentence_does_not_spend_the_budget_two_short_facts_need() -> None:
    expense_policy = [
        _hit(
            1,
            "Every expense report needs an itemized receipt for each expense over $25. "
            "Expense reports are reviewed by the Finance team at the end of each month, and to "
            "keep them accurate and complete it asks every teammate to take good care when "
            "filing them, to check every line of an expense before filing it, to keep copies of "
            "what they send in case an auditor asks for them later in the year, and to reach out "
            "to the team in Slack whenever something about a report is unclear to them or an "
            "expense does not fit any category.",
        ),
        _hit(
            2,
            "Each expense report also needs your manager's approval in Airbase. Submit every "
            "expense report within 30 days of the purchase.",
        ),
    ]
    answer = _answer("What do I need to submit with an expense report?", expense_policy)
    assert "30 days" in answer
    assert "$25" in answer and "Airbase" in answer, (
        "two short sentences, each with its own fact, fit the 100 words the 86-word one "
        "would have spent"
    )
    assert "auditor" not in answer


@pytest.mark.parametrize("words", [10, 40])
def test_the_answer_stays_within_its_word_budget(words: int) -> None:
    draft = answer_extractively(
        default_embedder(),
        "What is the maximum I can spend per night on a hotel for a business trip?",
        HOTEL_POLICY,
        DEFAULT_ANSWER_MIN_SIMILARITY,
        max_words=words,
    )
    sentences = draft.text.split(" [")
    first_sentence_words = len(sentences[0].split())
    assert len(draft.text.split()) <= max(words, first_sentence_words) + len(draft.cited)


def test_a_question_with_two_asks_gets_a_budget_for_each() -> None:
    equity_policy = [
        _hit(
            1,
            "All equity grants vest over 4 years: 25% of the shares vest after a 1-year cliff "
            "and the rest vest monthly, 1/48 of the grant each month, while you work here. "
            "Grants approved by the Board in Q1 are announced in the All Hands.",
            heading_path=("Equity", "Vesting"),
        ),
        _hit(
            2,
            "After you leave, you have 90 days to exercise vested options. Teammates who "
            "joined after May 2021 have 10 years from the grant date to exercise them.",
            heading_path=("Equity", "Exercise window"),
        ),
    ]
    two_asks = "How do my stock options vest, and how long do I have to exercise them?"
    draft = answer_extractively(
        default_embedder(), two_asks, equity_policy, DEFAULT_ANSWER_MIN_SIMILARITY, max_words=30
    )
    assert "1-year cliff" in shown_text(draft)
    assert "90 days" in shown_text(draft) or "10 years" in shown_text(draft), (
        "the second ask is answered within its own 30 words, not left out after the first "
        "ask's sentence spent the budget"
    )
    one_ask = answer_extractively(
        default_embedder(),
        "How do my stock options vest?",
        equity_policy,
        DEFAULT_ANSWER_MIN_SIMILARITY,
        max_words=30,
    )
    assert len(shown_text(one_ask).split()) < len(shown_text(draft).split())


def test_a_question_with_two_asks_is_answered_in_the_order_asked() -> None:
    expense_policy = [
        _hit(
            1,
            "You will see the reimbursement on your paycheck within 30 days of approval. "
            "Itemized receipts are required for any expense over $25.",
            heading_path=("Expenses", "Reimbursement"),
        ),
        _hit(
            2,
            "All expenses are first routed to your direct manager and then to Accounting for "
            "approval. Expenses older than 90 days also need Finance approval.",
            heading_path=("Expenses", "Approvals"),
        ),
    ]
    answer = _answer(
        "Who approves my expense report, and how long does reimbursement take?", expense_policy
    )
    sentences = answer.split("] ")
    assert "routed to your direct manager" in sentences[0], "the first ask is answered first"
    assert "within 30 days" in sentences[1], "the second ask's answer follows it"


def test_a_table_answer_keeps_its_row_whole_with_the_column_names() -> None:
    table = _hit(
        1,
        "| Trip category | Total spend limit | Per night |\n"
        "| --- | --- | --- |\n"
        "| Team offsite | $1,850 | $300 |\n"
        "| Customer visit | $2,400 | $350 |",
        is_table=True,
    )
    answer = _answer("What is the total spend limit for a customer visit trip?", [table])
    assert "Trip category: Customer visit; Total spend limit: $2,400; Per night: $350." in answer


def test_an_infobox_row_reads_as_its_label_and_value() -> None:
    """An infobox's header is one caption over both columns; it names no column, so a row
    reads "Founded: ..." instead of repeating the caption before the label and the value."""
    infobox = _hit(
        1,
        "| Building 7 on the Contoso campus | Building 7 on the Contoso campus |\n"
        "|---|---|\n"
        "| Founded | April 4, 1975 in Albuquerque, New Mexico |\n"
        "| Headquarters | One Contoso Way, Redmond, Washington |",
        is_table=True,
    )
    answer = _answer("When and where was Contoso founded?", [infobox])
    assert answer.startswith("Founded: April 4, 1975 in Albuquerque, New Mexico."), answer
    assert "Building 7" not in answer


def test_a_statement_whose_first_row_holds_amounts_reads_each_row_as_label_and_amounts() -> None:
    """A financial statement's years sit above its grid, so its first row is data, not
    column names: the amounts must not be read as the names of the next rows' columns."""
    statement = _hit(
        1,
        "| Net Revenue | $86,392 | $79,474 |\n"
        "| --- | --- | --- |\n"
        "| Cost of sales | 40,576 | 37,075 |\n"
        "| Operating Profit | 11,512 | 11,162 |",
        is_table=True,
        heading_path=("Consolidated Statement of Income",),
    )
    answer = _answer("What was the operating profit?", [statement])
    assert answer.startswith("Operating Profit: 11,512; 11,162."), answer
    assert "$86,392:" not in answer


def test_a_form_of_label_value_cells_reads_each_row_as_label_and_value() -> None:
    """A datasheet's first row is a label and its value like the others, not column names:
    read as names, every row said "Grade :: Tensile strength:; SNB22-3: 1,000 MPa"."""
    datasheet = _hit(
        1,
        "| Grade : | SNB22-3 |\n"
        "| --- | --- |\n"
        "| Classification: | Chromium molybdenum steel |\n"
        "| Tensile strength: | 1,000 MPa | Yield: | 885 MPa |",
        is_table=True,
    )
    answer = _answer("What is the tensile strength of SNB22-3?", [datasheet])
    assert "Tensile strength: 1,000 MPa. Yield: 885 MPa." in answer, answer
    assert "::" not in answer and "SNB22-3:" not in answer


def test_an_faq_answer_is_quoted_without_its_marker() -> None:
    faq = _hit(
        1,
        "Q: Do promotions trigger a zone re-evaluation?\n\n"
        "A: No, promotions do not trigger a zone re-evaluation.",
    )
    answer = _answer("Will my pay zone be re-evaluated when I get promoted?", [faq])
    assert answer.startswith("No, promotions do not trigger a zone re-evaluation."), answer


def test_a_quoted_note_is_quoted_without_its_markdown_markers() -> None:
    hotel_note = [
        _hit(
            1,
            "We advise spending within reason for the location you are visiting.\n\n"
            "> [!NOTE]\n> Spending over $300 USD per night requires additional approvals "
            "from Finance.",
            heading_path=("Travel", "Hotel accommodations"),
        )
    ]
    answer = _answer("What is the maximum I can spend per night on a hotel?", hotel_note)
    assert "Spending over $300 USD per night requires additional approvals" in answer
    assert ">" not in answer and "[!NOTE]" not in answer


def test_a_reference_style_link_is_not_read_as_a_citation() -> None:
    """ "the [Checkov website][2]" labels a link; quoted as is, its "[2]" cited passage 2."""
    checkov = _hit(
        1,
        "To skip a Checkov check, follow the suppression steps on the [Checkov website][2] "
        "or copy an existing skip from [our repositories][3].\n\n"
        "[2]: https://www.checkov.io/suppressions\n[3]: https://github.com/search",
    )
    draft = answer_extractively(
        default_embedder(),
        "How do I skip a Checkov check?",
        [checkov, _hit(2, "Laptops are replaced every four years."), _hit(3, "Lunch is at noon.")],
        DEFAULT_ANSWER_MIN_SIMILARITY,
        DEFAULT_ANSWER_MAX_WORDS,
    )
    assert "on the Checkov website or copy an existing skip from our repositories" in draft.text
    assert draft.cited_passages() == [(1, 1)], draft.text
    assert "Checkov website][2]" not in context_block([checkov])


def test_a_table_cell_reads_without_its_styling() -> None:
    table = _hit(
        1,
        "| **Principle** | Meaning |\n|---|---|\n"
        "| **Least privilege** | Grant `read` access before `write` access. |",
        is_table=True,
    )
    answer = _answer("What does least privilege mean?", [table])
    # A question of no particular kind of fact leads with the whole row.
    assert answer.startswith(
        "Principle: Least privilege; Meaning: Grant read access before write access. [1]"
    ), answer


def test_a_question_the_context_does_not_touch_is_declined() -> None:
    draft = answer_extractively(
        default_embedder(),
        "Which VPN client do I install on my laptop?",
        [_hit(1, "The cafeteria serves vegetarian lunch every Thursday from noon.")],
        DEFAULT_ANSWER_MIN_SIMILARITY,
    )
    assert not draft.answerable and draft.cited == []


def test_a_question_in_the_document_does_not_stand_in_for_its_answer() -> None:
    faq = _hit(
        1,
        "Who gets a background check?\n\n"
        "Every new teammate in the U.S. gets a background check run by Checkr after the offer.",
    )
    answer = _answer("Who gets a background check?", [faq])
    assert answer.startswith("Every new teammate in the U.S. gets a background check")
    assert "Who gets a background check?" not in answer


def test_a_passage_is_read_chunk_by_chunk_under_each_chunks_heading() -> None:
    """A passage hit joins chunks of several sections under the first one's breadcrumb. Read
    whole, "You may spend up to $90 each time." sat under "Hotels" like the hotel limit, and the
    answer to a question about meals opened with the hotel's $300."""
    hotels, meals = ("Travel", "Hotels"), ("Travel", "Meals")
    hotel_chunk = "You may spend up to $300 each time."
    meal_chunk = "You may spend up to $90 each time."
    parts = [_hit(1, hotel_chunk, heading_path=hotels), _hit(2, meal_chunk, heading_path=meals)]
    passage = _hit(1, f"{hotel_chunk}\n\nMeals\n\n{meal_chunk}", heading_path=hotels)
    passage = passage.model_copy(update={"passage_parts": parts})
    answer = _answer("How much can I spend on meals?", [passage])
    assert answer.startswith(f"{meal_chunk} [1]"), answer


def test_an_faq_question_never_fills_the_answer() -> None:
    """A question of the source read after a colon ("Q: What if ...?") once counted "What" as
    a name it adds, and ended an answer about burnout as a question of its own."""
    faq = _hit(
        1,
        "Q: What if I need additional support?\n\n"
        "A: Reach out to your People Partner, or to Modern Health for free counselling sessions.",
        heading_path=("Mental health", "FAQ"),
    )
    resources = _hit(
        2,
        "Feeling burnt out? Read the 12 Stages of Burnout to see where you are. "
        "Burnout is common in remote teams, and feeling it is nothing to hide.",
        heading_path=("Mental health", "Resources"),
    )
    answer = _answer("Who do I talk to if I feel burnt out?", [resources, faq])
    assert "Reach out to your People Partner" in answer
    assert "?" not in answer, answer


@pytest.mark.parametrize(
    "heading_path", [(), ("Annual report", "Employees")], ids=["no heading", "under headings"]
)
def test_the_opening_line_of_a_passage_is_read(heading_path: tuple[str, ...]) -> None:
    """A PDF page before its first heading has no breadcrumb line: its first line is its own
    text, and the fact it holds reaches the answer and the prompt an LLM reads."""
    employees = _hit(
        1,
        "We have 36 full-time employees, including officers, sales staff and technicians.\n\n"
        "As needed, we also employ part-time and temporary staff and independent contractors.",
        heading_path=heading_path,
    )
    answer = _answer("How many full-time employees does the company have?", [employees])
    assert answer.startswith("We have 36 full-time employees"), answer
    prompt = context_block([employees])
    assert "We have 36 full-time employees" in prompt
    assert prompt.count("Annual report > Employees") == (1 if heading_path else 0)


def test_links_read_as_their_text() -> None:
    linked = _hit(
        1,
        "Every teammate gets a [$2,000 desk set-up budget](../spending-company-money.md#desk) "
        "for a comfortable workspace.",
    )
    answer = _answer("How much is the desk set-up budget?", [linked])
    assert "Every teammate gets a $2,000 desk set-up budget for a comfortable workspace." in answer
    assert ".md" not in answer and "](" not in answer


def test_an_image_reads_as_its_alt_text() -> None:
    """A screenshot between two steps is its caption, not "!caption" and not its URL."""
    steps = _hit(
        1,
        "Open the access request in Entitle.\n\n"
        "![Cloudflare access request form](https://cdn.example.com/form.png)\n\n"
        "Approval from the Security team takes one business day.",
    )
    draft = answer_extractively(
        default_embedder(),
        "How long does approval of a Cloudflare access request take?",
        [steps],
        DEFAULT_ANSWER_MIN_SIMILARITY,
    )
    assert draft.text.startswith("Approval from the Security team takes one business day.")
    shown = [sentence for excerpt in draft.excerpts for sentence in excerpt.sentences]
    assert "Cloudflare access request form" in shown, shown
    assert not any("!" in sentence or "cdn.example.com" in sentence for sentence in shown)


def test_a_hard_wrapped_sentence_is_quoted_whole() -> None:
    """Source Markdown wrapped at 80 columns: the answer quotes the sentence, not its lines."""
    wrapped = _hit(
        1,
        "The public bug bounty scheme closed in March 2022.\n"
        "If you have found a high or critical severity vulnerability in one of our\n"
        "products, please email security@example.com and we will assess whether\n"
        "the severity of the issue merits an invite to the program.\n\n"
        "> Spending on travel over $300 USD per night requires additional approvals from\n"
        "> Finance / People Ops.",
    )
    answer = _answer("Where do I report a critical vulnerability I found in a product?", [wrapped])
    assert (
        "If you have found a high or critical severity vulnerability in one of our products, "
        "please email security@example.com and we will assess whether the severity of the issue "
        "merits an invite to the program. [1]"
    ) in answer
    limit = _answer("Who approves hotel spending over $300 USD per night?", [wrapped])
    assert "requires additional approvals from Finance / People Ops." in limit


ENCYCLOPEDIA = [
    _hit(
        1,
        "Microsoft Corporation is an American technology company headquartered in Redmond, "
        "Washington . [2] Its best-known products are Windows and Office. [3][4]",
    ),
    _hit(
        2,
        "On July 29, 2015, Windows 10 was released, [107] with its server sibling, Windows "
        "Server 2016 , released in September 2016. [citation needed]",
    ),
]


def test_a_sources_own_reference_markers_never_read_as_citations() -> None:
    """A quoted "[2]" of the source would be renumbered as a citation of the wrong passage,
    and "[107]" would cite a passage that does not exist."""
    from lorehouse.agents.llm_answer import context_block

    draft = answer_extractively(
        default_embedder(),
        "When was Windows 10 released, and where is Microsoft headquartered?",
        ENCYCLOPEDIA,
        DEFAULT_ANSWER_MIN_SIMILARITY,
        DEFAULT_ANSWER_MAX_WORDS,
    )
    assert "Windows 10 was released, with its server sibling" in draft.text
    assert "[107]" not in draft.text and "citation needed" not in draft.text
    for number, passage in draft.cited_passages():
        quoted = draft.text.split(f"[{number}]")[0].rsplit("]", 1)[-1]
        assert quoted.split()[0] in ENCYCLOPEDIA[passage - 1].text_chat
    assert citations_in(draft.text) == list(range(1, len(draft.cited) + 1))
    # The LLM reads the passages without them too, so it cannot copy one as a citation.
    assert citations_in(context_block(ENCYCLOPEDIA)) == [1, 2]


def test_an_index_in_code_is_not_a_reference_marker() -> None:
    from lorehouse.agents.citations import without_source_markers

    assert without_source_markers("Read items[0] and grid[1][2] first.") == (
        "Read items[0] and grid[1][2] first."
    )
    assert without_source_markers("Redmond.[2][3] Next, [a] Step [1 of 3]") == (
        "Redmond. Next, Step [1 of 3]"
    )
    # A wiki page exported to Markdown keeps its markers as links to their footnotes.
    assert without_source_markers(
        "Duck quacks echo.[[ 30 ]](#cite_note-30) [[ 9 ]](#cite_note-FOOTNOTECarboneras-9) "
        'See [the notes](#notes). It is written as "breeeeze", [ *self-published source?* ] but'
    ) == ('Duck quacks echo. See [the notes](#notes). It is written as "breeeeze", but')


def test_a_sentence_is_read_under_its_sections_heading() -> None:
    """ "Sourcegraph will reimburse these costs" says what it pays for only under its heading;
    the answer opens with it, not with a sentence that merely shares the question's words."""
    budget = _hit(
        1,
        "Your travel budget also covers public transportation and rideshare to and from "
        "co-working spaces while you travel for work, up to $20 per day.",
    )
    childcare = _hit(
        2,
        "Sourcegraph will reimburse these costs, up to $50 per day, on work trips.",
        heading_path=["Travel", "Babysitting and childcare while you travel"],
    )
    answer = _answer("Can I expense a babysitter while I travel for work?", [budget, childcare])
    assert answer.startswith("Sourcegraph will reimburse these costs"), answer


@pytest.mark.parametrize(
    ("question", "opening"),
    [
        ("How much can I spend on a hotel in London?", "Central London: $300"),
        ("What's the most I can pay for a hotel room in Paris?", "Central Paris: $250"),
        ("How much can I spend on meals in Paris?", "Central Paris: $60"),
    ],
)
def test_a_list_item_is_read_under_its_lead_in(question: str, opening: str) -> None:
    """ "Central London: $300" is a hotel limit only under the line that introduces its list;
    alone it reads like the meal amount of the list before it."""
    meals = _hit(
        1,
        "Meals on a trip are reimbursed up to a daily amount by city:\n\n"
        "- Central London: $80\n- Central Paris: $60",
    )
    hotels = _hit(
        2,
        "Hotel stays are reimbursed up to a nightly limit by city:\n\n"
        "- Central London: $300\n- Central Paris: $250",
    )
    answer = _answer(question, [meals, hotels])
    assert answer.startswith(opening), answer


class _CountingEmbedder:
    """The bundled embedder, recording the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = default_embedder()
        self.name = self.inner.name
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        self.embedded.extend(texts)
        return self.inner.embed(texts, batch_size)


def test_passages_asked_about_again_are_not_embedded_again() -> None:
    embedder = _CountingEmbedder()
    kept = VectorCache(size=100)
    question = "What is the maximum I can spend per night on a hotel for a business trip?"

    def answer(asked: str) -> str:
        draft = answer_extractively(
            embedder,
            asked,
            HOTEL_POLICY,
            DEFAULT_ANSWER_MIN_SIMILARITY,
            DEFAULT_ANSWER_MAX_WORDS,
            kept_vectors=kept,
        )
        return draft.text

    first = answer(question)
    assert len(embedder.embedded) == len(set(embedder.embedded)) > 4
    embedder.embedded.clear()
    assert answer(question) == first
    assert embedder.embedded == []
    # Another question over the same passages embeds the question alone.
    answer("Who approves a hotel above the nightly limit?")
    assert embedder.embedded == ["Who approves a hotel above the nightly limit?"]


def test_the_vector_cache_keeps_the_most_recently_used_texts() -> None:
    embedder = _CountingEmbedder()
    cache = VectorCache(size=2)
    first = cache.embed(embedder, ["alpha policy", "beta policy"])
    cache.embed(embedder, ["alpha policy", "gamma policy"])  # beta is now the oldest: dropped
    embedder.embedded.clear()
    again = cache.embed(embedder, ["alpha policy", "beta policy", "alpha policy"])
    assert embedder.embedded == ["beta policy"]
    assert np.array_equal(again[0], first[0]) and np.array_equal(again[2], first[0])
    np.testing.assert_allclose(again[1], first[1], atol=1e-6)


def test_a_how_quickly_question_is_answered_with_the_time_it_takes() -> None:
    offboarding = [
        _hit(
            1,
            "Depending on the circumstances of the teammate's exit, access to internal systems "
            "may be removed prior to their separation date. Access to core communication and "
            "production systems is removed within 48 hours of the separation date.",
            heading_path=("Access Control Policy", "Removal of access"),
        )
    ]
    answer = _answer(
        "How quickly is a departing teammate's access to core systems removed?", offboarding
    )
    assert answer.startswith("Access to core communication and production systems is removed")


@pytest.mark.parametrize(
    ("question", "named"),
    [
        ("What is the Wi-Fi password in the Toronto office?", ["Wi-Fi"]),
        ("Which VPN client do I need to install?", ["VPN"]),
        ("Do we get Black Friday off?", ["Black Friday"]),
        ("When is open enrollment for the 2025 plans?", ["2025"]),
        # Where the asker is sets the scene; a policy for staff abroad answers without it.
        ("I work from Germany. Is my stock grant the same?", []),
        ("How much leave do I get after I'm back?", []),
    ],
)
def test_a_question_names_its_subject_by_names_acronyms_and_years(
    question: str, named: list[str]
) -> None:
    assert named_terms(question) == named


def test_an_acronym_counts_as_mentioned_where_a_passage_spells_it_out() -> None:
    assert spelled_out("MFA", "Multi-factor authentication is required everywhere.")
    assert not spelled_out("VPN", "Use the password manager for every account.")


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Does the hotel limit include breakfast?", "yes_no"),
        ("Can I approve my own expense claim?", "yes_no"),
        ("Is there a limit on hotel costs in London?", "amount"),
        ("How much is the hotel limit in London?", "amount"),
        ("Can I take more than 5 days off in a row, and how many days do I get?", "duration"),
        ("How is the zone 3 salary band entry point set?", "amount"),
        ("How are expenses approved?", "person"),
        ("Who approves an expense claim of EUR 3,000?", "person"),
        ("When is the deadline for expense claims?", "date"),
    ],
)
def test_the_question_form_decides_what_is_asked_before_its_topic_words(
    question: str, kind: str
) -> None:
    """Read as asking an amount, "Does the hotel limit include breakfast?" was led by a
    row of hotel limits instead of "The limit ... includes taxes and breakfast"."""
    from lorehouse.agents.extractive.lead import asked_kind

    assert asked_kind(question) == kind


def _decided(question: str, hits: list[SearchHit], threshold: float) -> DraftAnswer:
    from lorehouse.agents.assertion import LEAD_MODEL

    return answer_extractively(
        default_embedder(),
        question,
        hits,
        DEFAULT_ANSWER_MIN_SIMILARITY,
        DEFAULT_ANSWER_MAX_WORDS,
        assertion=(LEAD_MODEL, threshold),
    )


def test_a_lead_below_the_bar_is_not_asserted_and_the_passages_are_shown() -> None:
    from lorehouse.agents.replies import PASSAGES_ONLY

    question = "What is the maximum I can spend per night on a hotel for a business trip?"
    asserted = _decided(question, HOTEL_POLICY, 0.0)
    shown = _decided(question, HOTEL_POLICY, 1.0)
    assert asserted.asserted and asserted.text.startswith("We advise spending")
    assert asserted.confidence is not None and 0.0 < asserted.confidence < 1.0
    assert shown.answerable and not shown.asserted
    assert shown.text.startswith(PASSAGES_ONLY["en"])
    assert "$300" not in shown.text  # nothing is stated as the answer...
    marked = [e.sentences[i] for e in shown.excerpts for i in e.marked]
    assert any("$300 USD per night" in sentence for sentence in marked)  # ...it is shown
    assert citations_in(shown.text) == shown.cited  # every shown passage cited, in order


def test_the_signals_see_the_kind_asked_and_the_margin_over_other_passages() -> None:
    question = "What is the maximum I can spend per night on a hotel for a business trip?"
    signals = _decided(question, HOTEL_POLICY, 0.0).signals
    assert signals is not None
    assert signals.kind_asked and signals.kind_stated  # an amount asked, "$300" stated
    assert signals.passage_rank == 2 and signals.margin > 0
    vague = _decided("Tell me about hotels.", HOTEL_POLICY, 0.0).signals
    assert vague is not None and not vague.kind_asked


def test_a_question_near_a_section_in_other_words_gets_the_passages_not_a_decline() -> None:
    lost = _hit(
        1,
        "Report a lost or stolen device to the IT service desk within 24 hours. IT will lock "
        "and, if necessary, wipe the device.",
        heading_path=("Acceptable Use Policy", "3.4 Lost Devices"),
    )
    question = "What should I do if I lose my laptop?"
    declined = answer_extractively(default_embedder(), question, [lost], 0.99)
    shown = answer_extractively(
        default_embedder(), question, [lost], 0.99, passages_min_similarity=0.1
    )
    assert not declined.answerable
    assert (
        shown.answerable
        and not shown.asserted
        and "no sentence is similar" in (shown.unasserted_because)
    )
    assert any("24 hours" in e.sentences[i] for e in shown.excerpts for i in e.marked)
    off_topic = answer_extractively(
        default_embedder(),
        "What is the capital of Mongolia?",
        [lost],
        DEFAULT_ANSWER_MIN_SIMILARITY,
        passages_min_similarity=0.3,
    )
    assert not off_topic.answerable


def test_a_lead_from_a_list_brings_the_items_beside_it_that_answer_alike() -> None:
    leave = _hit(
        1,
        "Parents receive paid parental leave after a birth or an adoption.\n\n"
        "- Primary caregivers: 20 weeks at full pay.\n"
        "- Secondary caregivers: 6 weeks at full pay.\n\n"
        "Tell the People Team at least 8 weeks before the leave starts.",
        heading_path=("Benefits", "Parental leave"),
    )
    both = _answer("How many weeks of parental leave do I get?", [leave])
    assert "Primary caregivers: 20 weeks" in both and "Secondary caregivers: 6 weeks" in both
    assert both.index("Primary") < both.index("Secondary")
    one = _answer("How many weeks of parental leave do Secondary caregivers get?", [leave])
    assert one.startswith("Secondary caregivers: 6 weeks") and "20 weeks" not in one.split("[")[0]


def test_a_question_about_a_named_section_leads_from_that_section() -> None:
    from lorehouse.agents.extractive.question import asked_section

    assert asked_section("What does “Travel Policy” say about Trip Approval?") == "trip approval"
    assert asked_section("What does the handbook say about sick leave?") == "sick leave"
    assert asked_section("How many days of sick leave do I get?") == ""
    opening = _hit(
        1,
        "Fernhill Analytics · Policy FIN-03 · Version 3.1 · Effective 1 January 2026.",
        heading_path=("Travel and Expenses Policy",),
    )
    approval = _hit(
        2,
        "Create a travel request in the People portal before you book. Your manager approves it.",
        heading_path=("Travel and Expenses Policy", "2.1 Trip Approval"),
    )
    answer = _answer(
        "What does “Travel and Expenses Policy” say about Trip Approval?", [opening, approval]
    )
    assert answer.startswith("Create a travel request"), answer


APPROVAL_TABLE = _hit(
    1,
    "| Amount (EUR equivalent) | Approver | Backup approver |\n|---|---|---|\n"
    "| Up to EUR 2,000 | Line manager | Department head |\n"
    "| Over EUR 5,000 | Chief Financial Officer (Rajiv Menon) | Chief Executive Officer |",
    is_table=True,
    heading_path=("Travel and Expenses Policy", "Approval limits"),
)
LEAVE_TABLE = _hit(
    1,
    "| Benefit | Lisbon | Toronto | Singapore |\n|---|---|---|---|\n"
    "| Annual leave | 25 days | 20 days | 21 days |\n"
    "| Wellbeing budget | EUR 400 | CAD 600 | SGD 600 |",
    is_table=True,
    heading_path=("Benefits Overview", "Leave by office"),
)


def test_a_table_row_lead_reads_as_a_sentence_from_its_header_and_cells() -> None:
    approver = _decided("Who approves travel over 5,000 EUR?", [APPROVAL_TABLE], 0.0)
    assert approver.text.startswith(
        "The approver for over EUR 5,000 is Chief Financial Officer (Rajiv Menon); "
        "the backup approver is Chief Executive Officer. [1]"
    ), approver.text
    lisbon = _decided("How many days of annual leave do I get in Lisbon?", [LEAVE_TABLE], 0.0)
    assert lisbon.text == "Annual leave in Lisbon: 25 days. [1]", lisbon.text
    # The row itself stays in the excerpt, every cell of it.
    rows = [s for e in lisbon.excerpts for s in e.sentences]
    assert "Benefit: Annual leave; Lisbon: 25 days; Toronto: 20 days; Singapore: 21 days." in rows


def test_supports_marks_only_what_backs_the_lead() -> None:
    claims = _hit(
        1,
        "Submit claims in the People portal within 30 days of the expense. Sick leave of more "
        "than 3 days needs a doctor's note.",
        heading_path=("Travel and Expenses Policy", "Submitting a Claim"),
    )
    draft = _decided("How long do I have to submit an expense claim?", [claims], 0.0)
    assert draft.asserted and "30 days" in draft.text
    excerpt = draft.excerpts[0]
    supports = [excerpt.sentences[i] for i in excerpt.supports]
    assert len(excerpt.marked) == 2  # both sentences drawn: each adds a fact...
    assert supports == [excerpt.sentences[0]]  # ...the sick-leave one is shown, not marked
    shown = _decided("How long do I have to submit an expense claim?", [claims], 1.0)
    assert not shown.asserted
    # Without an asserted lead, each passage's best sentence is the one marked.
    assert [shown.excerpts[0].sentences[i] for i in shown.excerpts[0].supports] == supports
