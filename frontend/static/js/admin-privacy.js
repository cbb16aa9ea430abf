// Admin: who belongs to a meeting (add by name, remove, visibility), deleting a meeting, and the access
// audit (who read, exported, edited, deleted a meeting or made a viewer link; CSV export). Issue 46.

import { busy, notify, showError } from "./admin-common.js";
import { api } from "./api.js";
import { byId, formatDateTime, h } from "./dom.js";

const path = (meeting) => `/api/meetings/${encodeURIComponent(meeting.id)}`;

/** An editor row under a meeting's row: its organiser, members and visibility. */
export async function membersRow(meeting, colspan) {
  document.getElementById(`members-${meeting.id}`)?.remove();
  const cell = h("td", { colspan });
  const editor = h("tr", { id: `members-${meeting.id}`, class: "assign-row" }, cell);
  const draw = (answer) => {
    const list = h("ul", { class: "stack", "aria-label": `Members of ${meeting.title}` },
      answer.members.length ? answer.members.map((m) => memberItem(meeting, m, draw)) : h("li", { class: "muted" }, "No members yet."));
    const name = h("input", { id: `member-name-${meeting.id}`, required: true, maxlength: 64, autocomplete: "off" });
    const add = h("button", { type: "submit", class: "primary" }, "Add member");
    const form = h("form", { class: "inline-form" },
      h("label", { for: name.id }, "Username"), name, add);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(add, async () => {
        draw(await api("POST", `${path(meeting)}/members`, { username: name.value.trim() }));
        notify(`${name.value.trim()} can now read “${meeting.title}”.`);
      });
    });
    const everyone = h("input", { type: "checkbox", id: `visibility-${meeting.id}`, checked: answer.visibility === "organisation" });
    everyone.addEventListener("change", () =>
      busy(everyone, async () => {
        await api("PATCH", path(meeting), { visibility: everyone.checked ? "organisation" : "private" });
        notify(everyone.checked ? "Visible to the whole organisation." : "Visible to its members only.");
      }),
    );
    cell.replaceChildren(h("div", { class: "stack" },
      h("span", { class: "label" }, `Members of “${meeting.title}” (organiser: ${answer.organiser ? answer.organiser.name : "none"})`),
      list, form,
      h("label", { class: "toggle" }, everyone, " Visible to the whole organisation"),
      h("button", { type: "button", onclick: () => editor.remove() }, "Close"),
    ));
  };
  draw(await api("GET", `${path(meeting)}/members`));
  return editor;
}

function memberItem(meeting, member, draw) {
  const remove = h("button", { type: "button", class: "link", "aria-label": `Remove ${member.username}` }, "Remove");
  remove.addEventListener("click", () => busy(remove, async () => draw(await api("DELETE", `${path(meeting)}/members/${member.user_id}`))));
  return h("li", {}, `${member.name} (${member.username})`, member.spoke ? h("span", { class: "muted" }, " · spoke") : " ", member.spoke ? "" : remove);
}

/** Delete a meeting after asking; ``done`` redraws the list. */
export async function deleteMeeting(button, meeting, done) {
  if (!confirm(`Delete “${meeting.title}” and all its captions? This cannot be undone.`)) return;
  await busy(button, async () => {
    await api("DELETE", path(meeting));
    notify(`“${meeting.title}” was deleted.`);
    await done();
  });
}

/** The access audit tab (admins): the latest entries and a CSV export. */
export async function renderAudit() {
  const panel = byId("tab-audit");
  let entries;
  try {
    ({ entries } = await api("GET", "/api/audit"));
  } catch (err) {
    showError(err);
    return;
  }
  const rows = entries.length
    ? entries.map((e) => h("tr", {},
      h("td", {}, formatDateTime(e.at)), h("td", {}, e.actor.name), h("td", {}, e.action + (e.admin_access ? " (admin)" : "")),
      h("td", {}, `${e.kind} ${e.meeting_id}`), h("td", {}, e.address), h("td", {}, e.detail)))
    : [h("tr", {}, h("td", { colspan: 6, class: "muted" }, "Nothing recorded yet."))];
  panel.replaceChildren(h("div", { class: "card stack" },
    h("h2", {}, "Access audit"),
    h("p", {}, h("a", { href: "/api/audit.csv", download: "access-audit.csv" }, "Download as CSV")),
    h("div", { class: "table-scroll" }, h("table", { id: "audit-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "When"), h("th", {}, "Who"), h("th", {}, "Action"), h("th", {}, "Meeting"),
        h("th", {}, "Address"), h("th", {}, "Detail"))),
      h("tbody", {}, rows))),
  ));
}
