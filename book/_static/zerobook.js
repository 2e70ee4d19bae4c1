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
