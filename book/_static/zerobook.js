// The book's header has two ☰ buttons (.primary-toggle) and two "contents" buttons
// (.secondary-toggle): pydata-sphinx-theme's (hidden here) and sphinx-book-theme's (shown). Both
// themes bind their handlers to the first one only (document.querySelector), so on a phone the
// visible button did nothing and the table of contents could not be reached. Forward a click on
// any other button of the same kind to the first, which the themes handle (a dialog on a narrow
// screen, a collapsed sidebar on a wide one).
document.addEventListener("DOMContentLoaded", () => {
  for (const kind of [".primary-toggle", ".secondary-toggle"]) {
    const [bound, ...others] = document.querySelectorAll(kind);
    for (const button of others) {
      button.addEventListener("click", (event) => {
        event.preventDefault();
        event.stopPropagation();
        bound.click();
      });
    }
  }
});

// Sphinx's search (searchtools.js) listed the glossary twice under one title, "Glossary": once for
// the term's index entry (linked to the term) and once for the page's text. Keep the term's hit,
// named after its term ("Glossary › rank"), and drop the page's. Results come best last.
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined") return;  // not the search page
  const perform = Search._performSearch;
  const isTerm = (result) => result[2].startsWith("#term-");
  const termName = ([docName, , anchor]) => {
    const file = Search._index.docnames.indexOf(docName);
    const entry = Object.entries(Search._index.indexentries)
      .find(([, found]) => found.some(([f, id]) => f === file && `#${id}` === anchor));
    return entry ? entry[0] : anchor.slice("#term-".length);
  };
  Search._performSearch = (...args) => {
    const results = perform(...args);
    const withTerms = new Set(results.filter(isTerm).map((result) => result[0]));
    return results
      .filter((result) => result[2] || !withTerms.has(result[0]))
      .map((result) => isTerm(result) ? [result[0], `${result[1]} › ${termName(result)}`, ...result.slice(2)] : result);
  };
});

// Accessible names (tests/test_book.py runs axe-core on every page). A control's name must
// contain the words it shows (WCAG 2.5.3). The search field shows "Search Ctrl+K" under the name
// "Search": it is named by what it shows, the shortcut declared as one. The mode switch, named
// "Color mode", shows the icon of the current mode, whose title ("Light", "Dark", "System
// Settings") Font Awesome renders as text: the name says both, and follows the mode.
document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll(".search-button-field")) {
    button.removeAttribute("aria-label");
    button.setAttribute("aria-keyshortcuts", "Control+K");
  }
  const html = document.documentElement;
  const nameTheSwitch = () => {
    for (const button of document.querySelectorAll(".theme-switch-button")) {
      const icon = button.querySelector(`.theme-switch[data-mode="${html.dataset.mode}"]`);
      const shown = icon?.getAttribute("title") ?? icon?.querySelector("title")?.textContent;
      button.setAttribute("aria-label", shown ? `Color mode: ${shown}` : "Color mode");
    }
  };
  nameTheSwitch();
  new MutationObserver(nameTheSwitch).observe(html, {attributeFilter: ["data-mode"]});
});

// A table wider than the column scrolls in its own box (zerobook.css): while it is wider it takes
// the keyboard's focus, so that the arrow keys scroll it (WCAG 2.1.1; axe: scrollable-region-focusable).
document.addEventListener("DOMContentLoaded", () => {
  const tables = document.querySelectorAll(".bd-article table");
  const focusableIfScrolled = () => {
    for (const table of tables) {
      if (table.scrollWidth > table.clientWidth + 1) table.setAttribute("tabindex", "0");
      else table.removeAttribute("tabindex");
    }
  };
  focusableIfScrolled();
  window.addEventListener("resize", focusableIfScrolled);
});
