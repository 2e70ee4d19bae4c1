"""axe-core, vendored (tests/axe), run in the page a browser has open: the WCAG 2.1 A/AA
rules in the light theme a reader meets first, and the contrast rule in the dark theme the
theme's switch gives (tests/test_book.py runs them on every page, at each width)."""

from pathlib import Path

from browser import SETTLE

AXE = Path(__file__).parent / "axe"
# WCAG 2.1 level A and AA: what public universities must meet for course material.
WCAG21_AA = {
    "runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
    "resultTypes": ["violations"],
}
CONTRAST = {
    "runOnly": {"type": "rule", "values": ["color-contrast"]},
    "resultTypes": ["violations"],
}
RUN_AXE = """
const [options, done] = [arguments[0], arguments[arguments.length - 1]];
axe.run(document, options).then(
  (r) => done(r.violations.map((v) => ({rule: v.id, impact: v.impact,
                                        where: v.nodes.map((n) => n.target.join(" "))}))),
  (e) => done([{rule: "axe failed", impact: "critical", where: [String(e)]}]));
"""
SERIOUS = {"serious", "critical"}


def serious_violations(browser, options: dict) -> list[str]:
    """Run the vendored axe-core on the page open in `browser`, its colours settled (under
    load, axe once flagged the dark theme's search button on one page, which passes alone:
    most likely a colour read before its transition ended): its serious and critical
    violations, each as "rule (impact): the CSS paths of the first elements at fault"."""
    browser.execute_script(SETTLE)
    if not browser.execute_script("return typeof axe !== 'undefined'"):
        browser.execute_script((AXE / "axe.min.js").read_text())
    browser.set_script_timeout(120)
    return [
        f"{v['rule']} ({v['impact']}): {', '.join(v['where'][:3])}"
        for v in browser.execute_async_script(RUN_AXE, options)
        if v["impact"] in SERIOUS
    ]


def switch_to_dark(browser) -> str:
    """Click the theme's switch until the page is dark, as a reader would (it cycles through
    the modes auto, light and dark; at most three clicks); return the theme the page then has.
    The choice is kept in localStorage: call `forget_theme` before the next page."""
    for _ in range(3):
        browser.execute_script("document.querySelector('.theme-switch-button').click()")
        theme = browser.execute_script("return document.documentElement.dataset.theme")
        if theme == "dark":
            break
    return theme


def forget_theme(browser) -> None:
    browser.execute_script(
        "localStorage.removeItem('mode'); localStorage.removeItem('theme')"
    )
