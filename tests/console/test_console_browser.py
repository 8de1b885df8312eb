"""The console seen in a real headless browser (Debian's chromium, driven by Selenium).

The store holds completed, running, parked and failed instances and a skipped input; the
console runs as a ``decider console`` process and a service runs beside it in this process, so
a retry clicked in the browser is carried out for real. A second store holds an instance that
a bug in ``decide`` failed, repaired by a fork clicked in a console that runs the fixed code.
No skip: without chromium and chromedriver this test fails (``make test`` installs them).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

from decider import Lifecycle
from decider.processors import FakeClock, Service
from decider.stores.sqlite import SqliteEventStore
from tests.console.console_support import (
    XSS,
    ConsoleProcess,
    completed,
    console_process,
    filled_store,
    status_of,
    stream,
)
from tests.support import console_app, fork_app
from tests.support.stores import types

SCREENSHOTS = "DECIDER_SCREENSHOTS"
"""A folder to save the pages' screenshots into, for a person to look at (optional)."""


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail(
            "chromium and chromedriver are needed: `make test` installs them "
            "(apt-get install chromium chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1100",
        "--disable-gpu",
    ):
        options.add_argument(argument)
    session = webdriver.Chrome(options=options, service=webdriver.ChromeService(driver))
    try:
        yield session
    finally:
        session.quit()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[SqliteEventStore, Service, ConsoleProcess]]:
    db = tmp_path / "events.db"
    with (
        filled_store(db) as (store, service),
        console_process(f"sqlite:///{db}", "--allow-actions") as console,
    ):
        yield store, service, console


@pytest.fixture
def repair(tmp_path: Path) -> Iterator[tuple[SqliteEventStore, Service, ConsoleProcess]]:
    """A store where the buggy code failed ``Repair-c1`` once it was charged, the fixed code's
    service running on it, and a console of the fixed code with actions allowed."""
    db = tmp_path / "repair.db"
    store = SqliteEventStore(db)
    try:
        buggy = fork_app.make_app("repair", repaired=False)
        with Service(buggy, store, clock=FakeClock()) as service:
            buggy.publish(store, fork_app.Order(order_id="c1", amount=5), "repair-inputs")
            assert service.wait_until(lambda: types(store, "Repair-c1")[-1:] == ["Failed"], 30)
            assert service.wait_idle(30)
        with (
            Service(fork_app.fixed_app, store, clock=FakeClock()) as service,
            console_process(
                f"sqlite:///{db}", "--allow-actions", app="tests.support.fork_app:fixed_app"
            ) as console,
        ):
            yield store, service, console
    finally:
        store.close()


def _wait(browser: WebDriver, css: str) -> None:
    try:
        WebDriverWait(browser, 20).until(
            expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))
        )
    except TimeoutException:
        text = browser.find_element(By.TAG_NAME, "body").text
        raise AssertionError(f"no {css} at {browser.current_url}; the page says:\n{text}") from None


def _screenshot(browser: WebDriver, name: str) -> None:
    folder = os.environ.get(SCREENSHOTS)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(folder) / f"{name}.png"))


def _row(browser: WebDriver, text: str) -> str:
    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "table.instances tbody tr")]
    matching = [r for r in rows if text in r]
    assert len(matching) == 1, rows
    return matching[0]


