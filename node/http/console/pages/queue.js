// queue: being written (issue 33).
import { h } from "../ui.js";

export const title = "Queue";

export async function render(el) {
  el.append(h("h1", {}, title), h("p", { class: "hint" }, "This page is coming."));
}
