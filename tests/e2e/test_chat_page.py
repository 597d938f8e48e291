"""The chat page in a real browser (Debian's chromium, driven by Playwright) against a real
server: sign in, ask, watch the answer stream in, open a citation with its highlighted page,
filter, send feedback; an outsider never sees a restricted document.

Screenshots of each step are written to `LOREHOUSE_SCREENSHOT_DIR` (the docs' come from
there) or to the test's temporary folder.
"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, Page, Route, expect

from lorehouse.stores.duckdb_store import DuckDBStore

REMOTE_WORK = "For how many days a year may I work from another country?"
LEAVE = "How many weeks of parental leave do primary caregivers get?"
INCIDENTS = "Who declares a security incident and how are severities defined?"


def _signed_in(browser: Browser, server: str, key: str) -> Page:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{server}/chat")
    page.fill("#api-key", key)
    page.click("#sign-in button[type=submit]")
    expect(page.locator("#who")).to_contain_text("signed in")
    return page


def _ask(page: Page, question: str) -> None:
    page.fill("#question", question)
    page.click("#send")
    turn = page.locator("[data-testid=turn]").last
    expect(turn.locator("[data-testid=feedback]")).to_be_visible(timeout=60_000)


def test_a_reader_asks_checks_a_source_filters_and_gives_feedback(
    browser: Browser, server: str, keys: dict, stores: Path, screenshots: Path
) -> None:
    page = _signed_in(browser, server, keys["reader"])
    page.screenshot(path=screenshots / "chat-1-signed-in.png")

    _ask(page, REMOTE_WORK)
    turn = page.locator("[data-testid=turn]").last
    # The steps before the answer arrived as they finished, then the answer with citations.
    expect(turn.locator("[data-testid=thinking] li")).to_have_count(4)
    expect(turn.locator("[data-testid=answer]")).to_contain_text("20 working days")
    citations = turn.locator("[data-testid=citation]")
    expect(citations.first).to_be_visible()
    page.screenshot(path=screenshots / "chat-2-answer.png")

    # A citation opens the source: the passage between its neighbours and the PDF page.
    pdf_citation = turn.locator(".sources .cite", has_text="Employee Handbook").first
    pdf_citation.click()
    expect(page.locator("#source")).to_be_visible()
    expect(page.locator("[data-testid=cited-chunk]")).to_contain_text("20 working days")
    expect(page.locator("#source-where")).to_contain_text("employee-handbook.pdf")
    image = page.locator("#source-page")
    expect(image).to_be_visible()
    page.wait_for_function("document.getElementById('source-page').naturalWidth > 300")
    page.screenshot(path=screenshots / "chat-3-source.png")
    image.scroll_into_view_if_needed()
    page.screenshot(path=screenshots / "chat-3-source-page.png")

    # A filter on Markdown files: every source of the next answer is a Markdown file.
    page.click("#filters summary")
    page.check("#file-types input[value=md]")
    expect(page.locator("#filter-summary")).to_contain_text("file_types")
    _ask(page, LEAVE)
    turn = page.locator("[data-testid=turn]").last
    expect(turn.locator("[data-testid=answer]")).to_contain_text("20 weeks")
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
    assert rows.iloc[0]["question"] == LEAVE
    assert rows.iloc[0]["comment"] == "Say whether it is paid."

    # A link to a citation, as a Slack answer carries it, opens the passage directly.
    cited = rows.iloc[0]["cited_chunk_ids"][0]
    page.goto(f"{server}/chat#chunk={cited}")
    expect(page.locator("[data-testid=cited-chunk]")).to_contain_text("20 weeks")


def test_a_restricted_document_never_appears_for_an_outsider(
    browser: Browser, server: str, keys: dict
) -> None:
    outsider = _signed_in(browser, server, keys["reader"])
    options = outsider.locator("#doc-list option")
    expect(options.first).to_be_attached()
    listed = [options.nth(i).get_attribute("value") or "" for i in range(options.count())]
    assert listed and not [label for label in listed if "security/" in label]
    _ask(outsider, INCIDENTS)
    turn = outsider.locator("[data-testid=turn]").last
    # The public runbook names the plan; the plan itself is never a source.
    assert "security/" not in turn.inner_text()
    plan = turn.locator(".sources .cite", has_text="Security Incident Response Plan")
    expect(plan).to_have_count(0)

    # Control: a member of the group sees the document in the list and in the sources.
    member = _signed_in(browser, server, keys["security"])
    expect(member.locator("#doc-list option[value*='security/']").first).to_be_attached()
    _ask(member, INCIDENTS)
    expect(member.locator("[data-testid=turn] .sources").last).to_contain_text("security/")


def test_a_key_entered_while_the_page_still_loads_stays_signed_in(
    browser: Browser, server: str, keys: dict
) -> None:
    """The page signs in with its stored key (none here) as it loads. When that answer comes
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
    page.fill("#api-key", keys["reader"])
    page.click("#sign-in button[type=submit]")
    expect(page.locator("#who")).to_contain_text("signed in")
    assert len(held) == 1, "the page's own sign-in was not held"

    with page.expect_response(lambda response: response.status == 401):
        held[0].continue_()
    page.wait_for_timeout(300)  # the page handles the late answer

    expect(page.locator("#who")).to_contain_text("signed in")
    expect(page.locator("#doc-list option").first).to_be_attached()
