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
const [options, context, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
axe.run(context, options).then(
  (r) => done(r.violations.map((v) => ({rule: v.id, impact: v.impact,
                                        where: v.nodes.map((n) => n.target.join(" "))}))),
  (e) => done([{rule: "axe failed", impact: "critical", where: [String(e)]}]));
"""
SERIOUS = {"serious", "critical"}


# Code cells' syntax colours are the same few on every page: `code_contrast` checks each one
# (light and dark) from the colours the browser computed, so axe, for which a code cell is
# thousands of coloured spans (~40% of its time on a chapter), leaves them out.
NOT_CODE = {"exclude": [[".highlight"]]}


def serious_violations(browser, options: dict, context: dict = NOT_CODE) -> list[str]:
    """Run the vendored axe-core on the page open in `browser` (`context`: axe's, the whole
    page but its code cells unless told), its colours settled (under
    load, axe once flagged the dark theme's search button on one page, which passes alone:
    most likely a colour read before its transition ended): its serious and critical
    violations, each as "rule (impact): the CSS paths of the first elements at fault"."""
    browser.execute_script(SETTLE)
    if not browser.execute_script("return typeof axe !== 'undefined'"):
        browser.execute_script((AXE / "axe.min.js").read_text())
    browser.set_script_timeout(120)
    return [
        f"{v['rule']} ({v['impact']}): {', '.join(v['where'][:3])}"
        for v in browser.execute_async_script(RUN_AXE, options, context)
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


# Each colour a code cell's text is drawn in, and the opaque background under it: the span's
# own, else the nearest of its code block's and that block's ancestors'.
CODE_COLOURS = """
const found = {};
const opaque = c => !(c === 'transparent' || /, 0\\)$/.test(c));
for (const pre of document.querySelectorAll('.bd-article .highlight pre')) {
  let el = pre, under = null;
  while (el && !under) { const c = getComputedStyle(el).backgroundColor; if (opaque(c)) under = c; el = el.parentElement; }
  for (const e of [pre, ...pre.querySelectorAll('span')]) {
    if (!e.textContent.trim()) continue;
    const style = getComputedStyle(e);
    const pair = style.color + ' on ' + (opaque(style.backgroundColor) ? style.backgroundColor : under);
    found[pair] = found[pair] || (e.className || 'pre') + ': ' + e.textContent.trim().slice(0, 30);
  }
}
return found;
"""


def contrast_ratio(fg: str, bg: str) -> float:
    """WCAG 2.x's contrast ratio of two opaque CSS colours "rgb(r, g, b)" (as axe computes it)."""

    def luminance(colour: str) -> float:
        rgb = [int(v) / 255 for v in colour[colour.index("(") + 1 : -1].split(",")]
        r, g, b = [
            c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb
        ]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def code_contrast(browser) -> list[str]:
    """Each colour of the open page's code cells below WCAG AA's 4.5:1 against its background,
    or not opaque (its contrast depends on what is beneath), with the token that shows it."""
    bad = []
    for pair, token in browser.execute_script(CODE_COLOURS).items():
        fg, bg = pair.split(" on ")
        if not (fg.startswith("rgb(") and bg.startswith("rgb(")):
            bad.append(f"{token!r}: {pair} (not opaque)")
        elif (ratio := contrast_ratio(fg, bg)) < 4.5:
            bad.append(f"{token!r}: {pair}, {ratio:.2f}:1")
    return bad
