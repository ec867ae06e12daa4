"""The web console (issue 18) in a real browser: headless Chromium driven by selenium
(tests/support/browser.py) against a real event distribution network on loopback, a
dispatcher and two servers (``edn serve``, gunicorn) with events flowing from a publisher.

What an operator does: open ``{dispatcher}/console``, be refused with a wrong token, log in
with the right one (an HttpOnly cookie), watch the live numbers move while events flow, see
both servers and the topic's subscriptions, open a server's console, redeliver a dead letter
and see the notification arrive, log out. Every browser test also fails on any error in the
browser console (the ``browser`` fixture).

``EDN_CONSOLE_SCREENSHOT=docs/console.png`` makes the live-numbers test save the screenshot
the README shows, taken while the traffic flows.
"""
from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from edn.localnet.network import stats, wait_until
from edn.sink import NotificationSink
from route_manager.workloads.grid_xml import event_element, range_filter, schema_element
from subscription_manager.client import EventingClient
from subscription_manager.deadletters import ListDeadLetters
from tests.support import browser as browser_support
from tests.support.processes import ADMIN_TOKEN, ServerProcess
from wsframework import ns
from matchers.vocabulary import RANGES_DIALECT
from wsframework.admin import AdminClient
from route_manager.publisher import Publisher

TOPIC = "grid"
D = 3
SERVER_NAMES = ("s1", "s2")
# fast dead letters: two attempts 50 ms apart, and the subscription lives on after one
SERVER_SETTINGS = ["--set", "delivery_retries=1", "--set", "delivery_backoff=0.05",
                   "--set", "sweep_interval=0.2", "--set", "end_subscription_on_dead_letter=false"]
# the background traffic stays in [0, 5]^D; the refusing subscription watches [8, 10]^D, so it
# gets exactly the events a test publishes there
TRAFFIC_HIGH = 5.0
REFUSED_LO, REFUSED_HI = [8.0] * D, [10.0] * D
# what Chromium logs for the refused login (any other 4xx still fails the test)
REFUSED_LOGIN = "/console/api/login - Failed to load resource: the server responded with a status of 401"
# the headless Chromium fixture, failing a test on any browser console error
browser = browser_support.browser
NUMBER = re.compile(r"-?\d+(?:[.,]\d+)?")


class ConsoleNetwork:
    """A dispatcher, two servers, a sink that accepts and one that refuses (until told)."""

    def __init__(self, data_dir: Path):
        self.sink = NotificationSink().start()
        self.refusing = NotificationSink(status=500).start()
        self.dispatcher = ServerProcess("dispatcher", data_dir=data_dir / "dispatcher")
        self.servers = {name: ServerProcess(
            "server", data_dir=data_dir / name,
            extra_args=["--dispatcher", self.dispatcher.base_url, "--name", name,
                        *SERVER_SETTINGS]) for name in SERVER_NAMES}
        self.subscriptions = 0
        self.next_event = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._traffic: threading.Thread | None = None

    def start(self) -> ConsoleNetwork:
        self.dispatcher.start()
        for server in self.servers.values():
            server.start()
        wait_until(lambda: int(stats(self.dispatcher.base_url, ADMIN_TOKEN, "servers")
                               .get("servers", 0)) == len(self.servers),
                   what="both servers registered")
        AdminClient(self.dispatcher.base_url, ADMIN_TOKEN).create_topic(TOPIC, None,
                                                                       schema_element(D))
        wait_until(lambda: all(any(t["name"] == TOPIC for t in
                                   AdminClient(s.base_url, ADMIN_TOKEN).list_topics())
                               for s in self.servers.values()), what="the topic on both servers")
        # one subscription at each server, each on half of the traffic's x0 range: an event
        # need not go everywhere (a hit ratio below 1 once placement has them apart)
        halves = ((0.0, TRAFFIC_HIGH / 2), (TRAFFIC_HIGH / 2, TRAFFIC_HIGH))
        for k, (server, (low, high)) in enumerate(zip(self.servers.values(), halves)):
            self.subscribe(server, [low] + [0.0] * (D - 1), [high] + [TRAFFIC_HIGH] * (D - 1),
                           f"{self.sink.url}/n/{k}")
        self.subscribe(self.servers["s1"], REFUSED_LO, REFUSED_HI, f"{self.refusing.url}/refused")
        return self

    def subscribe(self, server: ServerProcess, lo, hi, notify_to: str) -> None:
        EventingClient("2011").subscribe(f"{server.base_url}/topics/{TOPIC}", notify_to,
                                         filter=range_filter(lo, hi), dialect=RANGES_DIALECT,
                                         expires="PT1H")
        self.subscriptions += 1

    def publish(self, publisher: Publisher, point) -> None:
        with self._lock:
            event_id, self.next_event = self.next_event, self.next_event + 1
        publisher.publish(TOPIC, event_element(np.round(point, 3), event_id))

    # -- background traffic --------------------------------------------------------------------
    def start_traffic(self) -> None:
        """Events at the dispatcher until :meth:`stop_traffic`, about 40 a second (a pace,
        not a wait: the tests wait on what the page shows)."""
        if self._traffic is not None:
            return
        self._stop.clear()

        def run():
            rng = np.random.default_rng(7)
            publisher = Publisher(self.dispatcher.base_url)
            try:
                while not self._stop.is_set():
                    self.publish(publisher, rng.uniform(0, TRAFFIC_HIGH, size=D))
                    self._stop.wait(0.025)
            finally:
                publisher.close()

        self._traffic = threading.Thread(target=run, name="console-traffic", daemon=True)
        self._traffic.start()

    def stop_traffic(self) -> None:
        if self._traffic is not None:
            self._stop.set()
            self._traffic.join(30)
            self._traffic = None

    def dead_letters(self, server: ServerProcess) -> list:
        answer = AdminClient(server.base_url, ADMIN_TOKEN).call(ListDeadLetters(Limit=100))
        return list(answer.DeadLetter or ())

    def close(self) -> None:
        self.stop_traffic()
        for process in [*self.servers.values(), self.dispatcher]:
            try:
                process.stop()
            except subprocess.TimeoutExpired:
                pass  # stop() has killed it (kill -9) before raising
        self.sink.stop()
        self.refusing.stop()


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    edn = ConsoleNetwork(tmp_path_factory.mktemp("console"))
    try:
        yield edn.start()
    finally:
        edn.close()


