// Admin (#/admin/<section>): users, virtual hosts, permissions, topic
// permissions, policies, operator policies and feature flags, one module per
// section under ../admin/. Each section shows what the API lets this user
// read (a refusal shows the API's reason) and offers forms only to the tags
// that may change it; the API checks every action anyway.

import { errorText, fill, hasTag, tagsOf } from "../forms.js";
import { h } from "../ui.js";

export const title = "Admin";

// [route name, tab label, module, the tag that may change it]
const SECTIONS = [
  ["users", "Users", () => import("../admin/users.js"), "administrator"],
  ["vhosts", "Virtual hosts", () => import("../admin/vhosts.js"), "administrator"],
  ["permissions", "Permissions", () => import("../admin/permissions.js"), "administrator"],
  ["topic-permissions", "Topic permissions", () => import("../admin/topic_permissions.js"), "administrator"],
  ["policies", "Policies", () => import("../admin/policies.js"), "policymaker"],
  ["operator-policies", "Operator policies", () => import("../admin/operator_policies.js"), "administrator"],
  ["feature-flags", "Feature flags", () => import("../admin/feature_flags.js"), "administrator"],
];

// The first section this user may change (a policymaker lands on policies);
// for one who may change none, the virtual hosts, which every management user may list.
function defaultSection(user) {
  const mine = SECTIONS.find(([, , , tag]) => hasTag(user, tag));
  return mine ? mine[0] : "vhosts";
}

export async function render(el, ctx) {
  const current = ctx.args[0] || defaultSection(ctx.user);
  const entry = SECTIONS.find(([name]) => name === current);
  const tabs = h("nav", { class: "tabs", "aria-label": "admin sections", "data-test": "admin-tabs" },
    h("ul", {}, SECTIONS.map(([name, label]) => h("li", {},
      h("a", { href: `#/admin/${name}`, "data-test": `admin-tab-${name}`,
               "aria-current": name === current ? "page" : undefined }, label)))));
  const body = h("section", { "data-test": `admin-${current}` });
  fill(el, h("h1", {}, "Admin"), tabs, body);
  if (!entry) {
    body.append(h("p", { class: "error", role: "alert" }, `No admin section '${current}'.`));
    return;
  }
  const [, label, load, tag] = entry;
  const canChange = hasTag(ctx.user, tag);
  body.append(h("h2", {}, label));
  if (!canChange) {
    const tags = tagsOf(ctx.user).join(", ") || "none";
    body.append(h("p", { class: "notice", "data-test": "admin-read-only" },
      `Read-only: changing ${label.toLowerCase()} needs the ${tag} tag (your tags: ${tags}).`));
  }
  const content = h("div", {});
  body.append(content);
  const module = await load();
  try {
    await module.render(content, { ...ctx, canChange });
  } catch (e) {  // the listing itself was refused (or failed): say why, in the API's words
    content.replaceChildren(h("p", { class: "error", role: "alert", "data-test": "admin-error" }, errorText(e)));
  }
}
