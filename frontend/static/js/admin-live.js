// Admin: who is live (lag, counts, end a session) and per-term hit statistics.

import { busy, notify, showError, store, vocabularyName } from "./admin-common.js";
import { api } from "./api.js";
import { byId, formatDateTime, h } from "./dom.js";

const LIVE_REFRESH_MS = 5000;
let liveTimer = 0;

/** Show live sessions and keep refreshing while the tab is open; returns a function that stops it. */
export function startLive() {
  renderLive();
  liveTimer = setInterval(() => {
    if (!document.hidden) renderLive();
  }, LIVE_REFRESH_MS);
  return () => clearInterval(liveTimer);
}

async function renderLive() {
  const panel = byId("tab-live");
  let sessions;
  let load;
  try {
    ({ sessions, load } = await api("GET", "/api/live"));
  } catch (err) {
    showError(err);
    return;
  }
  const rows = sessions.length
    ? sessions.map(liveRow)
    : [h("tr", {}, h("td", { colspan: 7, class: "muted" }, "Nobody is live right now."))];
  panel.replaceChildren(
    h("div", { class: "card stack" },
      h("div", { class: "inline-form" }, h("h2", {}, "Live sessions"), h("span", { class: "spacer" }),
        h("span", { class: "hint" }, `Refreshed ${new Date().toLocaleTimeString()}`),
        h("button", { type: "button", onclick: () => renderLive() }, "Refresh")),
      loadLine(load),
      h("div", { class: "table-scroll", tabindex: 0, role: "region", "aria-label": "Live sessions table" },
        h("table", { id: "live-table" },
          h("thead", {}, h("tr", {}, h("th", {}, "Meeting"), h("th", {}, "User"), h("th", { class: "num" }, "Chunk"),
            h("th", { class: "num" }, "Lag"), h("th", { class: "num" }, "Partials · finals"), h("th", {}, "Since"),
            h("th", {}, h("span", { class: "visually-hidden" }, "Actions")))),
          h("tbody", {}, rows))),
    ),
  );
}

/** The replica's degradation ladder: what it has given up under load (backend/sessions/ladder.py). */
function loadLine(load) {
  const rung = Number(load?.rung) || 0;
  const text = rung
    ? `Load: rung ${rung} of 5 (${load.state.replaceAll("_", " ")}). ${load.message}`
    : "Load: normal (every session gets the full decoding and the second pass).";
  return h("p", { id: "load-state", class: rung ? "banner error" : "hint", role: "status" }, text);
}

function liveRow(session) {
  const lag = Number(session.lag_s) || 0;
  return h(
    "tr",
    { dataset: { sessionId: session.session_id } },
    h("td", {}, session.meeting_title),
    h("td", {}, session.username),
    h("td", { class: "num" }, `${Number(session.chunk_s).toFixed(2)} s`),
    h("td", { class: "num" }, h("span", { class: "pill small lag", dataset: { level: lag < 1.5 ? "ok" : lag < 4 ? "warn" : "bad" } }, `${lag.toFixed(1)} s`)),
    h("td", { class: "num" }, `${session.partials} · ${session.finals}`),
    h("td", {}, formatDateTime(session.started_at)),
    h("td", {}, h("button", { type: "button", class: "danger", onclick: (e) => endSession(e.currentTarget, session) }, "End session")),
  );
}

async function endSession(button, session) {
  if (!confirm(`End ${session.username}'s session in “${session.meeting_title}”?`)) return;
  await busy(button, async () => {
    await api("DELETE", `/api/live/${encodeURIComponent(session.session_id)}`);
    notify("Session ended.");
    await renderLive();
  });
}

/** The statistics tab: filters by meeting and vocabulary; terms not heard yet stand out. */
export function renderStats() {
  const panel = byId("tab-stats");
  const meeting = h("select", { id: "stats-meeting" }, h("option", { value: "" }, "All meetings"),
    store.meetings.map((m) => h("option", { value: m.id }, m.title)));
  const vocabulary = h("select", { id: "stats-vocabulary" }, h("option", { value: "" }, "All vocabularies"),
    store.vocabularies.map((v) => h("option", { value: v.id }, v.name)));
  const summary = h("p", { id: "stats-summary", role: "status" });
  const table = h("table", { id: "stats-table" });
  const load = async () => {
    const query = new URLSearchParams();
    if (meeting.value) query.set("meeting_id", meeting.value);
    if (vocabulary.value) query.set("vocabulary_id", vocabulary.value);
    try {
      const { terms } = await api("GET", `/api/stats/terms?${query}`);
      renderStatsTable(table, summary, terms, meeting.value ? Number(meeting.value) : null);
    } catch (err) {
      showError(err);
    }
  };
  meeting.addEventListener("change", load);
  vocabulary.addEventListener("change", load);
  panel.replaceChildren(
    h("div", { class: "card stack" },
      h("h2", {}, "Term statistics"),
      h("p", { class: "hint" }, "How often each term was recognized in captions. A term not heard yet may simply not have been said."),
      h("div", { class: "inline-form" },
        h("div", { class: "field" }, h("label", { for: "stats-meeting" }, "Meeting"), meeting),
        h("div", { class: "field" }, h("label", { for: "stats-vocabulary" }, "Vocabulary"), vocabulary),
        h("button", { type: "button", onclick: (e) => busy(e.currentTarget, load) }, "Refresh")),
      summary,
      h("div", { class: "table-scroll", tabindex: 0, role: "region", "aria-label": "Term statistics table" }, table),
    ),
  );
  load();
}

/** How many meetings that ran (the one selected, or all) used vocabulary `vocabularyId`. */
function meetingsUsing(vocabularyId, meetingId) {
  return store.meetings.filter(
    (m) => m.started_at && (meetingId === null || m.id === meetingId) && (m.vocabulary_ids || []).includes(vocabularyId),
  ).length;
}

/** What to say about a term with no hits: only what is known (no guess about its spelling). */
export function notHeardNote(meetings) {
  if (!meetings) return "not used in a meeting yet";
  return `not heard yet in ${meetings} meeting${meetings === 1 ? "" : "s"}`;
}

function renderStatsTable(table, summary, terms, meetingId) {
  const sorted = [...terms].sort((a, b) => a.hits - b.hits || String(a.term).localeCompare(b.term));
  const never = sorted.filter((t) => !t.hits).length;
  summary.textContent = terms.length
    ? `${terms.length} terms; ${never} not heard yet${never ? " (highlighted)" : ""}.`
    : "No terms to show.";
  table.replaceChildren(
    h("thead", {}, h("tr", {}, h("th", {}, "Term"), h("th", {}, "Written as"), h("th", {}, "Vocabulary"), h("th", { class: "num" }, "Hits"), h("th", {}, "Note"))),
    h("tbody", {}, sorted.map((t) =>
      h("tr", { class: t.hits ? "" : "zero" },
        h("td", {}, t.term),
        h("td", {}, t.display && t.display !== t.term ? t.display : h("span", { class: "muted" }, "—")),
        h("td", {}, vocabularyName(t.vocabulary_id)),
        h("td", { class: "num" }, t.hits),
        h("td", { class: "hint" }, t.hits ? "" : notHeardNote(meetingsUsing(t.vocabulary_id, meetingId))),
      ),
    )),
  );
}
