"""The built site in a real browser: headless Chromium (Debian's, driven by Playwright) opens
every page served on 127.0.0.1, with every other address blocked, and fails on a console
error, a page error, a request that fails or is blocked, an image that does not load, a
broken internal link or anchor, a search for "DataLoader" that finds nothing, or a how-to guide
more than two clicks from the home page. Run after the build:
``python -m pytest tests/docs/check_site.py``."""

from __future__ import annotations

import contextlib
import functools
import html.parser
import os
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..readme_blocks import ROOT
from ..unit.vision.serving import serve_directory

pytestmark = pytest.mark.timeout(600)

SITE = ROOT / "docs" / "_build" / "html"
CHROMIUM = os.environ.get("FLOWLOADER_CHROMIUM", "/usr/bin/chromium")
GUIDES = sorted(p.stem for p in (ROOT / "docs" / "how-to").glob("*.md") if p.stem != "index")


def served() -> contextlib.AbstractContextManager[str]:
    """The built site over HTTP on 127.0.0.1 (a free port), for the test's length."""
    return serve_directory(str(SITE))


class _Page(html.parser.HTMLParser):
    """A page's element ids and link targets."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for key in ("id", "name"):
            if found.get(key) and (key == "id" or tag == "a"):
                self.ids.add(str(found[key]))
        if tag == "a" and found.get("href"):
            self.links.append(str(found["href"]))


@functools.cache
def parsed(page: Path) -> _Page:
    result = _Page()
    result.feed(page.read_text(encoding="utf-8"))
    return result


def pages() -> list[Path]:
    if not (SITE / "index.html").exists():
        pytest.fail(f"no built site at {SITE}: run sphinx-build -W -n --keep-going docs {SITE}")
    return sorted(SITE.rglob("*.html"))


def test_every_internal_link_and_anchor_resolves() -> None:
    broken = []
    for page in pages():
        for href in parsed(page).links:
            url = urllib.parse.urlsplit(href)
            if url.scheme or url.netloc or href.startswith("mailto:"):
                continue  # external: not followed (and blocked in the browser)
            target = (page.parent / urllib.parse.unquote(url.path)).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            name = f"{page.relative_to(SITE)}: {href}"
            if not target.is_file():
                broken.append(f"{name} (no such page)")
            elif url.fragment and urllib.parse.unquote(url.fragment) not in parsed(target).ids:
                broken.append(f"{name} (no such anchor)")
    assert not broken, "\n".join(broken)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


class Watched:
    """A browser tab on the local site that records every console error, page error, failed
    or blocked request and HTTP error."""

    def __init__(self, browser: object, base: str) -> None:
        self.base = base
        self.problems: list[str] = []
        self.context = browser.new_context()  # type: ignore[attr-defined]
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("requestfailed", self._failed)
        self.page.on("response", self._response)

    def _route(self, route: object) -> None:
        url = route.request.url  # type: ignore[attr-defined]
        if url.startswith(self.base) or url.startswith(("data:", "blob:")):
            route.continue_()  # type: ignore[attr-defined]
        else:
            self.problems.append(f"blocked a request outside the site: {url}")
            route.abort()  # type: ignore[attr-defined]

    def _console(self, message: object) -> None:
        if message.type == "error":  # type: ignore[attr-defined]
            self.problems.append(f"console error: {message.text}")  # type: ignore[attr-defined]

    def _failed(self, request: object) -> None:
        url = request.url  # type: ignore[attr-defined]
        if url.startswith(self.base):
            self.problems.append(f"request failed: {url} ({request.failure})")  # type: ignore[attr-defined]

    def _response(self, response: object) -> None:
        if response.status >= 400:  # type: ignore[attr-defined]
            self.problems.append(f"HTTP {response.status}: {response.url}")  # type: ignore[attr-defined]

    def open(self, path: str) -> None:
        self.page.goto(self.base + path, wait_until="load")

    def close(self) -> None:
        self.context.close()


def test_every_page_opens_without_errors_and_its_images_load(browser: object) -> None:
    problems = []
    with served() as base:
        tab = Watched(browser, base)
        for page in pages():
            name = page.relative_to(SITE).as_posix()
            tab.problems.clear()
            tab.open(name)
            unloaded = tab.page.evaluate(
                "Array.from(document.images)"
                ".filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)"
            )
            problems += [f"{name}: {problem}" for problem in tab.problems]
            problems += [f"{name}: image does not load: {src}" for src in unloaded]
        tab.close()
    assert not problems, "\n".join(problems)


def test_search_finds_dataloader(browser: object) -> None:
    with served() as base:
        tab = Watched(browser, base)
        tab.open("search.html?q=DataLoader")
        results = tab.page.locator("#search-results ul.search li")
        results.first.wait_for(timeout=30_000)
        count = results.count()
        tab.close()
    assert count > 0
    assert not tab.problems, tab.problems


@pytest.mark.parametrize("guide", GUIDES)
def test_each_how_to_guide_is_two_clicks_from_home(browser: object, guide: str) -> None:
    """From the home page, click a visible link to the guide; if there is none, click the
    how-to section's link first: never more than two clicks."""
    target = f"how-to/{guide}.html"
    with served() as base:
        tab = Watched(browser, base)
        tab.open("index.html")
        clicks = 0
        for hop in ("how-to/index.html", None):
            link = tab.page.locator(f'a[href$="{target}"]:visible').first
            if link.count():
                link.click()
                clicks += 1
                break
            assert hop is not None, f"{target} not reachable in two clicks"
            tab.page.locator(f'a[href$="{hop}"]:visible').first.click()
            clicks += 1
        tab.page.wait_for_load_state("load")
        assert tab.page.url.split("#")[0].endswith(target), tab.page.url
        heading = tab.page.locator("h1").first.inner_text()
        tab.close()
    assert clicks <= 2
    assert heading
    assert not tab.problems, tab.problems
