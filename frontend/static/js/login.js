// The login form every page shows when there is no session; resolves once the user is logged in.

import { describeError, login, me } from "./api.js";
import { h } from "./dom.js";

/**
 * Resolve with the current user, showing a login form inside `container` first if needed.
 * `purpose` is a sentence saying why the page needs a login.
 */
export async function requireUser(container, purpose = "Log in to continue.") {
  let user = null;
  try {
    user = await me();
  } catch (err) {
    container.hidden = false;
    container.replaceChildren(h("p", { class: "error", role: "alert" }, describeError(err)));
    throw err;
  }
  if (user) return user;
  return new Promise((resolve) => {
    container.hidden = false;
    container.replaceChildren(loginForm(purpose, (loggedIn) => {
      container.hidden = true;
      container.replaceChildren();
      resolve(loggedIn);
    }));
    container.querySelector("input").focus();
  });
}

function loginForm(purpose, onDone) {
  const username = h("input", { id: "login-username", name: "username", autocomplete: "username", required: true });
  const password = h("input", {
    id: "login-password",
    name: "password",
    type: "password",
    autocomplete: "current-password",
    required: true,
  });
  const message = h("p", { class: "error", role: "alert", id: "login-error" });
  const submit = h("button", { type: "submit", class: "primary" }, "Log in");
  const form = h(
    "form",
    { class: "card login", "aria-labelledby": "login-title" },
    h("h2", { id: "login-title" }, "Log in"),
    h("p", { class: "muted" }, purpose),
    h("div", { class: "field" }, h("label", { for: "login-username" }, "Username"), username),
    h("div", { class: "field" }, h("label", { for: "login-password" }, "Password"), password),
    message,
    submit,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.disabled = true;
    message.textContent = "";
    try {
      onDone(await login(username.value.trim(), password.value));
    } catch (err) {
      message.textContent = err.status === 401 ? "Wrong username or password." : describeError(err);
      password.select();
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}
