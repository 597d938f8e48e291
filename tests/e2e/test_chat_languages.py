"""A German question in the chat page: a German lead, or a German "not found", citing the
German source; and the words the page puts around an answer in German too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Locator, expect

from tests.dagster_daemon import UploadDeployment
from tests.e2e.test_chat_page import _answered, _signed_in
from tests.local_http import serve_app


@pytest.fixture(scope="module")
def server(upload_deployment: UploadDeployment) -> Iterator[str]:
    yield from serve_app(upload_deployment.settings)


def test_a_german_question_gets_german_words_and_cites_the_german_source(
    browser: Browser, server: str, upload_deployment: UploadDeployment
) -> None:
    page = _signed_in(browser, server, upload_deployment.keys["member"])

    def asked(question: str) -> Locator:
        page.fill("#question", question)
        page.click("#send")
        _answered(page)
        return page.locator("[data-testid=turn]").last

    turn = asked("Bis zu welchem Betrag werden Hotelkosten pro Nacht erstattet?")
    expect(turn.locator("[data-testid=answer]")).to_contain_text("150 Euro")
    cited = turn.locator(".sources code").all_inner_texts()
    assert cited and set(cited) == {"docs/reisen.md"}, cited
    expect(turn.locator("[data-testid=details] summary")).to_have_text("Wie die Antwort entstand")
    expect(turn.get_by_role("button", name="helpful").first).to_have_text("▲ Hilfreich")

    declined = asked("Wie viele Tage Sonderurlaub gibt es laut BGB bei einer Hochzeit?")
    expect(declined.locator("[data-testid=answer]")).to_contain_text(
        "Keines der Dokumente, die Sie lesen dürfen, erwähnt „BGB“"
    )

    # An English question on the same page keeps English words.
    english = asked("How many days of paid leave does everyone get a year?")
    expect(english.locator("[data-testid=details] summary")).to_have_text(
        "How the answer was derived"
    )


def test_the_page_speaks_the_browsers_language(
    browser: Browser, server: str, upload_deployment: UploadDeployment
) -> None:
    context = browser.new_context(locale="de-DE")
    page = context.new_page()
    page.goto(f"{server}/chat")
    page.fill("#api-key", upload_deployment.keys["member"])
    page.click("#sign-in button[type=submit]")
    expect(page.locator("#sign-out")).to_be_visible()
    expect(page.locator("#question")).to_have_attribute("placeholder", "Stellen Sie eine Frage")
    expect(page.locator("#send")).to_have_text("Fragen")
    context.close()
