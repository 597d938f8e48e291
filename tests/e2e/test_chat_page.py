"""The chat page in a real browser (Debian's chromium, driven by Playwright) against a real
server, on a phone (390x844) and on a desktop (1280x800): sign in (a wrong key, then the
right one), start from a suggested question, watch the answer arrive, open a citation (a
full-screen sheet on the phone, a column beside the answer on the desktop) with its
supporting sentence marked, its PDF pages and its tables as tables, filter (also down to
nothing), lose the server and retry, send feedback; see an asserted lead, the closest
passages only and not found told apart; an outsider never sees a restricted document. The
page never scrolls sideways.

Screenshots of each step are written to `LOREHOUSE_SCREENSHOT_DIR` (the docs' come from
there) or to the test's temporary folder.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from playwright.sync_api import Browser, Dialog, Locator, Page, Request, Route, expect

from lorehouse.stores.duckdb_store import DuckDBStore

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
REMOTE_WORK = "For how many days a year may I work from another country?"
LEAVE = "How many weeks of parental leave do primary caregivers get?"
#: The parental-leave FAQ's own question: asserted by default.
LEAVE_FAQ = "How many weeks of parental leave do I get?"
INCIDENTS = "Who declares a security incident and how are severities defined?"
LONDON_HOTEL = "What is the hotel limit per night in London?"
NOT_IN_THE_DOCUMENTS = "What is the capital of Mongolia?"
NOT_STATED = "The documents don't state this directly"
ANSWER_SECONDS = 60


def _sign_in(page: Page, key: str) -> None:
    page.fill("#api-key", key)
    page.click("#sign-in button[type=submit]")


def _signed_in(browser: Browser, server: str, key: str, viewport: dict | None = None) -> Page:
    page = browser.new_page(viewport=viewport or DESKTOP)
    page.goto(f"{server}/chat")
    _sign_in(page, key)
    expect(page.locator("#sign-out")).to_be_visible()
    return page


def _answered(page: Page) -> None:
    turn = page.locator("[data-testid=turn]").last
    expect(turn.locator("[data-testid=feedback]")).to_be_visible(timeout=ANSWER_SECONDS * 1000)


def _ask(page: Page, question: str) -> None:
    page.fill("#question", question)
    page.click("#send")
    _answered(page)


def _fits(page: Page) -> None:
    """Nothing is wider than the screen: the page never scrolls sideways."""
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"the page is {widths[0]} px wide on a {widths[1]} px screen"


def _on_screen(page: Page, selector: str) -> None:
    box = page.locator(selector).bounding_box()
    height = page.viewport_size["height"] if page.viewport_size else 0
    assert box and box["y"] >= 0 and box["y"] + box["height"] <= height, (selector, box)


def _drawn(image: Locator) -> None:
    """Waits for a page image to arrive and be decoded: a page, not a placeholder.

    (`wait_for_function` cannot poll here: the page's policy forbids evaluating strings.)
    """
    expect(image).to_have_attribute("src", re.compile(r"^blob:"))
    assert image.evaluate("image => image.decode().then(() => image.naturalWidth)") > 300


def _chunk_id(stores: Path, rel_path: str, where: str) -> str:
    with DuckDBStore(stores / "lorehouse.duckdb").connect() as connection:
        row = connection.execute(
            "SELECT c.chunk_id FROM chunks c JOIN documents_raw r USING (doc_id) "
            f"WHERE r.rel_path = ? AND {where} ORDER BY c.position LIMIT 1",
            [rel_path],
        ).fetchone()
    assert row, f"no chunk of {rel_path} where {where}"
    return str(row[0])


def _open_link(page: Page, chunk_id: str) -> None:
    """What a link to a citation (from a Slack answer) does: /chat#chunk=<id>."""
    page.evaluate("id => { window.location.hash = `chunk=${id}`; }", chunk_id)


def test_on_a_phone_a_reader_signs_in_asks_a_suggested_question_and_opens_a_citation(
    browser: Browser, server: str, keys: dict, screenshots: Path
) -> None:
    page = browser.new_page(viewport=PHONE)
    page.goto(f"{server}/chat")
    # Before anything is typed the page asks for a key, in words and not in red.
    who = page.locator("#who")
    expect(who).to_have_text("Enter your API key to start")
    expect(who).not_to_have_class(re.compile("error"))
    expect(page.locator("#question")).to_be_disabled()
    assert page.locator("#bar").bounding_box()["height"] < 0.15 * PHONE["height"]
    _fits(page)
    page.screenshot(path=screenshots / "chat-phone-sign-in.png")

    _sign_in(page, "not-a-key")
    expect(who).to_have_text("That key was not accepted")
    expect(who).to_have_class(re.compile("error"))
    page.screenshot(path=screenshots / "chat-phone-wrong-key.png")

    _sign_in(page, keys["reader"])
    expect(page.locator("#sign-out")).to_be_visible()
    expect(page.locator("#api-key")).to_be_hidden()
    # Before the first question: what to ask, and which documents there are.
    suggestion = page.locator("[data-testid=suggestion]", has_text="parental leave").first
    expect(suggestion).to_be_visible()
    expect(page.locator("#library-list")).to_contain_text("Employee Handbook")
    assert page.locator("#bar").bounding_box()["height"] < 0.1 * PHONE["height"]
    _fits(page)
    page.screenshot(path=screenshots / "chat-phone-signed-in.png")

    suggestion.click()
    _answered(page)
    turn = page.locator("[data-testid=turn]").last
    expect(turn.locator(".question")).to_contain_text("parental leave")
    expect(turn.locator("[data-testid=answer]")).to_contain_text("weeks")
    _on_screen(page, "#ask")  # the composer stays pinned at the bottom
    _fits(page)
    page.screenshot(path=screenshots / "chat-phone-answer.png")

    # [1] opens the source as a sheet over the whole screen, the supporting sentence marked.
    turn.locator("[data-testid=citation]").first.click()
    sheet = page.locator("#source")
    expect(sheet).to_be_visible()
    marks = page.locator("[data-testid=cited-chunk] mark")
    expect(marks.first).to_be_visible()
    assert "20 weeks" in " ".join(marks.all_inner_texts())
    assert sheet.bounding_box() == {"x": 0, "y": 0, **PHONE}
    expect(page.locator("#close-source")).to_be_in_viewport()
    _fits(page)
    page.screenshot(path=screenshots / "chat-phone-citation.png")
    page.click("#close-source")
    expect(sheet).to_be_hidden()
    expect(turn.locator("[data-testid=citation]").first).to_be_focused()
    _fits(page)

    # The narrowest phone, the filters open: still nothing to scroll sideways.
    page.set_viewport_size({"width": 360, "height": 740})
    page.click("#filters-toggle")
    expect(page.locator("#doc-options [data-rel-path]").first).to_be_visible()
    _fits(page)
    page.screenshot(path=screenshots / "chat-phone-filters.png")


def test_on_a_desktop_a_reader_asks_checks_sources_filters_retries_and_gives_feedback(
    browser: Browser, server: str, keys: dict, stores: Path, screenshots: Path
) -> None:
    page = _signed_in(browser, server, keys["reader"])
    expect(page.locator("#who")).to_have_text("Signed in as reader")
    expect(page.locator("[data-testid=suggestion]").nth(2)).to_be_visible()
    expect(page.locator("#library-list")).to_contain_text("Travel and Expenses Policy")
    assert page.locator("#bar").bounding_box()["height"] <= 60
    page.screenshot(path=screenshots / "chat-1-signed-in.png")

    _ask(page, REMOTE_WORK)
    turn = page.locator("[data-testid=turn]").last
    expect(turn.locator("[data-testid=answer]")).to_contain_text("20 working days")
    # The steps and their timings wait behind "Details".
    assert "retrieval" not in turn.inner_text()
    steps = turn.locator("[data-testid=thinking] li")
    expect(steps.first).to_be_hidden()
    turn.locator("[data-testid=details] summary").click()
    expect(steps.first).to_be_visible()
    assert steps.count() >= 4 and "ms" in steps.first.inner_text()
    turn.locator("[data-testid=details] summary").click()
    # The view follows the answer and the composer stays in reach.
    expect(turn).to_be_in_viewport()
    _on_screen(page, "#ask")
    _fits(page)
    page.screenshot(path=screenshots / "chat-2-answer.png")

    # A PDF citation: the page first (every page the passage spans), then the passage.
    turn.locator(".sources .cite", has_text="Employee Handbook").first.click()
    source = page.locator("#source")
    expect(source).to_be_visible()
    cited = page.locator("[data-testid=cited-chunk]")
    expect(cited).to_contain_text("20 working days")
    expect(page.locator("#source-where")).to_contain_text("employee-handbook.pdf")
    image = page.locator("[data-testid=source-page]").first
    expect(image).to_be_visible()
    _drawn(image)
    assert image.bounding_box()["y"] < cited.bounding_box()["y"]
    expect(turn).to_be_in_viewport()  # the answer stays beside the source
    _fits(page)
    page.screenshot(path=screenshots / "chat-3-source-page.png")
    cited.scroll_into_view_if_needed()
    page.screenshot(path=screenshots / "chat-3-source.png")

    # A table across two pages: both pages, the table as a table.
    holidays = _chunk_id(
        stores, "handbook/employee-handbook.pdf", "c.page_end = c.page_start + 1 AND c.is_table"
    )
    _open_link(page, holidays)
    expect(page.locator("#source-where")).to_contain_text("pp. 8-9")
    pages = page.locator("[data-testid=source-page]")
    expect(pages).to_have_count(2)
    assert [pages.nth(i).get_attribute("data-page") for i in range(2)] == ["8", "9"]
    for number in range(2):
        _drawn(pages.nth(number))
    expect(cited.locator("table th").first).to_have_text("Date")
    page.screenshot(path=screenshots / "chat-desktop-pages.png")

    # A table is a table, the row the answer rests on marked (asserted or not, the
    # excerpt's source opens it).
    _ask(page, LONDON_HOTEL)
    turn = page.locator("[data-testid=turn]").last
    turn.locator("[data-testid=excerpt] button.cite").first.click()
    expect(cited.locator("table th").first).to_have_text("City")
    supporting = page.locator("[data-testid=supporting-row]")
    expect(supporting.filter(has_text="London").first).to_be_visible()
    assert "| ---" not in cited.inner_text() and "| London |" not in cited.inner_text()
    _fits(page)
    page.screenshot(path=screenshots / "chat-desktop-table.png")

    # A sheet spaced out by a blank column and a blank row is one table: every row under
    # the column names, each row with its department.
    sheet = _chunk_id(stores, "finance/budget-2026.xlsx", "c.text_chat LIKE '%| 30 | 2005 |%'")
    _open_link(page, sheet)
    header = cited.locator("table thead").first
    expect(header).to_contain_text("Department")
    expect(header).to_contain_text("Training")
    row = cited.locator("tbody tr", has_text="Sales and Marketing")
    expect(row).to_contain_text("2005")
    expect(cited.locator("[data-testid=repeated-header]")).to_have_count(0)
    page.screenshot(path=screenshots / "chat-desktop-sheet.png")
    page.click("#close-source")
    expect(source).to_be_hidden()

    # A table the document itself breaks (a PDF table going on over a page without its
    # header) starts with a data row: it gets the column names of the table it continues.
    continued = page.evaluate(
        r"""() => {
          const chunk = (id, table) => ({ chunk_id: id, heading_path: ["Budgets"],
            text_chat: `Budgets\n\n${table}` });
          const first = chunk("a", "| Department | Total |\n| --- | --- |\n| Data | 4618 |");
          const cut = chunk("b", "| Finance | 825 |\n| --- | --- |\n| People | 928 |");
          const parsed = parseChunks([cut], cut, [first]);
          const missing = repeatHeaders(parsed);
          const table = parsed[1].blocks.find((block) => block.type === "table");
          return { missing, header: table.header, rows: table.rows, repeated: table.repeated };
        }"""
    )
    assert continued == {
        "missing": False,
        "header": ["Department", "Total"],
        "rows": [["Finance", "825"], ["People", "928"]],
        "repeated": True,
    }

    # Filters offer the file types the reader's documents have, and show on the answer.
    page.click("#filters-toggle")
    types = page.locator("#file-types input")
    offered = {types.nth(i).get_attribute("value") for i in range(types.count())}
    assert offered == {"pdf", "docx", "pptx", "xlsx", "html", "md"}
    page.check("#file-types input[value=md]")
    expect(page.locator("[data-testid=filter-summary]")).to_have_text(
        re.compile(r"Filtered: Markdown")
    )
    _ask(page, LEAVE_FAQ)
    turn = page.locator("[data-testid=turn]").last
    expect(turn.locator("[data-testid=answer]")).to_contain_text("20 weeks")
    expect(turn.locator("[data-testid=applied-filters]")).to_have_text("Filtered: Markdown")
    for text in turn.locator(".sources li").all_inner_texts():
        assert ".pdf" not in text and ".docx" not in text, text
    page.screenshot(path=screenshots / "chat-4-filtered.png")

    # Feedback on that answer lands in the feature store.
    turn.locator("[data-testid=feedback] input").fill("Say whether it is paid.")
    turn.locator("[data-testid=feedback] button[aria-label='not helpful']").click()
    expect(turn.locator("[data-testid=feedback]")).to_contain_text("Thanks")
    page.screenshot(path=screenshots / "chat-5-feedback.png")
    rows = DuckDBStore(stores / "lorehouse.duckdb").feedback()
    assert list(rows["rating"]) == ["down"]
    assert rows.iloc[0]["question"] == LEAVE_FAQ
    assert rows.iloc[0]["comment"] == "Say whether it is paid."

    # A filter no document matches is said so, from the reader's own document list.
    page.click("#filters-toggle")
    page.fill("#doc-search", "parental")
    page.check("#doc-options [data-rel-path='hr/parental-leave-faq.md'] input")
    page.uncheck("#file-types input[value=md]")
    page.check("#file-types input[value=pdf]")
    expect(page.locator("[data-testid=filter-summary]")).to_contain_text(
        "No document matches these filters"
    )
    asked: list[Request] = []
    page.on("request", lambda request: asked.append(request) if "/v1/ask" in request.url else None)
    page.fill("#question", REMOTE_WORK)
    page.click("#send")
    expect(
        page.locator("[data-testid=turn]").last.locator("[data-testid=no-match]")
    ).to_contain_text("No document matches these filters")
    assert asked == []
    page.screenshot(path=screenshots / "chat-desktop-no-match.png")
    page.click("#clear-filters-inline")
    expect(page.locator("[data-testid=filter-summary]")).to_be_hidden()

    # The server cannot be reached: the question stays in the composer and Retry asks again.
    page.route("**/v1/ask", lambda route: route.abort("connectionrefused"))
    page.fill("#question", REMOTE_WORK)
    page.click("#send")
    turn = page.locator("[data-testid=turn]").last
    expect(turn.locator("[data-testid=failure]")).to_contain_text("Cannot reach the server")
    expect(page.locator("#question")).to_have_value(REMOTE_WORK)
    page.screenshot(path=screenshots / "chat-desktop-offline.png")
    page.unroute("**/v1/ask")
    turn.locator("[data-testid=retry]").click()
    _answered(page)
    turn = page.locator("[data-testid=turn]").last
    expect(turn.locator("[data-testid=answer]")).to_contain_text("20 working days")
    expect(page.locator("#question")).to_have_value("")
    expect(page.locator("[data-testid=failure]")).to_have_count(0)

    # A link to a citation, as a Slack answer carries it, opens the passage directly.
    _open_link(page, rows.iloc[0]["cited_chunk_ids"][0])
    expect(cited).to_contain_text("20 weeks")


def _weight(locator: Locator) -> int:
    return int(locator.evaluate("node => getComputedStyle(node).fontWeight"))


def test_each_kind_of_answer_shows_whether_it_asserts_the_answer(
    browser: Browser, server: str, passages_server: str, keys: dict, screenshots: Path
) -> None:
    """An asserted lead, the closest passages only (from a server that asserts no lead), and
    not found: a reader sees at a glance which one Lorehouse gave."""
    page = _signed_in(browser, server, keys["reader"])
    _ask(page, LEAVE_FAQ)
    turn = page.locator("[data-testid=turn]").last
    answer = turn.locator("[data-testid=answer]")
    # The lead states the fact in the answer's type, with its citation; no notice.
    expect(answer).to_contain_text("20 weeks")
    expect(answer.locator("[data-testid=citation]").first).to_be_visible()
    expect(turn.locator("[data-testid=passages-notice]")).to_have_count(0)
    assert NOT_STATED not in turn.inner_text()
    asserted_weight = _weight(answer)
    _fits(page)
    page.screenshot(path=screenshots / "chat-6-asserted.png")

    page = _signed_in(browser, passages_server, keys["reader"])
    _ask(page, LEAVE)
    turn = page.locator("[data-testid=turn]").last
    answer = turn.locator("[data-testid=answer]")
    # No lead: a note says so, in plain type, and nothing in the answer's place reads as a fact.
    notice = turn.locator("[data-testid=passages-notice]")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text(NOT_STATED)
    expect(notice).to_contain_text("closest passages")
    assert "20 weeks" not in answer.inner_text()
    expect(answer.locator("[data-testid=citation]")).to_have_count(0)
    assert _weight(notice) < asserted_weight
    # The passages are the answer: open without a click, the nearest sentences highlighted.
    excerpts = turn.locator("[data-testid=excerpt]")
    assert excerpts.count() >= 2
    marked = turn.locator("[data-testid=excerpt] mark")
    expect(marked.first).to_be_visible()
    expect(marked.first).to_be_in_viewport()
    assert "20 weeks" in " ".join(marked.all_inner_texts())
    _fits(page)
    page.screenshot(path=screenshots / "chat-7-passages.png")

    # Not found, as before: said in words, the nearest sources listed, no notice.
    page.click("#new-conversation")
    _ask(page, NOT_IN_THE_DOCUMENTS)
    turn = page.locator("[data-testid=turn]").last
    expect(turn.locator("[data-testid=answer]")).to_contain_text("do not answer")
    expect(turn.locator("[data-testid=related] li").first).to_be_visible()
    expect(turn.locator("[data-testid=passages-notice]")).to_have_count(0)
    expect(turn.locator("[data-testid=excerpt]")).to_have_count(0)
    _fits(page)
    page.screenshot(path=screenshots / "chat-8-not-found.png")


def test_a_restricted_document_never_appears_for_an_outsider(
    browser: Browser, server: str, keys: dict
) -> None:
    outsider = _signed_in(browser, server, keys["reader"])
    options = outsider.locator("#doc-options [data-rel-path]")
    expect(options.first).to_be_attached()
    listed = [options.nth(i).get_attribute("data-rel-path") or "" for i in range(options.count())]
    assert listed and not [path for path in listed if path.startswith("security/")]
    expect(outsider.locator("[data-testid=suggestion]").first).to_be_visible()
    assert "security/" not in outsider.locator("#welcome").inner_text()
    assert "Security Incident" not in outsider.locator("#welcome").inner_text()
    _ask(outsider, INCIDENTS)
    turn = outsider.locator("[data-testid=turn]").last
    # The public runbook names the plan; the plan itself is never a source.
    assert "security/" not in turn.inner_text()
    plan = turn.locator(".sources .cite", has_text="Security Incident Response Plan")
    expect(plan).to_have_count(0)

    # Control: a member of the group sees the document in the list and in the sources.
    member = _signed_in(browser, server, keys["security"])
    expect(member.locator("#doc-options [data-rel-path^='security/']").first).to_be_attached()
    _ask(member, INCIDENTS)
    expect(member.locator("[data-testid=turn] .sources").last).to_contain_text("security/")


def test_a_key_entered_while_the_page_still_loads_stays_signed_in(
    browser: Browser, server: str, keys: dict
) -> None:
    """The page checks whether the server needs a key as it loads. When that answer comes
    late, after the reader signed in with their key, it must not sign them out."""
    page = browser.new_page()
    held: list[Route] = []

    def hold_the_keyless_check(route: Route) -> None:
        if "x-api-key" in route.request.headers:
            route.continue_()
        else:
            held.append(route)

    page.route("**/v1/health", hold_the_keyless_check)
    page.goto(f"{server}/chat")
    expect(page.locator("#who")).to_have_text("Connecting…")
    _sign_in(page, keys["reader"])
    expect(page.locator("#who")).to_have_text("Signed in as reader")
    assert len(held) == 1, "the page's own check was not held"

    with page.expect_response(lambda response: response.status == 401):
        held[0].continue_()
    page.wait_for_timeout(300)  # the page handles the late answer

    expect(page.locator("#who")).to_have_text("Signed in as reader")
    expect(page.locator("#doc-options [data-rel-path]").first).to_be_attached()


def test_a_server_without_keys_shows_no_sign_in(browser: Browser, server: str, keys: dict) -> None:
    """Without a keys file every request is answered without a key; the page then has
    nothing to sign in to. (Simulated: each request gets a key on its way.)"""
    page = browser.new_page()
    page.route(
        "**/v1/**",
        lambda route: route.continue_(
            headers={**route.request.headers, "x-api-key": keys["reader"]}
        ),
    )
    page.goto(f"{server}/chat")
    expect(page.locator("[data-testid=suggestion]").first).to_be_visible()
    expect(page.locator("#question")).to_be_enabled()
    for absent in ("#sign-in", "#sign-out", "#who"):
        expect(page.locator(absent)).to_be_hidden()


def test_conversations_are_kept_on_the_server_reopened_renamed_and_deleted(
    browser: Browser, server: str, keys: dict, screenshots: Path
) -> None:
    """A reader's conversations outlive a reload, are listed with their questions, open
    again as they were, take a new name, and go when deleted."""
    key = keys["note-taker"]
    page = _signed_in(browser, server, key)
    _ask(page, LEAVE_FAQ)
    _ask(page, "And how long for secondary caregivers?")
    answers = page.locator("[data-testid=turn] [data-testid=answer]")
    first_answer = answers.first.inner_text()

    page.reload()
    expect(page.locator("#sign-out")).to_be_visible()
    expect(page.locator("[data-testid=turn]")).to_have_count(2)
    expect(answers.first).to_have_text(first_answer)
    expect(page.locator("#welcome")).to_be_hidden()

    page.click("#conversations-toggle")
    saved = page.locator("[data-testid=saved-conversation]")
    expect(saved).to_have_count(1)
    expect(saved.first.locator(".open")).to_have_text(LEAVE_FAQ)
    expect(saved.first).to_contain_text("2 questions")
    _fits(page)
    page.screenshot(path=screenshots / "chat-desktop-conversations.png")

    # Another conversation, asked in after the first: listed first.
    page.click("#start-conversation")
    expect(page.locator("#welcome")).to_be_visible()
    expect(page.locator("[data-testid=turn]")).to_have_count(0)
    _ask(page, LONDON_HOTEL)
    page.click("#conversations-toggle")
    expect(saved).to_have_count(2)
    expect(saved.first.locator(".open")).to_have_text(LONDON_HOTEL)

    # The first opens as it was, and takes a new name.
    saved.nth(1).locator(".open").click()
    expect(page.locator("#conversations")).to_be_hidden()
    expect(page.locator("[data-testid=turn]")).to_have_count(2)
    expect(answers.first).to_have_text(first_answer)
    page.click("#conversations-toggle")
    saved.nth(1).get_by_role("button", name="Rename").click()
    page.fill("#conversation-list input", "Parental leave")
    page.click("#conversation-list form button[type=submit]")
    expect(saved.nth(1).locator(".open")).to_have_text("Parental leave")

    # Deleting the one on screen leaves an empty page; the list then names only the other.
    saved.nth(1).get_by_role("button", name="Delete").click()
    saved.nth(1).locator("[data-testid=confirm-delete]").click()
    expect(saved).to_have_count(1)
    expect(saved.first.locator(".open")).to_have_text(LONDON_HOTEL)
    expect(page.locator("[data-testid=turn]")).to_have_count(0)
    saved.first.get_by_role("button", name="Delete").click()
    saved.first.locator("[data-testid=confirm-delete]").click()
    expect(saved).to_have_count(0)
    expect(page.locator("#conversations-status")).to_have_text("No saved conversations yet.")

    # On a phone the list takes the whole screen, and nothing is wider than it.
    phone = _signed_in(browser, server, key, PHONE)
    _ask(phone, LEAVE_FAQ)
    phone.click("#conversations-toggle")
    expect(phone.locator("[data-testid=saved-conversation]")).to_have_count(1)
    _fits(phone)
    phone.screenshot(path=screenshots / "chat-phone-conversations.png")


def test_an_at_mention_scopes_the_question_to_the_chosen_document(
    browser: Browser, server: str, keys: dict, screenshots: Path
) -> None:
    # Typed before the reader's documents have arrived, the offer fills in once they have.
    page = browser.new_page(viewport=DESKTOP)
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route("**/v1/documents?*", hold)
    page.goto(f"{server}/chat")
    _sign_in(page, keys["reader"])
    expect(page.locator("#sign-out")).to_be_visible()
    page.click("#question")
    page.keyboard.type("What does @hand")
    expect(page.locator("#mentions")).to_contain_text("No document of yours")
    assert len(held) == 1, "the document list was not held"
    held[0].continue_()
    page.unroute("**/v1/documents?*")
    offered = page.locator("[data-testid=mention]")
    expect(offered.first).to_be_visible()
    titles = offered.all_inner_texts()
    assert titles and all("hand" in t.lower() for t in titles), titles
    assert not [t for t in titles if "security/" in t]
    page.keyboard.press("ArrowDown")
    chosen = offered.nth(1).get_attribute("data-doc-id")
    expect(offered.nth(1)).to_have_attribute("aria-selected", "true")
    _fits(page)
    page.screenshot(path=screenshots / "chat-desktop-mention.png")
    page.keyboard.press("Enter")
    expect(page.locator("#mentions")).to_be_hidden()
    # The words after "@" leave the question; the document becomes its filter.
    expect(page.locator("#question")).to_have_value("What does ")
    expect(page.locator("#filter-summary")).to_contain_text("Filtered:")
    page.keyboard.type("it say about parental leave?")
    with page.expect_request("**/v1/ask") as sent:
        page.keyboard.press("Enter")
    body = sent.value.post_data_json
    assert body["question"] == "What does it say about parental leave?"
    assert body["filters"] == {"doc_ids": [chosen]}
    _answered(page)
    cited = page.locator("[data-testid=turn]").last.locator(".sources code").all_inner_texts()
    assert cited and len(set(cited)) == 1, cited
    assert cited[0].startswith("handbook/")


def test_a_written_answer_shows_its_markdown_and_runs_none_of_it(
    browser: Browser, model_server: str, keys: dict, screenshots: Path
) -> None:
    """A model's answer in Markdown: its table as a table, its list, code and link, each
    citation a button; the markup it wrote stays text, and nothing of it runs."""
    for viewport, name in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page = _signed_in(browser, model_server, keys["reader"], viewport)
        alerts: list[str] = []
        page.on("dialog", partial(_dismissed, alerts))
        _ask(page, LEAVE)
        answer = page.locator("[data-testid=turn]").last.locator("[data-testid=answer]")
        table = answer.locator("table")
        expect(table.locator("tbody tr")).to_have_count(2)
        expect(table.locator("th").first).to_have_text("Caregiver")
        expect(answer.locator("li")).to_have_count(2)
        expect(answer.locator("code").first).to_have_text("People Team")
        expect(answer.locator("strong")).to_have_text("8 weeks")
        expect(answer.locator("pre")).to_have_text("leave --request 20w")
        link = answer.locator("a")
        expect(link).to_have_attribute("href", "https://intranet.example/leave")
        expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
        expect(answer.locator("[data-testid=citation]")).to_have_count(1)
        expect(answer.locator("img")).to_have_count(0)
        expect(answer).to_contain_text("<img src=x onerror=alert(1)>")
        assert alerts == []
        # How the answer was derived: the queries, the documents searched, each step.
        derived = page.locator("[data-testid=turn]").last.locator("[data-testid=details]")
        derived.locator("summary").click()
        expect(derived.locator("[data-testid=derived-queries]")).to_contain_text(LEAVE)
        expect(derived.locator("[data-testid=derived-sources]")).to_contain_text(
            "every document you may read"
        )
        _fits(page)
        page.screenshot(path=screenshots / f"chat-{name}-markdown.png")


def test_the_dark_theme_follows_the_system(
    browser: Browser, server: str, keys: dict, screenshots: Path
) -> None:
    for viewport, name in ((DESKTOP, "desktop"), (PHONE, "phone")):
        context = browser.new_context(viewport=viewport, color_scheme="dark")
        page = context.new_page()
        page.goto(f"{server}/chat")
        _sign_in(page, keys["reader"])
        expect(page.locator("#sign-out")).to_be_visible()
        _ask(page, LEAVE_FAQ)
        background = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
        card = page.locator("[data-testid=turn]").last.evaluate(
            "node => getComputedStyle(node).backgroundColor"
        )
        ink = page.locator("[data-testid=turn] .question").last.evaluate(
            "node => getComputedStyle(node).color"
        )
        assert _luminance(background) < 0.1 and _luminance(card) < 0.15, (background, card)
        assert _luminance(ink) > 0.6, ink
        _fits(page)
        page.screenshot(path=screenshots / f"chat-{name}-dark.png")
        context.close()
    # Control: the light theme is light.
    light = browser.new_context(viewport=DESKTOP, color_scheme="light").new_page()
    light.goto(f"{server}/chat")
    assert (
        _luminance(light.evaluate("getComputedStyle(document.documentElement).backgroundColor"))
        > 0.8
    )


def _dismissed(alerts: list[str], dialog: Dialog) -> None:
    alerts.append(dialog.message)
    dialog.dismiss()


def _luminance(css: str) -> float:
    """0 (black) to 1 (white), from a computed `rgb(...)` colour."""
    red, green, blue = (int(part) / 255 for part in re.findall(r"\d+", css)[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue
