// Small progressive enhancements; every page works without them.
// <button data-copy="#element-id">: copies that element's text and says so.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const source = document.querySelector(button.dataset.copy);
  if (!source) return;
  const text = source.value ?? source.textContent;
  try {
    await navigator.clipboard.writeText(text.trim());
    button.textContent = "Copied";
  } catch {
    const range = document.createRange();
    range.selectNodeContents(source);
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    button.textContent = "Selected: press Ctrl+C";
  }
});

// Tables: each cell learns its column's name, which narrow screens show above it.
for (const table of document.querySelectorAll("table.table")) {
  const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
  for (const row of table.querySelectorAll("tbody tr")) {
    let column = 0;
    for (const cell of row.cells) {
      if (names[column] && !cell.hasAttribute("data-label")) cell.dataset.label = names[column];
      column += cell.colSpan;
    }
  }
}
