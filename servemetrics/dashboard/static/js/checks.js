// One checkbox row of a filter (GPU types on the GPU usage page, event kinds in Events): a
// <div class="check"> holding the box and its label, kept in step with a Set of selected values.

/**
 * @param {string} idPrefix - the box's id is `${idPrefix}-${value}`
 * @param {string} value - the value the box stands for
 * @param {string} text - the label shown
 * @param {Set<string>} selected - ticked values; the box adds or removes `value` here
 * @param {() => void} onChange - called after `selected` changed
 * @returns {HTMLDivElement}
 */
export function checkRow(idPrefix, value, text, selected, onChange) {
  const div = document.createElement("div");
  div.className = "check";
  const box = document.createElement("input");
  box.type = "checkbox";
  box.id = `${idPrefix}-${value}`;
  box.value = value;
  box.checked = selected.has(value);
  box.addEventListener("change", () => {
    if (box.checked) selected.add(value);
    else selected.delete(value);
    onChange();
  });
  const label = document.createElement("label");
  label.htmlFor = box.id;
  label.textContent = text;
  div.append(box, label);
  return div;
}
