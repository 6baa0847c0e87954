"""The dead events view in a real headless Chromium: log in through the form, read the
error groups, select rows, run an action, confirm, and check the database.

Skipped, with the reason, where no Chromium or no Playwright is installed, or when
``EVENTFERRY_SKIP_BROWSER_TESTS`` is set (``make test`` then installs no Chromium).
Playwright drives the system's Chromium (Debian: ``apt-get install chromium``); its own
browser download (``playwright install``) is never needed.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.contrib.auth.models import User

from eventferry_django.models import OutboxEvent, Status

from .test_admin import make_event, staff_user

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
#: Where the documentation's admin page shows it (docs/admin.md), so every run with a
#: browser keeps the screenshot current; EVENTFERRY_ADMIN_SCREENSHOT puts it elsewhere.
SCREENSHOT = Path(os.environ.get(
    "EVENTFERRY_ADMIN_SCREENSHOT",
    Path(__file__).resolve().parent.parent / "docs" / "img" / "admin-dead-events.png",
))
DEAD_PATH = "/admin/eventferry_django/deadoutboxevent/"
PASSWORD = "secret-pass-123"


def find_chromium() -> str | None:
    for candidate in (os.environ.get("EVENTFERRY_CHROMIUM"), "chromium", "chromium-browser",
                      "google-chrome"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


@pytest.fixture(scope="module")
def browser(
    django_db_setup: None, live_server: Any
) -> Iterator[Browser]:
    # Asks for the test database and the live server first, so both are set up before
    # Playwright starts its event loop in this thread.
    if os.environ.get("EVENTFERRY_SKIP_BROWSER_TESTS"):
        pytest.skip("EVENTFERRY_SKIP_BROWSER_TESTS is set")
    executable = find_chromium()
    if executable is None:
        pytest.skip("no Chromium binary found (Debian: apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with pytest.MonkeyPatch.context() as patch, sync_api.sync_playwright() as playwright:
        # Playwright's sync API keeps an asyncio loop in this thread, and Django would
        # refuse the tests' own ORM calls (and the flush between tests) as if they ran in
        # async code. They do not: everything here is synchronous.
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser, live_server: Any) -> Iterator[Page]:
    context = browser.new_context(base_url=live_server.url,
                                  viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    try:
        yield context.new_page()
    finally:
        context.close()


def log_in(page: Page, user: User, next_path: str = DEAD_PATH) -> None:
    page.goto(f"/admin/login/?next={next_path}")
    page.fill("#id_username", user.get_username())
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{next_path}")


def run_action(page: Page, action: str, ids: list[int]) -> None:
    for pk in ids:
        page.check(f'input[name="_selected_action"][value="{pk}"]')
    page.select_option('select[name="action"]', action)
    page.click('button[name="index"]')


@pytest.mark.django_db(transaction=True)
def test_operator_sees_error_groups_and_redrives_two_rows(page: Page) -> None:
    down = [make_event(error="ConnectionError: broker down") for _ in range(3)]
    # A minute later than the others: within the column's precision, two errors made one
    # after the other could share a timestamp and the groups' order would be a tie.
    rejected = make_event(error="SchemaError: 'total' is required",
                          processed_ago=dt.timedelta(minutes=4))
    make_event(Status.PENDING)
    operator = staff_user("operator", "view_deadoutboxevent", "redrive_deadoutboxevent",
                          "delete_deadoutboxevent")

    log_in(page, operator)

    groups = page.locator("#error-groups tbody tr")
    assert groups.count() == 2
    assert groups.nth(0).locator("td.count").inner_text() == "1"  # most recent first
    assert "SchemaError" in groups.nth(0).inner_text()
    assert groups.nth(1).locator("td.count").inner_text() == "3"
    assert "broker down" in groups.nth(1).inner_text()
    assert page.locator("#result_list tbody tr").count() == 4  # dead rows only
    page.screenshot(path=str(SCREENSHOT), full_page=True)

    # A group's link lists that error's rows only.
    groups.nth(0).locator("a").click()
    page.wait_for_url("**last_error=*")
    assert page.locator("#result_list tbody tr").count() == 1
    assert page.locator(f'input[name="_selected_action"][value="{rejected.pk}"]').count() == 1
    page.goto(DEAD_PATH)

    chosen = [down[0].pk, down[1].pk]
    run_action(page, "redrive_selected", chosen)

    assert "2 dead events will go back to pending" in page.inner_text(".eventferry-question")
    assert page.locator("#content table tbody tr").count() == 2  # the sample
    page.click('input[type=submit][value="Yes, redrive them"]')

    page.wait_for_url(f"**{DEAD_PATH}")
    assert page.inner_text(".messagelist .success") == "Redrove 2 events."
    for event in OutboxEvent.objects.filter(pk__in=chosen):
        assert (event.status, event.attempts, event.last_error) == (Status.PENDING, 0, None)
    assert OutboxEvent.objects.get(pk=down[2].pk).status == Status.DEAD
    assert page.locator("#error-groups td.count").all_inner_texts() == ["1", "1"]


@pytest.mark.django_db(transaction=True)
def test_operator_deletes_a_dead_row_after_confirming(page: Page) -> None:
    victim, kept = make_event(), make_event()
    operator = staff_user("operator", "view_deadoutboxevent", "redrive_deadoutboxevent",
                          "delete_deadoutboxevent")
    log_in(page, operator)

    run_action(page, "delete_selected_dead", [victim.pk])
    assert "1 dead event will be deleted for good." in page.inner_text(".eventferry-question")
    assert OutboxEvent.objects.filter(pk=victim.pk).exists()  # not before confirming
    page.click('input[type=submit][value="Yes, delete them"]')

    page.wait_for_url(f"**{DEAD_PATH}")
    assert page.inner_text(".messagelist .success") == "Deleted 1 dead event."
    assert list(OutboxEvent.objects.values_list("pk", flat=True)) == [kept.pk]


@pytest.mark.django_db(transaction=True)
def test_viewer_without_action_permissions_is_offered_no_action(page: Page) -> None:
    make_event()
    viewer = staff_user("viewer", "view_deadoutboxevent")
    log_in(page, viewer)

    assert page.locator("#error-groups tbody tr").count() == 1
    assert page.locator("#result_list tbody tr").count() == 1
    offered = page.locator('select[name="action"] option').evaluate_all(
        "options => options.map(o => o.value)")
    assert "redrive_selected" not in offered and "delete_selected_dead" not in offered
    assert page.locator('input[name="_selected_action"]').count() == 0
