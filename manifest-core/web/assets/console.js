// The svc consoles' only script (no inline script: the Content-Security-Policy forbids it).
// A region marked `data-refresh="URL"` is replaced by the HTML fragment URL answers, every
// `data-every` milliseconds (default 2000), so a view updates without a reload; a button
// marked `data-copy="TEXT"` copies TEXT; a file input marked `data-file-into="ID"` reads the
// chosen file (as text) into the field ID; a long ID shown short (`code.id`) is selected whole
// when it takes the keyboard's focus (a click selects it whole by CSS), so Ctrl-C copies it.
// Listeners sit on the document: they hold for regions the refresh replaces.
"use strict";

function refresh(region) {
  const url = region.getAttribute("data-refresh");
  const every = Number(region.getAttribute("data-every") || 2000);
  const status = document.getElementById(region.getAttribute("data-status") || "");
  const tick = async () => {
    try {
      const answer = await fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } });
      if (answer.status === 401) {
        window.location.assign("/console/sign-in");
        return;
      }
      if (answer.ok) {
        const html = await answer.text();
        if (region.innerHTML !== html) {
          region.innerHTML = html;
        }
        if (status) status.textContent = "updated " + new Date().toLocaleTimeString();
      } else if (status) {
        status.textContent = "the last update failed (" + answer.status + "); retrying";
      }
    } catch (e) {
      if (status) status.textContent = "offline; retrying";
    }
    setTimeout(tick, every);
  };
  setTimeout(tick, every);
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-refresh]").forEach(refresh);
  document.querySelectorAll("input[type=file][data-file-into]").forEach((input) => {
    input.addEventListener("change", async () => {
      const target = document.getElementById(input.getAttribute("data-file-into"));
      const file = input.files && input.files[0];
      if (target && file) target.value = await file.text();
    });
  });
});

document.addEventListener("click", (event) => {
  const button = event.target instanceof Element ? event.target.closest("button[data-copy]") : null;
  if (button && navigator.clipboard) navigator.clipboard.writeText(button.getAttribute("data-copy"));
});

document.addEventListener("focusin", (event) => {
  const id = event.target instanceof Element ? event.target.closest("code.id") : null;
  if (id) window.getSelection().selectAllChildren(id);
});
