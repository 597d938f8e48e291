"""Uploads from the chat page, in a real browser against a real server and real runs: a Word
file dropped on the page is stored for the group the reader chose, the deployment's own
sensors request the runs that index it, and the page follows it from queued to indexed; a
broken file shows why it failed, a type Lorehouse does not read is refused on the spot, the
new document is offered to `@` mentions and answers from it, and an outsider never sees it.

Screenshots are written to `LOREHOUSE_SCREENSHOT_DIR` (the docs' come from there) or to the
test's temporary folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.api.test_uploads import lab_safety_docx
from tests.dagster_daemon import UploadDeployment
from tests.e2e.test_chat_page import DESKTOP, PHONE, _answered, _fits, _signed_in
from tests.local_http import serve_app

#: The page asks again every two seconds; the runs have finished before it does.
FOLLOW_MS = 15_000
GOGGLES = "Are goggles required in the wet lab?"


@pytest.fixture(scope="module")
def server(upload_deployment: UploadDeployment) -> Iterator[str]:
    yield from serve_app(upload_deployment.settings)


def _drop(page: Page, files: dict[str, bytes]) -> None:
    """Drops `files` on the page as a file manager does: a drop event carrying them."""
    transfer = page.evaluate_handle(
        """(files) => {
            const transfer = new DataTransfer();
            for (const [name, bytes] of files) {
                transfer.items.add(new File([new Uint8Array(bytes)], name));
            }
            return transfer;
        }""",
        [[name, list(data)] for name, data in files.items()],
    )
    page.dispatch_event("#conversation", "dragover", {"dataTransfer": transfer})
    page.dispatch_event("#conversation", "drop", {"dataTransfer": transfer})


def test_a_dropped_word_file_is_indexed_for_the_chosen_group_and_no_one_else(
    browser: Browser, server: str, upload_deployment: UploadDeployment, screenshots: Path
) -> None:
    page = _signed_in(browser, server, upload_deployment.keys["member"])
    page.click("#uploads-toggle")
    groups = page.locator("input[name=upload-group]")
    expect(groups).to_have_count(2)
    page.uncheck("input[name=upload-group][value=lab]")  # for research alone

    _drop(
        page,
        {
            "Lab safety.docx": lab_safety_docx(),
            "broken.docx": b"this is not a Word file",
            "tool.exe": b"MZ",
        },
    )
    status = page.locator("[data-testid=uploads-status]")
    expect(status).to_contain_text("tool.exe: not a type Lorehouse reads")
    expect(status).to_contain_text("Lab safety.docx: added")
    uploads = page.locator("[data-testid=upload]")
    expect(uploads).to_have_count(2)
    lab = uploads.filter(has_text="Lab safety.docx")
    broken = uploads.filter(has_text="broken.docx")
    expect(lab.locator("[data-testid=upload-state]")).to_have_text("Queued")
    expect(lab).to_contain_text("For research")

    runs = upload_deployment.ticks.settle("upload_sensor")
    assert runs[0] == ("inventory_job", None) and runs[-1] == ("merge_job", None)
    expect(lab.locator("[data-testid=upload-state]")).to_have_text("Indexed", timeout=FOLLOW_MS)
    expect(broken.locator("[data-testid=upload-state]")).to_have_text("Failed")
    expect(broken.locator("[data-testid=upload-detail]")).to_contain_text(
        "not in a format Lorehouse reads"
    )
    _fits(page)
    page.screenshot(path=screenshots / "chat-desktop-uploads.png")

    # The new document is the reader's to mention and to ask about.
    page.click("#close-uploads")
    page.click("#question")
    page.keyboard.type("@safety")
    offered = page.locator("[data-testid=mention]")
    expect(offered.first).to_be_visible()
    expect(offered).to_have_count(1)
    expect(offered.first).to_contain_text("Lab safety")
    page.keyboard.press("Enter")
    page.keyboard.type(GOGGLES)
    page.keyboard.press("Enter")
    _answered(page)
    cited = page.locator("[data-testid=turn]").last.locator(".sources code").all_inner_texts()
    assert cited and all(path.endswith("/Lab safety.docx") for path in cited), cited

    # An outsider asks the same: the file is neither cited, listed nor offered.
    outsider = _signed_in(browser, server, upload_deployment.keys["outsider"])
    outsider.fill("#question", GOGGLES)
    outsider.click("#send")
    _answered(outsider)
    turn = outsider.locator("[data-testid=turn]").last
    assert "Lab safety" not in turn.inner_text()
    assert "Lab safety" not in outsider.locator("#library").inner_text()
    outsider.click("#uploads-toggle")
    expect(outsider.locator("[data-testid=upload]")).to_have_count(0)

    # On a phone the panel takes the screen, and nothing is wider than it.
    phone = _signed_in(browser, server, upload_deployment.keys["member"], PHONE)
    phone.click("#uploads-toggle")
    expect(phone.locator("[data-testid=upload]")).to_have_count(2)
    _fits(phone)
    phone.screenshot(path=screenshots / "chat-phone-uploads.png")


def test_a_key_without_groups_is_told_it_cannot_add_files(
    browser: Browser, server: str, upload_deployment: UploadDeployment
) -> None:
    page = _signed_in(browser, server, upload_deployment.keys["groupless"], DESKTOP)
    page.click("#uploads-toggle")
    expect(page.locator("#upload-groups")).to_contain_text("never public")
    _drop(page, {"notes.md": b"# Notes\n"})
    expect(page.locator("[data-testid=uploads-status]")).to_contain_text(
        "Choose at least one group"
    )
    expect(page.locator("[data-testid=upload]")).to_have_count(0)
