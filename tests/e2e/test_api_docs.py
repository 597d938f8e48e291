"""/docs and /redoc as a newcomer meets them, offline, in a real browser: Swagger UI loads
from the package, the Authorize button takes an API key, the search example finds the answer,
and ReDoc fetches nothing from outside the server."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, expect


def test_the_docs_load_offline_authorize_and_run_the_search_example(
    browser: Browser, server: str, keys: dict, screenshots: Path
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    offline = []
    page.on("request", lambda r: offline.append(r.url) if "127.0.0.1" not in r.url else None)
    page.goto(f"{server}/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Lorehouse")
    page.screenshot(path=screenshots / "docs-1-operations.png")

    page.click("button.authorize")
    modal = page.locator(".modal-ux")
    modal.locator("input").first.fill(keys["reader"])
    modal.locator("button.authorize").first.click()
    modal.locator("button.btn-done").first.click()

    search = page.locator("#operations-search-search_v1_search_post")
    search.locator(".opblock-summary").click()
    search.locator("button.try-out__btn").click()
    search.locator("button.execute").click()
    response = search.locator(".live-responses-table .response .response-col_status").first
    expect(response).to_have_text("200", timeout=30_000)
    expect(search.locator(".live-responses-table .microlight").first).to_contain_text("20 weeks")
    page.screenshot(path=screenshots / "docs-2-search-example.png", full_page=False)
    assert offline == [], offline  # nothing was fetched from outside the server


def test_redoc_loads_offline_and_fetches_nothing_from_elsewhere(
    browser: Browser, server: str
) -> None:
    """ReDoc's script asks Redocly's CDN for its footer logo; the page must not."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if "127.0.0.1" not in r.url else None)
    page.goto(f"{server}/redoc")
    expect(page.locator(".api-info h1")).to_contain_text("Lorehouse", timeout=30_000)
    expect(page.get_by_text("/v1/search").first).to_be_attached()
    page.wait_for_load_state("networkidle")
    assert outside == [], outside
    expect(page.locator("a[href*='redocly.com']")).to_be_hidden()
