// Feature flags (GET /api/feature_flags): name, state, stability and what
// each one changes; a disabled flag has an Enable button (PUT
// /api/feature_flags/NAME/enable, which enables its dependencies first).
// An unavailable flag names the nodes that do not support it yet.

import { errorLine, fill } from "../forms.js";
import { enc, h, table } from "../ui.js";

export async function render(el, ctx) {
  const flags = await ctx.api.get("/api/feature_flags");
  const error = errorLine("feature-flags-error");
  const refresh = () => render(el, ctx);

  function enableButton(flag) {
    const button = h("button", { type: "button", "data-test": "feature-flag-enable" }, "Enable");
    button.addEventListener("click", async () => {
      button.disabled = true;
      error.clear();
      try {
        await ctx.api.put(`/api/feature_flags/${enc(flag.name)}/enable`, {});
        ctx.toast(`Feature flag ${flag.name} enabled`, "ok");
        await refresh();
      } catch (e) {
        error.show(e);
        button.disabled = false;
      }
    });
    return button;
  }

  const columns = [
    ["Name", (f) => h("code", {}, f.name)],
    ["State", (f) => h("span", { "data-test": "feature-flag-state", class: `state-${f.state}` }, f.state)],
    ["Stability", (f) => f.stability],
    ["Description", (f) => f.desc],
    ["", (f) => {
      if (f.state === "disabled" && ctx.canChange) return enableButton(f);
      if (f.state === "unavailable") return `not supported by ${(f.unsupported_by || []).join(", ") || "a member"}`;
      return "";
    }],
  ];
  const rows = table(columns, flags, { test: "feature-flags-table", rowTest: (f) => `feature-flag-${f.name}` });
  fill(el, error, rows);
}
