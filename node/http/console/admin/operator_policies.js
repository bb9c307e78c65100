// Operator policies (/api/operator-policies/V/NAME): limits an operator sets
// over what users' policies and arguments ask for (the lower value wins);
// administrator only. The API needs the operator_policies feature flag.

import { renderPolicies } from "./policy_section.js";

const KIND = { base: "/api/operator-policies", test: "operator-policy", noun: "Operator policy", article: "an",
               applyTo: "queues", example: '{"max-length": 10000}' };

export function render(el, ctx) {
  return renderPolicies(el, ctx, KIND);
}