# -- the page ----------------------------------------------------------------------------------
def number(text: str) -> float | None:
    match = NUMBER.search(text or "")
    return float(match.group().replace(",", ".")) if match else None


def text_content(page, css: str) -> str:
    """The element's text even while it is hidden (``.text`` is empty for hidden elements)."""
    elements = page.find_all(css)
    return (elements[0].get_attribute("textContent") or "").strip() if elements else ""


def log_in(page, base_url: str, token: str = ADMIN_TOKEN) -> None:
    page.get(base_url + "/console")
    form = page.wait_visible("#login-form")
    field = form.find_element("css selector", "input[name=token]")
    field.clear()
    field.send_keys(token)
    form.find_element("css selector", "[type=submit]").click()


def test_login_refuses_a_wrong_token_then_logs_in_and_out(network, browser):
    browser.expect_error(REFUSED_LOGIN)
    base = network.dispatcher.base_url
    browser.get(base + "/console")
    browser.wait_visible("#login-form")
    assert not browser.visible("#console")

    log_in(browser, base, "not-the-token")
    browser.wait(lambda b: text_content(b, "#status"), "the refusal in #status")
    assert browser.visible("#login-form") and not browser.visible("#console")
    assert browser.driver.get_cookies() == []  # no session for a wrong token

    log_in(browser, base)
    browser.wait_visible("#console")
    assert not browser.visible("#login-form")
    cookies = browser.driver.get_cookies()
    assert cookies, "a login sets the session cookie"
    for cookie in cookies:  # out of the page's scripts' reach and not sent cross-site
        assert cookie.get("httpOnly") is True, cookie
        assert cookie.get("sameSite") in ("Strict", "Lax"), cookie
    assert ADMIN_TOKEN not in browser.driver.page_source  # the token is not echoed back

    browser.find("#logout").click()
    browser.wait_visible("#login-form")
    assert not browser.visible("#console")
    browser.get(base + "/console")  # the session is gone, not only hidden
    browser.wait_visible("#login-form")
    assert not browser.visible("#console")


