// Admin: users — list them, create one with an initial password or an invite link (one-time, expiring; the
// link is shown once, for the admin to copy and send), and make a new link for someone who has not used theirs.

import { busy, notify, showError } from "./admin-common.js";
import { api } from "./api.js";
import { byId, copyText, formatDateTime, h } from "./dom.js";

const MIN_PASSWORD_CHARS = 10;
const DEFAULT_INVITE_HOURS = 72;

/** Render the users tab: the create form, the invite link just made (if any), and the list. */
export async function renderUsers(made = null) {
  let users;
  try {
    ({ users } = await api("GET", "/api/users"));
  } catch (err) {
    showError(err);
    return;
  }
  byId("tab-users").replaceChildren(createForm(), made ? inviteCard(made) : "", usersTable(users));
  if (made) byId("invite-link").focus();
}

/** The full link for an invite answer's `path` ("/invite#token=..."). */
export function inviteUrl(path) {
  return new URL(path, location.origin).href;
}

function createForm() {
  const username = h("input", { id: "user-username", required: true, maxlength: 64, autocomplete: "off" });
  const displayName = h("input", { id: "user-display-name", maxlength: 100, autocomplete: "off" });
  const role = h("select", { id: "user-role" }, h("option", { value: "member" }, "Member"), h("option", { value: "admin" }, "Admin"));
  const viaInvite = h("input", { type: "radio", name: "user-access", id: "user-access-invite", value: "invite", checked: true });
  const viaPassword = h("input", { type: "radio", name: "user-access", id: "user-access-password", value: "password" });
  const password = h("input", { id: "user-password", type: "password", autocomplete: "new-password", minlength: MIN_PASSWORD_CHARS });
  const passwordField = h("div", { class: "field", hidden: true }, h("label", { for: "user-password" }, `Initial password (at least ${MIN_PASSWORD_CHARS} characters)`), password);
  const error = h("p", { class: "form-error", role: "alert", id: "user-create-error" });
  const created = h("p", { class: "ack ok", role: "status", id: "user-created" });
  const submit = h("button", { type: "submit", class: "primary" }, "Create user");
  for (const radio of [viaInvite, viaPassword]) {
    radio.addEventListener("change", () => {
      passwordField.hidden = !viaPassword.checked;
    });
  }
  const form = h(
    "form",
    { class: "card stack", id: "user-create", "aria-labelledby": "user-create-title", novalidate: true },
    h("h2", { id: "user-create-title" }, "New user"),
    h("div", { class: "inline-form" },
      h("div", { class: "field" }, h("label", { for: "user-username" }, "Username"), username),
      h("div", { class: "field" }, h("label", { for: "user-display-name" }, "Display name"), displayName),
      h("div", { class: "field" }, h("label", { for: "user-role" }, "Role"), role),
    ),
    h("fieldset", { class: "access" },
      h("legend", {}, "How they get in"),
      h("label", { class: "toggle" }, viaInvite, " Invite link: they choose their own password (the link works once, for 3 days)"),
      h("label", { class: "toggle" }, viaPassword, " Initial password: you tell it to them"),
    ),
    passwordField,
    error,
    h("div", {}, submit),
    created,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    const body = { username: username.value.trim(), display_name: displayName.value.trim() || null, role: role.value };
    if (!body.username) {
      error.textContent = "Give the user a username (letters, digits, '.', '-', '_').";
      username.focus();
      return;
    }
    if (viaPassword.checked) {
      if (password.value.length < MIN_PASSWORD_CHARS) {
        error.textContent = `The password needs at least ${MIN_PASSWORD_CHARS} characters.`;
        password.focus();
        return;
      }
      body.password = password.value;
    } else {
      body.invite = true;
      body.expires_in_hours = DEFAULT_INVITE_HOURS;
    }
    await busy(submit, async () => {
      try {
        const answer = await api("POST", "/api/users", body);
        await renderUsers(answer.invite ? answer : null);
        // said under the form (the form is drawn anew), not in a toast: one sat over the Users table's header
        byId("user-created").textContent = answer.invite
          ? `Created ${answer.user.username}. Copy the invite link now.`
          : `Created ${answer.user.username}.`;
      } catch (err) {
        const bad = err.errors && err.errors[0] ? err.errors[0].field : null;
        error.textContent = err.message;
        ({ username, display_name: displayName, password, role })[bad]?.focus();
      }
    });
  });
  return form;
}

function inviteCard(made) {
  const link = h("input", { id: "invite-link", readonly: true, value: inviteUrl(made.invite.path), "aria-describedby": "invite-link-hint" });
  const status = h("span", { class: "muted", role: "status" });
  return h(
    "div",
    { class: "card stack", id: "invite-made" },
    h("h2", {}, `Invite for ${made.user.display_name}`),
    h("p", { id: "invite-link-hint", class: "hint" },
      `Send this link to ${made.user.display_name}. It works once, until ${formatDateTime(made.invite.expires_at)}, and is shown only now.`),
    h("div", { class: "inline-form" },
      h("div", { class: "field grow" }, h("label", { for: "invite-link" }, "Invite link"), link),
      h("button", {
        type: "button",
        onclick: async () => {
          status.textContent = (await copyText(link.value)) ? "Copied." : "Copy failed: select the link and press Ctrl+C.";
        },
      }, "Copy link"),
      status,
    ),
  );
}

function statusText(user) {
  if (user.status === "active") return "Active";
  if (user.invite_expired) return "Invite expired";
  if (user.invite_expires_at) return `Invited (link valid until ${formatDateTime(user.invite_expires_at)})`;
  return "Invited";
}

function usersTable(users) {
  const table = h("table", { id: "users-table" },
    h("thead", {}, h("tr", {}, h("th", {}, "Username"), h("th", {}, "Display name"), h("th", {}, "Role"), h("th", {}, "Status"), h("th", {}, "Created"), h("th", {}, ""))),
    h("tbody", {}, users.map((user) =>
      h("tr", { dataset: { userId: user.id, status: user.status } },
        h("td", {}, user.username),
        h("td", {}, user.display_name),
        h("td", {}, user.role),
        h("td", {}, statusText(user)),
        h("td", {}, formatDateTime(user.created_at)),
        h("td", {}, user.status === "invited"
          ? h("button", { type: "button", class: "link", onclick: (e) => reinvite(e.currentTarget, user) }, "New invite link")
          : ""),
      ),
    )),
  );
  return h("div", { class: "card stack" },
    h("h2", {}, "Users"),
    h("div", { class: "table-scroll", tabindex: 0, role: "region", "aria-label": "Users table" }, table),
  );
}

async function reinvite(button, user) {
  await busy(button, async () => {
    const answer = await api("POST", `/api/users/${user.id}/invite`, { expires_in_hours: DEFAULT_INVITE_HOURS });
    notify(`New invite link for ${user.username}; the earlier one no longer works.`);
    await renderUsers(answer);
  });
}
