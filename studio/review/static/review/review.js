// Keyboard use of the review queue (frontend/templates/review/). No mouse needed:
// queue: j/k next/previous item, Enter or o open, a approve the best candidate,
// e edit, r reject (both open the item with its form ready); item: a approve, e edit
// (focus the first answer field), r reject (focus the note), Ctrl+Enter submit what
// was started, Esc leave a field, j/k the next/previous item, q back to the queue.
(function () {
  "use strict";
  var KEY = "review-selected";

  function typing(ev) {
    var t = ev.target;
    return t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
  }

  function csrf() {
    var headers = document.body.getAttribute("hx-headers");
    try { return JSON.parse(headers)["X-CSRFToken"]; } catch (e) { return ""; }
  }

  // -- the queue ------------------------------------------------------------------------
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("tr.review-row")); }

  function selected() {
    var id = sessionStorage.getItem(KEY);
    var all = rows();
    for (var i = 0; i < all.length; i++) if (all[i].dataset.item === id) return i;
    return all.length ? 0 : -1;
  }

  function select(i) {
    var all = rows();
    if (!all.length) return;
    i = Math.max(0, Math.min(all.length - 1, i));
    all.forEach(function (r) { r.classList.remove("selected"); });
    all[i].classList.add("selected");
    sessionStorage.setItem(KEY, all[i].dataset.item);
    all[i].scrollIntoView({ block: "nearest" });
  }

  function queueKey(ev) {
    var all = rows();
    var i = selected();
    if (i < 0) return;
    var row = all[i];
    switch (ev.key) {
      case "j": select(i + 1); break;
      case "k": select(i - 1); break;
      case "Enter": case "o": window.location = row.dataset.url; break;
      case "a":
        var form = row.querySelector("form.approve-form");
        if (form) { select(i + 1); form.submit(); }
        break;
      case "e": window.location = row.dataset.url + "?do=edit"; break;
      case "r": window.location = row.dataset.url + "?do=reject"; break;
      default: return;
    }
    ev.preventDefault();
  }

  // -- an item --------------------------------------------------------------------------
  function claim(form) {
    var url = form.dataset.claim;
    if (url) fetch(url, { method: "POST", headers: { "X-CSRFToken": csrf(), "HX-Request": "true" }, credentials: "same-origin" });
  }

  function start(form, mode) {
    form.dataset.mode = mode;
    form.classList.remove("decide-form-edit", "decide-form-reject");
    form.classList.add("decide-form-" + mode);
    claim(form);
    var target = mode === "reject" ? form.querySelector("[name=note]") : form.querySelector("[name^=a_], [name=answer]");
    if (target) target.focus();
  }

  function submit(form, decision) {
    var button = form.querySelector("button[value=" + decision + "]");
    if (button) form.requestSubmit(button);
  }

  function itemKey(ev, form) {
    if (typing(ev)) {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { submit(form, form.dataset.mode || "edit"); ev.preventDefault(); }
      else if (ev.key === "Escape") { ev.target.blur(); }
      return;
    }
    switch (ev.key) {
      case "a": submit(form, "approve"); break;
      case "e": start(form, "edit"); break;
      case "r": start(form, "reject"); break;
      default: return;
    }
    ev.preventDefault();
  }

  document.addEventListener("keydown", function (ev) {
    if (ev.altKey || (ev.ctrlKey && ev.key !== "Enter") || (ev.metaKey && ev.key !== "Enter")) return;
    var form = document.getElementById("decide-form");
    if (form) { itemKey(ev, form); if (ev.defaultPrevented) return; }
    if (typing(ev)) return;
    if (document.getElementById("review-items")) { queueKey(ev); return; }
    if (ev.key === "q") { window.location = document.getElementById("back-to-queue").href; ev.preventDefault(); }
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (document.getElementById("review-items")) select(selected());
    var form = document.getElementById("decide-form");
    var mode = new URLSearchParams(window.location.search).get("do");
    if (form && (mode === "edit" || mode === "reject")) start(form, mode);
  });
  // The list is replaced by its poller: keep the selection on the same item.
  document.addEventListener("htmx:afterSwap", function () {
    if (document.getElementById("review-items")) select(selected());
  });
})();
