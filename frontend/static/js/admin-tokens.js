// Admin: API tokens for scripts — create one (name, scope, expiry; the secret is shown once), list, revoke.

import { busy, notify, showError } from "./admin-common.js";
import { api } from "./api.js";
import { byId, copyText, formatDateTime, h } from "./dom.js";

const DEFAULT_DAYS = 90;
const MAX_DAYS = 365;

/** Render the tokens tab: the create form, the secret of a token just created (if any), and the list. */
export async function renderTokens(created = null) {
  let tokens;
  try {
    ({ tokens } = await api("GET", "/api/tokens"));
  } catch (err) {
    showError(err);
    return;
  }
  byId("tab-tokens").replaceChildren(createForm(), created ? secretCard(created) : "", tokensTable(tokens));
  if (created) byId("token-secret").focus();
}

function createForm() {
  const name = h("input", { id: "token-name", required: true, maxlength: 100, autocomplete: "off" });
  const scope = h("select", { id: "token-scope" },
    h("option", { value: "write" }, "Read and write"),
    h("option", { value: "read" }, "Read only"),
  );
  const days = h("input", { id: "token-days", type: "number", min: 1, max: MAX_DAYS, step: 1, value: DEFAULT_DAYS, required: true });
  const error = h("p", { class: "form-error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "Create token");
  const form = h(
    "form",
    { class: "card stack", id: "token-create", "aria-labelledby": "token-create-title" },
    h("h2", { id: "token-create-title" }, "New API token"),
    h("p", { class: "hint" }, "Scripts send it as “Authorization: Bearer <token>”. A read-only token cannot change anything."),
    h("div", { class: "inline-form" },
      h("div", { class: "field" }, h("label", { for: "token-name" }, "Name"), name),
      h("div", { class: "field" }, h("label", { for: "token-scope" }, "Access"), scope),
      h("div", { class: "field" }, h("label", { for: "token-days" }, "Expires after (days)"), days),
    ),
    error,
    h("div", {}, submit),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    const expires = Number(days.value);
    if (!name.value.trim()) {
      error.textContent = "Give the token a name, e.g. the script that uses it.";
      name.focus();
      return;
    }
    if (!Number.isInteger(expires) || expires < 1 || expires > MAX_DAYS) {
      error.textContent = `Expiry: a whole number of days from 1 to ${MAX_DAYS}.`;
      days.focus();
      return;
    }
    await busy(submit, async () => {
      try {
        const token = await api("POST", "/api/tokens", { name: name.value.trim(), scope: scope.value, expires_in_days: expires });
        notify(`Created token “${token.name}”. Copy it now: it is not shown again.`);
        await renderTokens(token);
      } catch (err) {
        error.textContent = err.message;
      }
    });
  });
  return form;
}

function secretCard(token) {
  const secret = h("input", { id: "token-secret", readonly: true, value: token.token, "aria-describedby": "token-secret-hint" });
  return h(
    "div",
    { class: "card stack", id: "token-created" },
    h("h2", {}, `Token “${token.name}”`),
    h("p", { id: "token-secret-hint", class: "hint" }, "Copy this token now: it is shown only once."),
    h("div", { class: "inline-form" },
      h("div", { class: "field grow" }, h("label", { for: "token-secret" }, "Token"), secret),
      h("button", { type: "button", onclick: async () => notify((await copyText(token.token)) ? "Token copied." : "Select the token and copy it.") }, "Copy"),
    ),
  );
}

function tokensTable(tokens) {
  const rows = tokens.length
    ? tokens.map(tokenRow)
    : [h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No API tokens yet."))];
  return h(
    "div",
    { class: "card stack" },
    h("h2", {}, "API tokens"),
    h("div", { class: "table-scroll", tabindex: 0, role: "region", "aria-label": "API tokens table" },
      h("table", { id: "tokens-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "User"), h("th", {}, "Access"), h("th", {}, "Status"),
          h("th", {}, "Expires"), h("th", {}, "Last used"), h("th", {}, h("span", { class: "visually-hidden" }, "Actions")))),
        h("tbody", {}, rows))),
  );
}

function tokenStatus(token) {
  if (token.revoked) return "revoked";
  if (token.expired) return "expired";
  return "active";
}

function tokenRow(token) {
  const status = tokenStatus(token);
  const action = status === "active"
    ? h("button", { type: "button", class: "danger", "aria-label": `Revoke ${token.name}`, onclick: (e) => revoke(e.currentTarget, token) }, "Revoke")
    : "";
  return h(
    "tr",
    { dataset: { tokenId: token.id, status } },
    h("td", {}, token.name),
    h("td", {}, token.username),
    h("td", {}, token.scope === "read" ? "read only" : "read and write"),
    h("td", {}, h("span", { class: `pill small token-${status}` }, status)),
    h("td", {}, token.expires_at ? formatDateTime(token.expires_at) : "never"),
    h("td", {}, token.last_used_at ? formatDateTime(token.last_used_at) : "never"),
    h("td", {}, h("div", { class: "row-actions" }, action)),
  );
}

async function revoke(button, token) {
  if (!confirm(`Revoke the token “${token.name}”? Scripts using it stop working at once.`)) return;
  await busy(button, async () => {
    await api("DELETE", `/api/tokens/${encodeURIComponent(token.id)}`);
    notify(`Token “${token.name}” revoked.`);
    await renderTokens();
  });
}
