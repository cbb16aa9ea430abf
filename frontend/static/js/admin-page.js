// Admin page: login, then tabs for vocabularies, meetings, live sessions, term statistics, API tokens and
// users.

import { renderStats, startLive } from "./admin-live.js";
import { renderAudit } from "./admin-privacy.js";
import { loadMeetings, renderMeetings } from "./admin-meetings.js";
import { renderTokens } from "./admin-tokens.js";
import { renderUsers } from "./admin-users.js";
import { renderViewerLinks } from "./admin-viewer-links.js";
import { bindVocabularyForms, loadVocabularies, selectVocabulary } from "./admin-vocabularies.js";
import { showError, store } from "./admin-common.js";
import { describeError, logout } from "./api.js";
import { applyStoredDisplay } from "./display-prefs.js";
import { byId } from "./dom.js";
import { requireUser } from "./login.js";

const TABS = ["vocabularies", "meetings", "live", "stats", "tokens", "viewer-links", "users", "audit"];
let stopLive = null;

async function main() {
  applyStoredDisplay();
  store.user = await requireUser(byId("login"), "Log in with an administrator account.");
  byId("whoami").textContent = `${store.user.username} (${store.user.role})`;
  byId("whoami").hidden = false;
  byId("logout").hidden = false;
  byId("logout").addEventListener("click", async () => {
    await logout().catch(() => {});
    location.reload();
  });
  if (store.user.role !== "admin") {
    showError(new Error("This account is not an administrator; some actions will be refused."));
  }
  byId("admin").hidden = false;
  bindVocabularyForms();
  const vocabularies = await loadVocabularies();
  if (vocabularies.length) await selectVocabulary(vocabularies[0].id);
  addEventListener("hashchange", showTab);
  await showTab();
}

async function showTab() {
  const name = TABS.includes(location.hash.slice(1)) ? location.hash.slice(1) : "vocabularies";
  for (const link of document.querySelectorAll("[data-tab]")) {
    if (link.dataset.tab === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  for (const panel of document.querySelectorAll("[data-panel]")) panel.hidden = panel.dataset.panel !== name;
  if (stopLive) {
    stopLive();
    stopLive = null;
  }
  showError(null);
  if (name === "meetings") {
    await loadVocabularies();
    await renderMeetings();
  } else if (name === "live") {
    stopLive = startLive();
  } else if (name === "stats") {
    await Promise.all([loadVocabularies(), loadMeetings()]);
    renderStats();
  } else if (name === "tokens") {
    await renderTokens();
  } else if (name === "users") {
    await renderUsers();
  } else if (name === "viewer-links") {
    await renderViewerLinks();
  } else if (name === "audit") {
    await renderAudit();
  }
}

main().catch((err) => showError(new Error(describeError(err))));
