// "Who can read it" on one transcript (/transcripts?id=ID), for its organiser or an admin (issue 46): the
// members (add by username, remove those who did not speak), visibility to the whole organisation, the
// meeting's access record (who read, exported, edited it, and when), and deleting it. A dictation has no
// members: only its record and Delete. The API: docs/protocol.md, "Who sees a meeting".

import { api, describeError } from "./api.js";
import { byId, formatDateTime, h } from "./dom.js";

const AUDIT_SHOWN = 50;

function say(text, tone = "") {
  const status = byId("privacy-status");
  status.className = tone ? `ack ${tone}` : "ack";
  status.textContent = text;
}

async function attempt(control, work, failed = "") {
  control.setAttribute("aria-disabled", "true");
  try {
    await work();
  } catch (err) {
    say(failed + describeError(err), "error");
  } finally {
    control.removeAttribute("aria-disabled");
  }
}

/** One line of the access record: "7 Dec 2026, 14:02 · alice · export (text) · 127.0.0.1". */
export function auditLine(entry) {
  const action = entry.action + (entry.detail ? ` (${entry.detail})` : "") + (entry.admin_access ? ", as admin" : "");
  return [formatDateTime(entry.at), entry.actor.name, action, entry.address].join(" · ");
}

/** Show the card for `meeting` (the organiser's or an admin's view); `onDeleted` runs once it is gone. */
export function offerMeetingPrivacy(meeting, onDeleted) {
  const base = `/api/meetings/${encodeURIComponent(meeting.id)}`;
  const isMeeting = meeting.kind === "meeting";
  byId("privacy").hidden = false;
  for (const id of ["member-list", "member-form"]) byId(id).hidden = !isMeeting;
  byId("visibility").closest("label").hidden = !isMeeting;
  byId("privacy-title").textContent = isMeeting ? "Who can read it" : "This dictation";

  const drawMembers = (answer) => {
    byId("privacy-organiser").textContent = answer.organiser ? `Organiser: ${answer.organiser.name}` : "No organiser (a former member).";
    byId("visibility").checked = answer.visibility === "organisation";
    const items = answer.members.map((m) => {
      const item = h("li", {}, `${m.name} (${m.username})`);
      if (m.spoke) {
        item.append(h("span", { class: "muted" }, " · spoke in it"));
      } else {
        const remove = h("button", { type: "button", class: "link", "aria-label": `Remove ${m.username}` }, "Remove");
        remove.addEventListener("click", () =>
          attempt(remove, async () => {
            drawMembers(await api("DELETE", `${base}/members/${m.user_id}`));
            say(`${m.username} can no longer read it.`);
          }),
        );
        item.append(" ", remove);
      }
      return item;
    });
    byId("member-list").replaceChildren(...(items.length ? items : [h("li", { class: "muted" }, "No members yet: only the organiser reads it.")]));
  };

  const loadAudit = async () => {
    const { entries } = await api("GET", `${base}/audit?limit=${AUDIT_SHOWN}`);
    byId("audit-list").replaceChildren(
      ...(entries.length ? entries.map((e) => h("li", {}, auditLine(e))) : [h("li", { class: "muted" }, "Nothing recorded yet.")]),
    );
  };
  byId("audit").addEventListener("toggle", () => {
    if (byId("audit").open) loadAudit().catch((err) => say(describeError(err), "error"));
  });

  if (isMeeting) {
    api("GET", `${base}/members`).then(drawMembers, (err) => say(describeError(err), "error"));
    byId("member-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const name = byId("member-name").value.trim();
      const button = byId("member-form").querySelector("button");
      attempt(button, async () => {
        drawMembers(await api("POST", `${base}/members`, { username: name }));
        byId("member-name").value = "";
        say(`${name} can now read it.`);
      }, `${name} was not added: `);
    });
    byId("visibility").addEventListener("change", () => {
      const everyone = byId("visibility").checked;
      attempt(byId("visibility"), async () => {
        await api("PATCH", base, { visibility: everyone ? "organisation" : "private" });
        say(everyone ? "Everyone in the organisation can read it." : "Only its members can read it.");
      });
    });
  }
  byId("delete-meeting").addEventListener("click", () => {
    const button = byId("delete-meeting");
    if (!confirm(`Delete “${meeting.title}” and all its captions? This cannot be undone.`)) return;
    attempt(button, async () => {
      await api("DELETE", base);
      onDeleted();
    });
  });
}
