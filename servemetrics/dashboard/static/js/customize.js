// Customize view: a dialog listing every graph that applies to the scope (hidden ones too; engine graphs
// only where the engine is detected), by group under the group's heading, a checkbox to show or hide
// each, and three ways to reorder inside a group: drag a row, its Up / Down buttons, or
// Alt+ArrowUp/ArrowDown. Every change calls onChange(layout); the caller saves it per model and
// re-renders.

import { byGroup } from "./panels.js";

export function createCustomize(dialog, { onChange, onReset }) {
  const list = dialog.querySelector("#customize-list");
  const live = dialog.querySelector("#customize-live");
  let panels = [];
  let layout = { order: [], hidden: new Set() };
  let absent = new Set();
  let dragged = null;

  const title = (id) => panels.find((p) => p.id === id)?.title || id;
  const groupOf = (id) => panels.find((p) => p.id === id)?.group ?? "";

  // the listed ids: the layout's order of the panels given, each group together
  function listed() {
    const known = new Set(panels.map((p) => p.id));
    return byGroup(panels, layout.order.filter((id) => known.has(id)));
  }

  function moveAndFocus(id, delta, focusSelector) {
    const ids = listed();
    const i = ids.indexOf(id);
    const other = ids[i + delta];
    if (other === undefined || groupOf(other) !== groupOf(id)) return;
    const a = layout.order.indexOf(id);
    const b = layout.order.indexOf(other);
    layout.order[a] = other;
    layout.order[b] = id;
    live.textContent = `${title(id)} moved to position ${i + delta + 1} of ${ids.length}`;
    render();
    onChange(layout);
    list.querySelector(`li[data-panel="${id}"] ${focusSelector}`)?.focus();
  }

  function row(id, i, ids) {
    const first = i === 0 || groupOf(ids[i - 1]) !== groupOf(id);
    const last = i === ids.length - 1 || groupOf(ids[i + 1]) !== groupOf(id);
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
    up.disabled = first;
    const upFocus = i - 1 === 0 || groupOf(ids[i - 2]) !== groupOf(id) ? ".move-down" : ".move-up";
    up.addEventListener("click", () => moveAndFocus(id, -1, upFocus));
    const down = document.createElement("button");
    down.type = "button";
    down.className = "move-down";
    down.textContent = "Down";
    down.setAttribute("aria-label", `Move ${title(id)} down`);
    down.disabled = last;
    const downFocus = i + 1 === ids.length - 1 || groupOf(ids[i + 2]) !== groupOf(id) ? ".move-up" : ".move-down";
    down.addEventListener("click", () => moveAndFocus(id, 1, downFocus));
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
      if (dragged && dragged !== id && groupOf(dragged) === groupOf(id)) e.preventDefault();
    });
    li.addEventListener("drop", (e) => {
      e.preventDefault();
      const from = dragged || e.dataTransfer.getData("text/plain");
      if (!from || from === id || groupOf(from) !== groupOf(id)) return;
      const to = layout.order.indexOf(id);
      layout.order.splice(layout.order.indexOf(from), 1);
      layout.order.splice(to, 0, from);
      live.textContent = `${title(from)} moved to position ${listed().indexOf(from) + 1} of ${listed().length}`;
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

  function heading(group) {
    const li = document.createElement("li");
    li.className = "group-heading";
    li.dataset.group = group;
    li.textContent = group;
    return li;
  }

  function render() {
    const ids = listed();
    const items = [];
    ids.forEach((id, i) => {
      if (groupOf(id) && (i === 0 || groupOf(ids[i - 1]) !== groupOf(id))) items.push(heading(groupOf(id)));
      items.push(row(id, i, ids));
    });
    list.replaceChildren(...items);
  }

  dialog.querySelector("#customize-close").addEventListener("click", () => dialog.close());
  dialog.querySelector("#customize-reset").addEventListener("click", () => {
    layout = onReset();
    render();
  });

  return {
    // panels: the panels that apply to the scope; layout: {order, hidden} of every catalog panel;
    // absentIds: panels with no data in scope
    open(nextPanels, nextLayout, absentIds) {
      panels = nextPanels;
      layout = nextLayout;
      absent = absentIds;
      render();
      dialog.showModal();
    },
    update(nextPanels, nextLayout, absentIds) {
      panels = nextPanels;
      layout = nextLayout;
      absent = absentIds;
      if (dialog.open) render();
    },
  };
}
