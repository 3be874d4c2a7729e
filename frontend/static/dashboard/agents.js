// The agent editor, enhanced: "Add tool" instead of an always-open blank block (it clones
// the formset's empty form), collapse removed tools, show the handler only for server
// tools, and let Tab indent code fields. Without this script the page still works: one
// blank tool block, "Remove" checkboxes.
(() => {
  const form = document.querySelector("[data-agent-form]");
  if (!form) return;
  const total = form.querySelector("#id_tools-TOTAL_FORMS");
  const initialForms = Number(form.querySelector("#id_tools-INITIAL_FORMS").value);
  const maxForms = Number(form.querySelector("#id_tools-MAX_NUM_FORMS").value);
  const list = form.querySelector("[data-tool-list]");
  const emptyForm = document.getElementById("tool-empty-form");
  const addButton = form.querySelector("[data-add-tool]");

  const field = (block, name) => block.querySelector(`[name$="-${name}"]`);

  function sync(block) {
    const removed = field(block, "DELETE").checked;
    block.classList.toggle("removed", removed);
    const handler = field(block, "handler");
    // A browser tool has no handler, but keep one that has text visible: the server says
    // to clear it, and a hidden field could not be cleared.
    const browser = field(block, "runs_on").value === "browser";
    block.querySelector("[data-handler-field]").hidden = browser && !handler.value.trim();
    block.querySelector("[data-tool-title]").textContent =
      field(block, "name").value.trim() || "New tool";
  }

  function kept() {
    return [...list.querySelectorAll("[data-tool]")].filter(
      (block) => !block.hidden && !block.classList.contains("removed"),
    );
  }

  // The blank block the server adds for pages without JS; the server ignores it unchanged.
  function untouchedExtra(block, index) {
    const blank = ["name", "description", "handler", "parameters", "timeout_ms"].every(
      (name) => !field(block, name).value.trim(),
    );
    return index >= initialForms && blank && field(block, "runs_on").value === "server"
      && !block.querySelector(".errorlist");
  }

  function syncAddButton() {
    addButton.disabled = kept().length >= maxForms;
  }

  list.querySelectorAll("[data-tool]").forEach((block, index) => {
    sync(block);
    block.hidden = untouchedExtra(block, index);
  });
  addButton.hidden = false;
  syncAddButton();

  addButton.addEventListener("click", () => {
    const spare = list.querySelector("[data-tool][hidden]");
    if (spare) {
      spare.hidden = false;
      syncAddButton();
      field(spare, "name").focus();
      return;
    }
    const index = Number(total.value);
    list.insertAdjacentHTML("beforeend", emptyForm.innerHTML.replaceAll("__prefix__", String(index)));
    total.value = String(index + 1);
    const block = list.lastElementChild;
    sync(block);
    syncAddButton();
    field(block, "name").focus();
  });

  form.addEventListener("change", (event) => {
    const block = event.target.closest("[data-tool]");
    if (!block) return;
    sync(block);
    syncAddButton();
  });
  form.addEventListener("input", (event) => {
    if (event.target.matches('[name$="-name"]')) sync(event.target.closest("[data-tool]"));
  });

  // Tab inserts two spaces in code fields; Esc, then Tab, moves on (keyboard users
  // must be able to leave the field).
  let escaped = false;
  form.addEventListener("keydown", (event) => {
    const area = event.target;
    if (!(area instanceof HTMLTextAreaElement) || !area.classList.contains("code")) return;
    if (event.key === "Escape") {
      escaped = true;
      return;
    }
    const plainTab = event.key === "Tab" && !event.shiftKey && !event.ctrlKey && !event.altKey && !event.metaKey;
    if (!plainTab || escaped) {
      escaped = false;
      return;
    }
    event.preventDefault();
    // execCommand keeps the browser's undo history; setRangeText is the fallback.
    if (!document.execCommand("insertText", false, "  ")) {
      area.setRangeText("  ", area.selectionStart, area.selectionEnd, "end");
    }
  });
  form.addEventListener("focusin", () => { escaped = false; });

  // On a new agent, show the slug a blank slug field will get.
  if (form.hasAttribute("data-creating")) {
    const name = form.querySelector("#id_name");
    const slug = form.querySelector("#id_slug");
    const slugify = (text) => text.normalize("NFKD").replace(/[\u0300-\u036f]/g, "")
      .toLowerCase().replace(/[^\w\s-]/g, "").replace(/[-\s_]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 64);
    const showSlug = () => { slug.placeholder = slugify(name.value); };
    name.addEventListener("input", showSlug);
    showSlug();
  }
})();