def test_a_person_sees_instances_timelines_diagrams_and_retries_a_parked_command(
    browser: WebDriver, world: tuple[SqliteEventStore, Service, ConsoleProcess]
) -> None:
    store, service, console = world
    assert console.token is not None
    # The printed URL with its token unlocks the actions in this browser.
    browser.get(f"{console.url}?token={console.token}")
    _wait(browser, "table.instances")
    assert browser.current_url == f"{console.url}instances"
    assert "completed" in _row(browser, stream("PR-1"))
    assert "completed" in _row(browser, stream("PR-2"))
    assert "running" in _row(browser, stream("PR-WAIT"))
    parked_row = _row(browser, stream("PR-PARK"))
    assert "running" in parked_row and "stuck" in parked_row
    assert "failed" in _row(browser, stream("PR-FAIL"))
    _screenshot(browser, "instances")

    # Filters: failed only.
    browser.get(f"{console.url}instances?status=failed")
    _wait(browser, "table.instances")
    shown = browser.find_element(By.CSS_SELECTOR, "table.instances tbody").text
    assert stream("PR-FAIL") in shown and stream("PR-WAIT") not in shown

    # Filters: running only.
    browser.get(f"{console.url}instances?status=running")
    _wait(browser, "table.instances")
    shown = browser.find_element(By.CSS_SELECTOR, "table.instances tbody").text
    assert stream("PR-WAIT") in shown and stream("PR-PARK") in shown
    assert stream("PR-1") not in shown

    # The parked instance: its timeline, its state, its path drawn as SVG.
    browser.find_element(By.LINK_TEXT, stream("PR-PARK")).click()
    _wait(browser, "svg.diagram")
    types = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".timeline .event .type")]
    assert types[:3] == [
        "Began",
        "InitiatedBy:fines.PoliceReportPublished",
        "Sent:fines.GenerateTrafficFineSystemNumber",
    ]
    assert "Received:fines.TrafficFineSystemNumberGenerated" in types
    # One line per event: the payload shows once the event is opened.
    assert "Waiting on 1 parked command" in browser.find_element(By.CSS_SELECTOR, ".ended").text
    payloads = browser.find_elements(By.CSS_SELECTOR, ".timeline .payload")
    assert not any(p.is_displayed() for p in payloads)
    browser.find_elements(By.CSS_SELECTOR, ".timeline summary")[1].click()
    assert payloads[1].is_displayed() and not payloads[2].is_displayed()
    assert '"police_report_id": "PR-PARK"' in payloads[1].text
    assert "message_id" in browser.find_elements(By.CSS_SELECTOR, ".timeline .metadata")[1].text
    assert (
        "AwaitingManualIdentificationCode"
        in browser.find_element(By.CSS_SELECTOR, "code.state").text
    )
    diagram = browser.find_element(By.CSS_SELECTOR, "svg.diagram")
    assert diagram.size["width"] > 200 and diagram.size["height"] > 200
    states = {
        g.get_attribute("data-state"): g.get_attribute("class") or ""
        for g in diagram.find_elements(By.CSS_SELECTOR, "g.state")
    }
    assert set(states) == {
        "Initial",
        "AwaitingSystemNumber",
        "AwaitingManualIdentificationCode",
        "Final",
    }
    assert "past" in states["Initial"] and "past" in states["AwaitingSystemNumber"]
    assert "error" in states["AwaitingManualIdentificationCode"]  # its command is parked
    assert "future" in states["Final"]
    _screenshot(browser, "instance-parked")

    # The stored <script> shows as text and runs nowhere.
    browser.get(f"{console.url}instance?stream={stream('PR-XSS')}")
    _wait(browser, ".timeline")
    for line in browser.find_elements(By.CSS_SELECTOR, ".timeline summary"):
        line.click()
    assert any(XSS in p.text for p in browser.find_elements(By.CSS_SELECTOR, ".timeline .payload"))
    assert browser.find_elements(By.TAG_NAME, "script") == []
    assert browser.title != "pwned"

    # The other pages a person reaches from the navigation.
    browser.find_element(By.LINK_TEXT, "Skipped inputs").click()
    _wait(browser, "table.skipped")
    _screenshot(browser, "skipped")
    assert "the route returned None" in browser.find_element(By.CSS_SELECTOR, "table.skipped").text
    browser.find_element(By.LINK_TEXT, "Processors").click()
    _wait(browser, "table.processors")
    processors = browser.find_element(By.CSS_SELECTOR, "table.processors").text
    assert "console-fines.commands" in processors
    _screenshot(browser, "processors")
    browser.find_element(By.LINK_TEXT, "Partitions").click()
    _wait(browser, "table.partitions")
    assert "has not run partitioned" in browser.find_element(By.TAG_NAME, "main").text
    _screenshot(browser, "partitions")
    browser.find_element(By.LINK_TEXT, "Workflows").click()
    browser.find_element(By.LINK_TEXT, "IssueTrafficFineForSpeedingViolation").click()
    _wait(browser, "svg.diagram")
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.diagram")) == 2  # definition, observed
    _screenshot(browser, "workflow")

    # Retry the parked command, behind its confirmation; the service carries it out.
    browser.find_element(By.LINK_TEXT, "Parked commands").click()
    _wait(browser, "table.parked")
    browser.find_element(By.LINK_TEXT, "Retry").click()
    _wait(browser, "form.confirm")
    assert "Carry the parked command" in browser.find_element(By.CSS_SELECTOR, ".confirm-text").text
    _screenshot(browser, "confirm")
    console_app.BROKEN.clear()  # the code service is back
    browser.find_element(By.ID, "confirm").click()
    _wait(browser, "p.notice")
    assert "requested" in browser.find_element(By.CSS_SELECTOR, "p.notice").text
    assert service.wait_until(lambda: completed(store, "PR-PARK"), 30)
    browser.get(f"{console.url}instance?stream={stream('PR-PARK')}")
    _wait(browser, "svg.diagram")
    assert browser.find_element(By.CSS_SELECTOR, ".summary .badge").text == "completed"
    final = browser.find_element(By.CSS_SELECTOR, 'g.state[data-state="Final"]')
    assert "current" in (final.get_attribute("class") or "")
    browser.find_element(By.LINK_TEXT, "Parked commands").click()
    _wait(browser, "main p.empty")