def test_live_numbers_move_while_events_flow(network, browser):
    log_in(browser, network.dispatcher.base_url)
    browser.wait_visible("#console")
    network.start_traffic()
    try:
        # the page polls each second: the rate goes from nothing to a positive number, then
        # moves again as the traffic goes on
        first = browser.wait(lambda b: (v := number(b.text("#events-per-second"))) and v > 0 and v,
                             "a positive #events-per-second")
        browser.wait(lambda b: number(b.text("#events-per-second")) not in (None, first),
                     "#events-per-second to change")
        for css in ("#precision", "#hit-ratio", "#cpu", "#utilization"):
            browser.wait(lambda b, css=css: number(b.text(css)) is not None, f"a number in {css}")
        ratio = number(browser.text("#hit-ratio"))
        assert 0 <= ratio <= 100, ratio  # a ratio, shown as a fraction or a percentage

        servers = {name: server.base_url for name, server in network.servers.items()}

        def rows_name_every_server(b):
            rows = [(r.get_attribute("data-server") or "") + " " + r.text
                    for r in b.find_all("#servers tr[data-server]")]
            return len(rows) == len(servers) and all(
                any(name in row or url in row for row in rows) for name, url in servers.items())
        browser.wait(rows_name_every_server, "#servers to list s1 and s2")

        def topic_count(b):
            cells = b.find_all(f'#topics tr[data-topic="{TOPIC}"] .subscriptions')
            return cells and number(cells[0].text)
        browser.wait(lambda b: topic_count(b) == network.subscriptions,
                     f"{network.subscriptions} subscriptions on the {TOPIC} topic")

        screenshot = os.environ.get("EDN_CONSOLE_SCREENSHOT")
        if screenshot:
            # a chart needs a few seconds of samples to show a trace worth looking at
            samples = {"n": 0, "last": None}

            def seen_samples(b):
                value = b.text("#events-per-second")
                if value != samples["last"]:
                    samples["n"] += 1
                    samples["last"] = value
                return samples["n"] >= 20
            browser.wait(seen_samples, "twenty samples of the rate", timeout=60)
            # the page down to the topics (live figures, self-tuning trace, network, topics)
            bottom = browser.driver.execute_script(
                "return document.getElementById('topics').getBoundingClientRect().bottom"
                " + window.scrollY + 24")
            browser.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
                "width": 1280, "height": int(bottom), "deviceScaleFactor": 1, "mobile": False})
            browser.screenshot(Path(screenshot))
    finally:
        network.stop_traffic()


def make_dead_letter(network: ConsoleNetwork):
    """One notification refused until it is a dead letter; (the server holding it, the
    letter as the admin API lists it)."""
    network.refusing.status = 500
    publisher = Publisher(network.dispatcher.base_url)
    try:
        network.publish(publisher, [9.0] * D)  # only the refusing subscription matches
    finally:
        publisher.close()
    # the subscription may have been placed on either server: the one holding the letter
    holder = wait_until(lambda: next((s for s in network.servers.values()
                                      if network.dead_letters(s)), None),
                        what="a dead letter on a server")
    (letter,) = network.dead_letters(holder)
    assert letter.Reason == "HTTP 500"
    return holder, letter


def open_dead_letter(browser, holder: ServerProcess, letter):
    """The server's console, logged in, showing ``letter``'s row; (its CSS, the row)."""
    log_in(browser, holder.base_url)
    browser.wait_visible("#console")
    row_css = f'#dead-letters tr[data-id="{letter.Id}"]'
    row = browser.wait(lambda b: b.find_all(row_css) and b.find(row_css),
                       f"dead letter {letter.Id} in #dead-letters")
    assert "500" in row.text  # the reason is shown
    return row_css, row


def accept_confirmation(browser) -> None:
    """Accept the page's confirm() if it asks one (a purge may); nothing otherwise."""
    from selenium.common.exceptions import NoAlertPresentException
    try:
        browser.driver.switch_to.alert.accept()
    except NoAlertPresentException:
        pass


def test_a_dead_letter_is_redelivered_from_the_server_console(network, browser):
    holder, letter = make_dead_letter(network)
    assert network.refusing.messages == []
    row_css, row = open_dead_letter(browser, holder, letter)

    network.refusing.status = 202  # the subscriber is back: redelivery succeeds
    row.find_element("css selector", "button.redeliver").click()
    received = network.refusing.wait_for(1, timeout=15)
    assert received[0].path == "/refused"
    assert received[0].envelope.header(ns.qname(ns.WSA10, "MessageID")).text == letter.MessageId
    browser.wait(lambda b: re.search(r"redeliver", text_content(b, "#status"), re.IGNORECASE),
                 "#status to report the redelivery")
    browser.wait(lambda b: not b.find_all(row_css), f"dead letter {letter.Id} to leave the table")
    assert network.dead_letters(holder) == []


def test_dead_letters_are_purged_from_the_server_console(network, browser):
    holder, letter = make_dead_letter(network)
    row_css, _ = open_dead_letter(browser, holder, letter)
    browser.find("#purge-dead-letters").click()
    accept_confirmation(browser)
    browser.wait(lambda b: re.search(r"purge", text_content(b, "#status"), re.IGNORECASE),
                 "#status to report the purge")
    browser.wait(lambda b: not b.find_all(row_css), f"dead letter {letter.Id} to leave the table")
    assert network.dead_letters(holder) == []
