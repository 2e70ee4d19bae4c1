"""Headless Chromium for the tests: the command line, and a WebDriver session for clicking.

Where Chromium (or chromedriver) is missing the tests skip, saying why, unless
REQUIRE_BROWSER=1 (as in CI), where they fail.
"""

import json
import os
import shutil

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--virtual-time-budget=5000",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]


def missing(what: str):
    message = f"{what} is not installed (Debian packages `chromium`, `chromium-driver`)"
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(message + " and REQUIRE_BROWSER=1")
    pytest.skip(message)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return found or missing("headless Chromium")


# Every request that would leave the machine goes to a proxy that is not there, and every name
# resolves to nothing: the book must work offline. The requests are still logged (performance log).
OFFLINE = [
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
]


# For a page served on this machine (JupyterLab): 127.0.0.1 is reached, nothing else.
LOOPBACK_ONLY = [
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]


def driver(user_data_dir, offline=OFFLINE):
    """A Selenium session on headless Chromium, offline, that logs the console and every request
    (chromedriver from Debian)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    path = shutil.which("chromedriver") or missing("chromedriver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium()
    for flag in (
        [f for f in FLAGS if not f.startswith("--virtual-time")]
        + offline
        + [f"--user-data-dir={user_data_dir}"]
    ):
        options.add_argument(flag)
    options.set_capability(
        "goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"}
    )
    return webdriver.Chrome(
        options=options, service=webdriver.ChromeService(executable_path=path)
    )


def requested_urls(browser) -> list[str]:
    """URLs the page asked for since the last call (from the performance log): every request,
    whatever it fetches (document, frame, script, style sheet, font, image, fetch/XHR, prefetch),
    and every WebSocket opened."""
    messages = [
        json.loads(entry["message"])["message"]
        for entry in browser.get_log("performance")
    ]
    return [
        m["params"]["request"]["url"]
        for m in messages
        if m["method"] == "Network.requestWillBeSent"
    ] + [
        m["params"]["url"]
        for m in messages
        if m["method"] == "Network.webSocketCreated"
    ]


def leaves_the_machine(url: str) -> bool:
    # chrome-untrusted: is Chromium's own new-tab page (its one-google-bar frame), logged once
    # in a make test beside a book page: the browser's, served from inside it
    return not url.startswith(
        ("file:", "data:", "blob:", "about:", "chrome:", "chrome-extension:")
        + ("chrome-untrusted:",)
    )


def search_finished(browser, timeout: float = 20) -> None:
    """Wait until the book's search page has listed every hit: the results appear one by
    one, and the summary line ("Search finished ...") comes last."""
    from selenium.webdriver.support.ui import WebDriverWait

    summary = "#search-results .search-summary"
    WebDriverWait(browser, timeout).until(
        lambda b: (
            "Search finished"
            in "".join(e.text for e in b.find_elements("css selector", summary))
        )
    )


SETTLE = (  # the page at rest: every transition and animation ended, colours and layout final
    "const s = document.createElement('style');"
    "s.textContent = '*, *::before, *::after {transition: none !important; "
    "animation: none !important}';"
    "document.head.appendChild(s);"
)
