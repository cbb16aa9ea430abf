// Invite page: a new user sets their password with the one-time link an admin sent them
// (/invite#token=...; the token stays in the fragment, which the browser never sends to the server).

import { api, describeError } from "./api.js";
import { byId } from "./dom.js";

const MIN_PASSWORD_CHARS = 10;

function problem(text) {
  byId("invite-form").hidden = true;
  byId("invite-problem").textContent = text;
  byId("invite-problem").hidden = false;
}

async function main() {
  const token = new URLSearchParams(location.hash.slice(1)).get("token");
  if (!token) {
    problem("This page needs the invite link exactly as you received it. Ask your administrator for a new one.");
    return;
  }
  let invite;
  try {
    invite = await api("POST", "/api/invites/check", { token });
  } catch (err) {
    problem(err.status === 410 ? "This invite link was used already, has expired or is wrong. Ask your administrator for a new one." : describeError(err));
    return;
  }
  byId("invite-who").textContent = `For ${invite.display_name} (username ${invite.username}).`;
  byId("invite-form").hidden = false;
  byId("invite-password").focus();
  byId("invite-form").addEventListener("submit", (event) => accept(event, token, invite));
}

async function accept(event, token, invite) {
  event.preventDefault();
  const password = byId("invite-password");
  const error = byId("invite-error");
  error.textContent = "";
  if (password.value.length < MIN_PASSWORD_CHARS) {
    error.textContent = `The password needs at least ${MIN_PASSWORD_CHARS} characters.`;
    password.focus();
    return;
  }
  if (password.value !== byId("invite-repeat").value) {
    error.textContent = "The two passwords differ.";
    byId("invite-repeat").focus();
    return;
  }
  const submit = event.submitter || byId("invite-form").querySelector("button");
  submit.disabled = true;
  try {
    await api("POST", "/api/invites/accept", { token, password: password.value });
  } catch (err) {
    submit.disabled = false;
    if (err.status === 410) problem("This invite link was used already or has expired. Ask your administrator for a new one.");
    else error.textContent = describeError(err);
    return;
  }
  history.replaceState(null, "", location.pathname); // the spent token leaves the address bar and history
  byId("invite-form").hidden = true;
  byId("invite-username").textContent = invite.username;
  byId("invite-done").hidden = false;
}

main().catch((err) => problem(describeError(err)));
