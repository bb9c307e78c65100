// Policies (GET/PUT/DELETE /api/policies/V/NAME): changing them needs the
// policymaker tag (or administrator), as in RabbitMQ.

import { renderPolicies } from "./policy_section.js";

const KIND = { base: "/api/policies", test: "policy", noun: "Policy", article: "a", applyTo: "all",
               example: '{"max-length": 1000, "overflow": "reject-publish"}' };

export function render(el, ctx) {
  return renderPolicies(el, ctx, KIND);
}
