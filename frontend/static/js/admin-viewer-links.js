// Admin: view-only links to a meeting's live captions for people without an account — create one
// (meeting, label, expiry; the link is shown once), list them all, revoke.

import { busy, notify, showError } from "./admin-common.js";
import { api } from "./api.js";
import { byId, copyText, formatDateTime, h } from "./dom.js";

const DEFAULT_HOURS = 24;
const MAX_HOURS = 720;

/** Render the tab: the create form, the link just created (if any), and every link of the caller's meetings. */
export async function renderViewerLinks(created = null) {
  let links;
  let meetings;
  try {
    [{ links }, { meetings }] = await Promise.all([api("GET", "/api/viewer-links"), api("GET", "/api/meetings")]);
  } catch (err) {
    showError(err);
    return;
  }
  const open = meetings.filter((m) => m.kind === "meeting" && m.status !== "ended");
  byId("tab-viewer-links").replaceChildren(createForm(open), created ? createdCard(created) : "", linksTable(links));
  if (created) byId("viewer-link-url").focus();
}

function createForm(meetings) {
  const meeting = h(
    "select",
    { id: "viewer-link-meeting", required: true },
    ...meetings.map((m) => h("option", { value: m.id }, `${m.title} (#${m.id}, ${m.status})`)),
  );
  const label = h("input", { id: "viewer-link-label", maxlength: 100, autocomplete: "off", placeholder: "e.g. Public gallery" });
  const hours = h("input", { id: "viewer-link-hours", type: "number", min: 1, max: MAX_HOURS, step: 1, value: DEFAULT_HOURS, required: true });
  const error = h("p", { class: "form-error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary", disabled: !meetings.length }, "Create link");
  const form = h(
    "form",
    { class: "card stack", id: "viewer-link-create", "aria-labelledby": "viewer-link-create-title" },
    h("h2", { id: "viewer-link-create-title" }, "New view-only link"),
    h("p", { class: "hint" }, meetings.length
      ? "Anyone with the link can follow the meeting's captions without an account, until it expires or you revoke it. Speaking still needs a login."
      : "There is no open meeting to share. Create one on the Meetings tab first."),
    h("div", { class: "inline-form" },
      h("div", { class: "field" }, h("label", { for: "viewer-link-meeting" }, "Meeting"), meeting),
      h("div", { class: "field" }, h("label", { for: "viewer-link-label" }, "Label"), label),
      h("div", { class: "field" }, h("label", { for: "viewer-link-hours" }, "Expires after (hours)"), hours),
    ),
    error,
    h("div", {}, submit),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    const expires = Number(hours.value);
    if (!Number.isInteger(expires) || expires < 1 || expires > MAX_HOURS) {
      error.textContent = `Expiry: a whole number of hours from 1 to ${MAX_HOURS}.`;
      hours.focus();
      return;
    }
    await busy(submit, async () => {
      try {
        const body = { label: label.value.trim(), expires_in_hours: expires };
        const made = await api("POST", `/api/meetings/${encodeURIComponent(meeting.value)}/viewer-links`, body);
        notify("View-only link created. Copy it now: it is not shown again.");
        await renderViewerLinks({ ...made, url: new URL(made.url, location.origin).href });
      } catch (err) {
        error.textContent = err.message;
      }
    });
  });
  return form;
}

function createdCard(created) {
  const url = h("input", { id: "viewer-link-url", readonly: true, value: created.url, "aria-describedby": "viewer-link-url-hint" });
  return h(
    "div",
    { class: "card stack", id: "viewer-link-created" },
    h("h2", {}, `Link “${created.link.label}” for ${created.link.meeting_title}`),
    h("p", { id: "viewer-link-url-hint", class: "hint" }, "Copy this link now: it is shown only once."),
    h("div", { class: "inline-form" },
      h("div", { class: "field grow" }, h("label", { for: "viewer-link-url" }, "Link"), url),
      h("button", { type: "button", onclick: async () => notify((await copyText(created.url)) ? "Link copied." : "Select the link and copy it.") }, "Copy"),
    ),
  );
}

function linksTable(links) {
  const rows = links.length
    ? links.map(linkRow)
    : [h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No view-only links yet."))];
  return h(
    "div",
    { class: "card stack" },
    h("h2", {}, "View-only links"),
    h("div", { class: "table-scroll", tabindex: 0, role: "region", "aria-label": "View-only links table" },
      h("table", { id: "viewer-links-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "Meeting"), h("th", {}, "Label"), h("th", {}, "Status"),
          h("th", {}, "Expires"), h("th", {}, "Last used"), h("th", {}, h("span", { class: "visually-hidden" }, "Actions")))),
        h("tbody", {}, rows))),
  );
}

function linkRow(link) {
  const action = link.status === "active"
    ? h("button", { type: "button", class: "danger", "aria-label": `Revoke ${link.label} of ${link.meeting_title}`, onclick: (e) => revoke(e.currentTarget, link) }, "Revoke")
    : "";
  return h(
    "tr",
    { dataset: { linkId: link.id, status: link.status } },
    h("td", {}, h("a", { href: `/meeting?id=${encodeURIComponent(link.meeting_id)}` }, link.meeting_title)),
    h("td", {}, link.label),
    h("td", {}, h("span", { class: `pill small token-${link.status}` }, link.status)),
    h("td", {}, formatDateTime(link.expires_at)),
    h("td", {}, link.last_used_at ? formatDateTime(link.last_used_at) : "never"),
    h("td", {}, h("div", { class: "row-actions" }, action)),
  );
}

async function revoke(button, link) {
  if (!confirm(`Revoke the link “${link.label}”? People following with it lose the view at once.`)) return;
  await busy(button, async () => {
    await api("DELETE", `/api/meetings/${encodeURIComponent(link.meeting_id)}/viewer-links/${encodeURIComponent(link.id)}`);
    notify(`Link “${link.label}” revoked.`);
    await renderViewerLinks();
  });
}