def test_a_person_finds_a_failed_instance_sets_a_refresh_and_cancels_one(
    browser: WebDriver, world: tuple[SqliteEventStore, Service, ConsoleProcess]
) -> None:
    store, service, console = world
    browser.get(f"{console.url}?token={console.token}")
    _wait(browser, "table.instances")
    # Search by the business key: the one instance opens, its end reason first.
    search = browser.find_element(By.CSS_SELECTOR, "input[name=q]")
    search.send_keys("PR-FAIL")
    search.submit()
    _wait(browser, "p.ended")
    assert browser.current_url == f"{console.url}instance?stream={stream('PR-FAIL')}"
    ended = browser.find_element(By.CSS_SELECTOR, "p.ended")
    assert ended.text.startswith("Failed: decide raised")
    assert ended.location["y"] < browser.find_element(By.CSS_SELECTOR, ".summary").location["y"]
    _screenshot(browser, "instance-failed")
    # A refresh interval: the page asks the browser to reload it, and the links keep it.
    refresh = browser.find_element(By.CSS_SELECTOR, "form.refresh select")
    refresh.find_element(By.CSS_SELECTOR, "option[value='5']").click()
    browser.find_element(By.CSS_SELECTOR, "form.refresh button").click()
    _wait(browser, "meta[http-equiv=refresh]")
    assert "refresh=5" in browser.current_url and "PR-FAIL" in browser.current_url
    browser.find_element(By.LINK_TEXT, "Instances").click()
    _wait(browser, "table.instances")
    assert browser.current_url.endswith("instances?refresh=5")
    # Cancel a running instance, behind its confirmation and a reason.
    browser.get(f"{console.url}instance?stream={stream('PR-WAIT')}")
    _wait(browser, ".summary")
    browser.find_element(By.LINK_TEXT, "Cancel this instance").click()
    _wait(browser, "form.confirm")
    browser.find_element(By.CSS_SELECTOR, "input[name=reason]").send_keys("the driver paid")
    _screenshot(browser, "confirm-cancel")
    browser.find_element(By.ID, "confirm").click()
    _wait(browser, "p.notice")
    assert "Cancel of" in browser.find_element(By.CSS_SELECTOR, "p.notice").text
    browser.find_element(By.LINK_TEXT, "Back").click()
    _wait(browser, ".summary")
    cancelled = Lifecycle.CANCELLED
    assert service.wait_until(lambda: status_of(store, "PR-WAIT") is cancelled, 30)
    browser.refresh()
    _wait(browser, "p.ended.cancelled")
    assert browser.find_element(By.CSS_SELECTOR, "p.ended").text == "Cancelled: the driver paid"
    _screenshot(browser, "instance-cancelled")


