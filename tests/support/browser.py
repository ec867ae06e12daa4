"""A headless Chromium driven through selenium, for the web console tests (issue 18).

Debian's ``chromium`` and ``chromium-driver`` (``/usr/bin/chromium``, ``/usr/bin/chromedriver``;
``.ci/setup`` installs them when missing). Chromium starts with no network of its own: the
background-networking, component-update and sync flags stop it calling Google's hosts, which a
closed network refuses (a flood of refused connections otherwise), and every run gets a new
empty profile so no state leaks from one test to the next.

The ``browser`` fixture collects the page's console log and fails the test on any SEVERE
entry: a page that throws, or a fetch the console makes that the server answers with an error,
is a failed test even when the assertions on the DOM happened to pass.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMEDRIVER_CANDIDATES = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
CHROMIUM_FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
)
WAIT_SECONDS = 15.0  # the longest a test waits on one condition in the page


def _first_executable(env_name: str, candidates) -> str | None:
    for path in (os.environ.get(env_name), *candidates):
        if path and Path(path).is_file() and os.access(path, os.X_OK):
            return path
    return None


def chromium_paths() -> tuple[str, str] | None:
    """(chromium, chromedriver), or None when either is missing (``EDN_CHROMIUM`` and
    ``EDN_CHROMEDRIVER`` name others)."""
    browser = _first_executable("EDN_CHROMIUM", CHROMIUM_CANDIDATES)
    driver = _first_executable("EDN_CHROMEDRIVER", CHROMEDRIVER_CANDIDATES) or shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def missing_reason() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if chromium_paths() is None:
        return ("chromium and chromedriver are not installed "
                "(apt-get install chromium chromium-driver; .ci/setup does it)")
    return None


class Browser:
    """A selenium Chrome driver on a fresh profile, with the console log kept for checking."""

    def __init__(self, width: int = 1280, height: int = 900):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        paths = chromium_paths()
        if paths is None:
            raise RuntimeError(missing_reason())
        browser, driver = paths
        self.profile = tempfile.mkdtemp(prefix="edn-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = browser
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--window-size={width},{height}")
        options.add_argument(f"--user-data-dir={self.profile}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(executable_path=driver), options=options)
        self.driver.set_page_load_timeout(WAIT_SECONDS)
        self.console: list[dict] = []
        self.expected_errors: list[str] = []

    # -- the page ------------------------------------------------------------------------------
    def get(self, url: str) -> None:
        self.driver.get(url)

    def find(self, css: str):
        from selenium.webdriver.common.by import By
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list:
        from selenium.webdriver.common.by import By
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def wait(self, condition, what: str, timeout: float = WAIT_SECONDS):
        """Until ``condition(browser)`` returns something true (polled by WebDriverWait,
        not a sleep); a TimeoutException names ``what``."""
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout, poll_frequency=0.1,
                             ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda _: condition(self), message=f"timed out waiting for {what}")

    def visible(self, css: str) -> bool:
        elements = self.find_all(css)
        return bool(elements) and elements[0].is_displayed()

    def text(self, css: str) -> str:
        elements = self.find_all(css)
        return elements[0].text.strip() if elements else ""

    def wait_visible(self, css: str, timeout: float = WAIT_SECONDS):
        return self.wait(lambda b: b.visible(css) and b.find(css), f"{css} visible", timeout)

    def screenshot(self, path: Path) -> None:
        self.driver.save_screenshot(str(path))

    # -- the console log -----------------------------------------------------------------------
    def read_console(self) -> list[dict]:
        """Every console entry so far (the driver hands each out once; kept here)."""
        self.console.extend(self.driver.get_log("browser"))
        return self.console

    def expect_error(self, fragment: str) -> None:
        """A SEVERE entry containing ``fragment`` is expected (Chromium logs every 4xx a fetch
        receives, so a test that makes the server refuse something declares it here)."""
        self.expected_errors.append(fragment)

    def severe(self) -> list[dict]:
        return [e for e in self.read_console() if e.get("level") == "SEVERE"
                and not any(f in e.get("message", "") for f in self.expected_errors)]

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture
def browser():
    """A headless Chromium; the test fails if the page logged any SEVERE console entry."""
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    b = Browser()
    try:
        yield b
        severe = b.severe()
        assert not severe, "the page logged errors in the browser console:\n" + "\n".join(
            e.get("message", "") for e in severe)
    finally:
        b.close()
