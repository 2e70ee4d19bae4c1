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

// What is wider than the column — a table, a display equation, a figure a phone would shrink
// until its text is under 9 px — scrolls sideways in its own box (zerobook.css: .zb-wide), never
// the page, with a cue while more of it lies to the right (a shadow at the box's right edge, gone
// once scrolled to the end). While it scrolls the box takes the keyboard's focus, so that the
// arrow keys scroll it (WCAG 2.1.1; axe: scrollable-region-focusable). A figure is never drawn at
// under MIN_FIGURE_SCALE of its own size: its smallest text, 9 pt (12 px) at its own size
// (zerobook/figures/style.py), stays at least 9 px tall (tests/test_book.py measures all three).
const MIN_FIGURE_SCALE = 0.75;
const wideBoxes = new Set();
const boxOf = (element) => {  // div.zb-wide (draws the cue) > div.zb-scroll (scrolls) > element
  const parent = element.parentElement;
  if (parent.classList.contains("zb-scroll")) return parent;
  const wide = document.createElement("div");
  const box = document.createElement("div");
  wide.className = "zb-wide";
  box.className = "zb-scroll";
  parent.insertBefore(wide, element);
  wide.appendChild(box);
  box.appendChild(element);
  box.addEventListener("scroll", () => markScroll(box), {passive: true});
  wideBoxes.add(box);
  return box;
};
const markScroll = (box) => {
  const scrolls = box.scrollWidth > box.clientWidth + 1;
  const more = scrolls && box.scrollLeft + box.clientWidth < box.scrollWidth - 1;
  box.parentElement.toggleAttribute("data-more", more);
  if (scrolls) {
    box.setAttribute("tabindex", "0");
    box.setAttribute("role", "region");
    box.setAttribute("aria-label", "Scrolls sideways");
  } else {
    for (const name of ["tabindex", "role", "aria-label"]) box.removeAttribute(name);
  }
};
const keepFigureLegible = (image) => {
  const natural = image.naturalWidth;
  if (!natural) return;
  image.style.minWidth = `${Math.round(natural * MIN_FIGURE_SCALE)}px`;
  markScroll(boxOf(image));
};
const markAll = () => wideBoxes.forEach(markScroll);
document.addEventListener("DOMContentLoaded", () => {
  for (const table of document.querySelectorAll(".bd-article table")) boxOf(table);
  for (const image of document.querySelectorAll(".bd-article figure img, .bd-article .cell_output img")) {
    if (image.complete) keepFigureLegible(image);
    else image.addEventListener("load", () => keepFigureLegible(image));
  }
  const typeset = window.MathJax?.startup?.promise;
  const boxEquations = () => {
    for (const math of document.querySelectorAll('.bd-article mjx-container[display="true"]')) boxOf(math);
    markAll();
  };
  if (typeset) typeset.then(boxEquations); else window.addEventListener("load", boxEquations);
  markAll();
  window.addEventListener("resize", markAll);
  window.addEventListener("load", markAll);
});