def test_a_person_repairs_a_failed_instance_by_forking_it_from_the_suggested_input(
    browser: WebDriver, repair: tuple[SqliteEventStore, Service, ConsoleProcess]
) -> None:
    store, service, console = repair
    charges = fork_app.CALLS["repair", "charge"]
    browser.get(f"{console.url}?token={console.token}")
    _wait(browser, "table.instances")
    browser.find_element(By.LINK_TEXT, "Repair-c1").click()
    _wait(browser, "p.ended.failed")
    assert browser.find_element(By.CSS_SELECTOR, "p.ended").text.startswith("Failed: the bug")
    # Each input offers a fork; the one where the fixed code first decides otherwise stands out.
    buttons = browser.find_elements(By.CSS_SELECTOR, ".timeline a.fork")
    assert [b.text for b in buttons] == ["Fork from here", "Fork from here"]
    suggested = browser.find_element(By.CSS_SELECTOR, ".timeline a.fork.suggested")
    plain = next(b for b in buttons if b != suggested)
    color = "background-color"
    assert suggested.value_of_css_property(color) != plain.value_of_css_property(color)
    line = suggested.find_element(By.XPATH, "./ancestor::summary")
    assert line.find_element(By.CSS_SELECTOR, ".rev").text == "#4"
    assert line.find_element(By.CSS_SELECTOR, ".type").text == "Received:repair.Charged"
    hint = browser.find_element(By.XPATH, "//ol[@class='timeline']/preceding-sibling::p").text
    assert "first decides otherwise at input #4" in hint
    _screenshot(browser, "instance-fork-suggested")

    # The confirmation previews the new generation: the charge reused, the shipping anew.
    suggested.click()
    _wait(browser, "form.confirm")
    preview = browser.find_element(By.CSS_SELECTOR, "section.preview")
    assert "Repair-c1 forks to Repair-c1~g2 at revision 4 (of 5)" in preview.text
    effects = {
        cells[1].text: cells[2].text
        for cells in (
            row.find_elements(By.TAG_NAME, "td")
            for row in preview.find_elements(By.CSS_SELECTOR, "tbody tr")
        )
    }
    assert effects["Sent:repair.Charge"] == "reuses #2"
    assert effects["Sent:repair.Ship"] == "carried out anew"
    assert (
        "Fork the instance Repair-c1" in browser.find_element(By.CSS_SELECTOR, ".confirm-text").text
    )
    assert types(store, "Repair-c1")[-1] == "Failed"  # the preview wrote nothing
    browser.find_element(By.CSS_SELECTOR, "input[name=reason]").send_keys("ship charged orders")
    _screenshot(browser, "confirm-fork")
    browser.find_element(By.ID, "confirm").click()
    _wait(browser, "p.notice")
    notice = browser.find_element(By.CSS_SELECTOR, "p.notice").text
    assert notice.startswith("Repair-c1 forked to Repair-c1~g2 at revision 4"), notice

    # The new generation ships the order with the fixed code, its charge not made again.
    browser.find_element(By.LINK_TEXT, "Open Repair-c1~g2").click()
    _wait(browser, ".summary")
    assert browser.current_url == f"{console.url}instance?stream=Repair-c1~g2"
    shipped = "Received:repair.Shipped"
    assert service.wait_until(lambda: shipped in types(store, "Repair-c1~g2"), 30)
    assert fork_app.CALLS["repair", "charge"] == charges
    browser.refresh()
    _wait(browser, ".timeline")
    lines = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".timeline .event .type")]
    assert "Sent:repair.Ship" in lines and shipped in lines
    assert browser.find_elements(By.CSS_SELECTOR, ".timeline a.fork.suggested") == []
    _screenshot(browser, "instance-forked-generation")

    # The old generation names its fork, links to it, and offers no fork any more.
    browser.get(f"{console.url}instance?stream=Repair-c1")
    _wait(browser, "p.ended.forked")
    assert browser.find_element(By.CSS_SELECTOR, "p.ended.forked").text.startswith(
        "Forked to Repair-c1~g2"
    )
    assert browser.find_elements(By.CSS_SELECTOR, ".timeline a.fork") == []
    browser.find_element(By.CSS_SELECTOR, "p.ended.forked a").click()
    _wait(browser, ".timeline")
    assert browser.current_url == f"{console.url}instance?stream=Repair-c1~g2"
