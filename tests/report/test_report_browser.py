"""Run reports opened in headless Chromium (Debian's chromium, driven by playwright;
.ci/run installs chromium). Run with: pytest -m browser"""
import os
import shutil
from pathlib import Path

import pytest

from esopt.report import default_report_path, write_report

from report_helpers import copy_run, make_run, truncate

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _unavailable() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    if not Path(CHROMIUM).exists():
        return "chromium is not installed (apt-get install chromium; .ci/run does it)"
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    reason = _unavailable()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests must run in CI: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(str(tmp_path_factory.mktemp("chromium-profile")),
                                                       executable_path=CHROMIUM, headless=True, args=ARGS)
        yield context
        context.close()


def open_page(browser, path):
    """The page, and the console errors and uncaught exceptions seen while it loaded."""
    page = browser.new_page()
    errors = []
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    page.goto(Path(path).resolve().as_uri(), wait_until="load")
    return page, errors


def images_decoded(page) -> list[int]:
    return page.eval_on_selector_all("img.plot", "imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")


def visible_views(page) -> list[str]:
    return page.eval_on_selector_all(".traj-view", "vs => vs.filter(v => !v.hidden).map(v => v.dataset.key)")


@pytest.fixture(scope="module")
def finished(esopt_cache, tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("runs"), "browser")[0]


def test_report_opens_without_errors_with_plots_and_viewer(browser, finished):
    page, errors = open_page(browser, default_report_path(finished))
    assert errors == []
    widths = images_decoded(page)
    assert len(widths) == 7 and all(w > 100 for w in widths)  # every embedded PNG decoded (memory: every run)
    assert page.is_visible("#trajectories") and page.is_visible("#traj-select")
    assert visible_views(page) == ["eval-3"]  # the script shows the selected generation only
    assert page.locator('.traj-view[data-key="eval-3"] table.sdk').first.is_visible()
    page.select_option("#traj-select", "train-1")
    assert visible_views(page) == ["train-1"]
    view = page.locator('.traj-view[data-key="train-1"]')
    assert view.locator(".episode").count() == 2 and view.locator("table.sdk").first.is_visible()
    assert "Turn 1" in view.inner_text()
    assert errors == []
    page.close()


def test_truncated_and_compare_reports_open_without_errors(browser, finished, tmp_path):
    killed = copy_run(finished, tmp_path / "killed")
    truncate(killed)
    page, errors = open_page(browser, write_report(killed).path)
    assert errors == []
    assert page.is_visible("#missing") and "no held-out evaluation yet" in page.inner_text("#missing")
    assert len(images_decoded(page)) == 5 and visible_views(page) == ["train-1"]  # signal among them
    page.close()

    out = write_report(finished, compare=[killed], out=tmp_path / "cmp" / "cmp.html").path
    page, errors = open_page(browser, out)
    assert errors == []
    assert page.is_visible("#compare") and all(w > 100 for w in images_decoded(page))
    assert len(images_decoded(page)) == 7 + 6  # the run's seven plots (signal, memory) + the comparison's six
    page.close()
