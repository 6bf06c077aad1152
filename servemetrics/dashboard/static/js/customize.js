// Customize view: a dialog listing every graph of the catalog (hidden ones too), a checkbox to show or
// hide each, and three ways to reorder: drag a row, its Up / Down buttons, or Alt+ArrowUp/ArrowDown.
// Every change calls onChange(layout); the caller saves it per model and re-renders.

import { move } from "./panels.js";

export function createCustomize(dialog, { onChange, onReset }) {
  const list = dialog.querySelector("#customize-list");
  const live = dialog.querySelector("#customize-live");
  let panels = [];
  let layout = { order: [], hidden: new Set() };
  let absent = new Set();
  let dragged = null;

  const title = (id) => panels.find((p) => p.id === id)?.title || id;

  function moveAndFocus(id, delta, focusSelector) {
    if (!move(layout.order, id, delta)) return;
    live.textContent = `${title(id)} moved to position ${layout.order.indexOf(id) + 1} of ${layout.order.length}`;
    render();
    onChange(layout);
    list.querySelector(`li[data-panel="${id}"] ${focusSelector}`)?.focus();
  }

  function row(id, i) {
    const li = document.createElement("li");
    li.dataset.panel = id;
    li.draggable = true;
    const box = document.createElement("input");
    box.type = "checkbox";
    box.id = `customize-${id}`;
    box.checked = !layout.hidden.has(id);
    box.addEventListener("change", () => {
      if (box.checked) layout.hidden.delete(id);
      else layout.hidden.add(id);
      onChange(layout);
    });
    const label = document.createElement("label");
    label.htmlFor = box.id;
    label.textContent = title(id);
    const note = document.createElement("span");
    note.className = "note";
    note.textContent = absent.has(id) ? "no data for this scope" : "";
    const up = document.createElement("button");
    up.type = "button";
    up.className = "move-up";
    up.textContent = "Up";
    up.setAttribute("aria-label", `Move ${title(id)} up`);
    up.disabled = i === 0;
    up.addEventListener("click", () => moveAndFocus(id, -1, i - 1 === 0 ? ".move-down" : ".move-up"));
    const down = document.createElement("button");
    down.type = "button";
    down.className = "move-down";
    down.textContent = "Down";
    down.setAttribute("aria-label", `Move ${title(id)} down`);
    down.disabled = i === layout.order.length - 1;
    down.addEventListener("click", () =>
      moveAndFocus(id, 1, i + 1 === layout.order.length - 1 ? ".move-up" : ".move-down"),
    );
    li.addEventListener("keydown", (e) => {
      if (!e.altKey || (e.key !== "ArrowUp" && e.key !== "ArrowDown")) return;
      e.preventDefault();
      moveAndFocus(id, e.key === "ArrowUp" ? -1 : 1, "input");
    });
    li.addEventListener("dragstart", (e) => {
      dragged = id;
      li.classList.add("dragging");
      e.dataTransfer.effectAllowed = "move";
      e.dataTransfer.setData("text/plain", id);
    });
    li.addEventListener("dragend", () => {
      dragged = null;
      li.classList.remove("dragging");
    });
    li.addEventListener("dragover", (e) => {
      if (dragged && dragged !== id) e.preventDefault();
    });
    li.addEventListener("drop", (e) => {
      e.preventDefault();
      const from = dragged || e.dataTransfer.getData("text/plain");
      if (!from || from === id) return;
      const to = layout.order.indexOf(id);
      layout.order.splice(layout.order.indexOf(from), 1);
      layout.order.splice(to, 0, from);
      live.textContent = `${title(from)} moved to position ${to + 1} of ${layout.order.length}`;
      render();
      onChange(layout);
    });
    const grip = document.createElement("span");
    grip.className = "grip";
    grip.setAttribute("aria-hidden", "true");
    grip.textContent = "⠿";
    li.append(grip, box, label, note, up, down);
    return li;
  }

  function render() {
    list.replaceChildren(...layout.order.map(row));
  }

  dialog.querySelector("#customize-close").addEventListener("click", () => dialog.close());
  dialog.querySelector("#customize-reset").addEventListener("click", () => {
    layout = onReset();
    render();
  });

  return {
    // panels: all catalog panels; layout: {order, hidden}; absentIds: panels with no data in scope
    open(nextPanels, nextLayout, absentIds) {
      panels = nextPanels;
      layout = nextLayout;
      absent = absentIds;
      render();
      dialog.showModal();
    },
    update(nextLayout, absentIds) {
      layout = nextLayout;
      absent = absentIds;
      if (dialog.open) render();
    },
  };
}
