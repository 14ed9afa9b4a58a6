// The pack editor: line numbers beside the textarea, a click on a problem's line
// jumps there, #L12 in the address opens at line 12, Tab indents by two spaces.
// Esc then Tab (or Shift+Tab) leaves the text area, so the keyboard reaches Save;
// Ctrl+S / Cmd+S saves; leaving the page (a link, an htmx tab, closing the tab) with
// unsaved edits asks first. YAML, JSON and prompt templates are highlighted by
// highlight.js (frontend/static/vendor/highlightjs, served by the studio) drawn under a
// transparent textarea, so the textarea stays the form field. No build step; safe to
// load more than once (htmx re-runs it).
(function () {
  "use strict";

  var LEAVE = "You have unsaved edits. Leave this page and lose them?";

  function lines(text) { return text.split("\n").length; }

  function paint(area, gutter) {
    var n = lines(area.value), out = [];
    for (var i = 1; i <= n; i++) out.push(i);
    gutter.textContent = out.join("\n");
    gutter.scrollTop = area.scrollTop;
  }

  function goToLine(area, line) {
    var parts = area.value.split("\n"), start = 0;
    line = Math.max(1, Math.min(line, parts.length));
    for (var i = 0; i < line - 1; i++) start += parts[i].length + 1;
    area.focus();
    area.setSelectionRange(start, start + parts[line - 1].length);
    var height = area.scrollHeight / parts.length;
    area.scrollTop = Math.max(0, (line - 5) * height);
  }

  // -- unsaved edits -------------------------------------------------------------------

  function normal(text) { return text.replace(/\r\n?/g, "\n"); }

  function isDirty(area) {
    // data-unsaved: the server sent back text it did not save (a stale base, a form error)
    return area.hasAttribute("data-unsaved") || normal(area.value) !== normal(area.defaultValue);
  }

  function dirtyEditor() {
    var areas = document.querySelectorAll("#save-form textarea[name=content]");
    for (var i = 0; i < areas.length; i++) if (!areas[i].form.dataset.submitting && isDirty(areas[i])) return areas[i];
    return null;
  }

  function save(form) {
    var message = form.querySelector("input[name=message]");
    if (message && !message.value.trim()) {
      message.focus();
      message.reportValidity();
      return;
    }
    var button = form.querySelector("button[type=submit]:not([formaction])");
    form.requestSubmit(button || undefined);
  }

  // -- highlighting --------------------------------------------------------------------

  function language(area) {
    var name = (area.getAttribute("aria-label") || "").toLowerCase();
    if (/\.ya?ml$/.test(name)) return "yaml";
    if (/\.jsonl?$/.test(name)) return "json";
    if (/(^|\/)prompts\/.*\.txt$/.test(name)) return "prompt";
    return null;
  }

  function registerPrompt(hljs) {
    if (hljs.getLanguage("prompt")) return;
    // A prompt template: plain text with {{ field.path }} placeholders, its only syntax
    // (docs/pack-format.md, "Prompt templates").
    hljs.registerLanguage("prompt", function () {
      return {
        name: "Prompt template",
        contains: [{ scope: "template-variable", begin: /\{\{/, end: /\}\}/ }],
      };
    });
  }

  function highlighter(area) {
    var hljs = window.hljs, lang = language(area);
    if (!hljs || !lang) return null;
    registerPrompt(hljs);
    var layer = document.createElement("div");
    layer.className = "code-layer";
    var pre = document.createElement("pre");
    pre.className = "highlight hljs";
    pre.setAttribute("aria-hidden", "true");
    var code = document.createElement("code");
    code.className = "language-" + lang;
    pre.appendChild(code);
    area.parentNode.insertBefore(layer, area);
    layer.appendChild(pre);
    layer.appendChild(area);
    area.classList.add("highlighted");
    area.dataset.language = lang;
    return function () {
      var text = area.value;
      // a last empty line needs a character to have a height, as the textarea gives it one
      code.innerHTML = hljs.highlight(text + (text.endsWith("\n") ? " " : ""), {
        language: lang,
        ignoreIllegals: true,
      }).value;
      pre.scrollTop = area.scrollTop;
      pre.scrollLeft = area.scrollLeft;
    };
  }

  // -- wiring --------------------------------------------------------------------------

  function init(root) {
    (root || document).querySelectorAll(".code-editor").forEach(function (box) {
      if (box.dataset.ready) return;
      box.dataset.ready = "1";
      var area = box.querySelector("textarea"), gutter = box.querySelector(".gutter");
      if (!area || !gutter) return;
      var colour = highlighter(area);
      var pre = colour ? box.querySelector("pre.highlight") : null;
      paint(area, gutter);
      if (colour) colour();
      area.addEventListener("input", function () {
        paint(area, gutter);
        if (colour) colour();
      });
      area.addEventListener("scroll", function () {
        gutter.scrollTop = area.scrollTop;
        if (pre) { pre.scrollTop = area.scrollTop; pre.scrollLeft = area.scrollLeft; }
      });
      area.addEventListener("keydown", function (event) {
        if (event.key === "Escape") { area.dataset.escaped = "1"; return; }
        var escaped = area.dataset.escaped === "1";
        delete area.dataset.escaped;
        if (event.key !== "Tab" || event.shiftKey || event.ctrlKey || event.altKey || event.metaKey) return;
        if (escaped || area.readOnly) return; // Esc then Tab: the browser moves the focus on
        event.preventDefault();
        var s = area.selectionStart;
        area.setRangeText("  ", s, area.selectionEnd, "end");
        area.dispatchEvent(new Event("input", { bubbles: true }));
      });
      if (area.form) {
        area.form.addEventListener("submit", function () { area.form.dataset.submitting = "1"; });
      }
      var match = /^#L(\d+)$/.exec(window.location.hash);
      if (match) goToLine(area, parseInt(match[1], 10));
    });
  }

  if (!window.packforgeEditor) {
    window.packforgeEditor = { init: init, goToLine: goToLine, dirty: function () { return !!dirtyEditor(); } };
    document.addEventListener("click", function (event) {
      var button = event.target.closest && event.target.closest("[data-line]");
      var area = document.getElementById("content");
      if (button && area) goToLine(area, parseInt(button.dataset.line, 10));
    });
    document.addEventListener("keydown", function (event) {
      if (!(event.ctrlKey || event.metaKey) || event.altKey || (event.key !== "s" && event.key !== "S")) return;
      var form = document.getElementById("save-form");
      if (!form) return;
      event.preventDefault();
      save(form);
    });
    window.addEventListener("beforeunload", function (event) {
      if (!dirtyEditor()) return;
      event.preventDefault();
      event.returnValue = LEAVE; // older browsers show their own text; they need a value set
      return LEAVE;
    });
    // An htmx tab or link swaps the page without unloading it: ask before any request that
    // does not come from the editor's own form (its live validation, its Check button).
    document.addEventListener("htmx:confirm", function (event) {
      var elt = event.detail.elt, form = document.getElementById("save-form");
      if (form && form.contains(elt)) return;
      if (!dirtyEditor()) return;
      event.preventDefault();
      if (window.confirm(LEAVE)) event.detail.issueRequest(true);
    });
    document.addEventListener("htmx:load", function (event) { init(event.target); });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { init(document); });
  } else {
    init(document);
  }
})();
