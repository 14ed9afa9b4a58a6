// The pack editor: line numbers beside the textarea, a click on a problem's line
// jumps there, #L12 in the address opens at line 12, Tab indents by two spaces.
// No build step, no dependencies; safe to load more than once (htmx re-runs it).
(function () {
  "use strict";

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

  function init(root) {
    (root || document).querySelectorAll(".code-editor").forEach(function (box) {
      if (box.dataset.ready) return;
      box.dataset.ready = "1";
      var area = box.querySelector("textarea"), gutter = box.querySelector(".gutter");
      if (!area || !gutter) return;
      paint(area, gutter);
      area.addEventListener("input", function () { paint(area, gutter); });
      area.addEventListener("scroll", function () { gutter.scrollTop = area.scrollTop; });
      area.addEventListener("keydown", function (event) {
        if (event.key !== "Tab" || event.shiftKey || area.readOnly) return;
        event.preventDefault();
        var s = area.selectionStart;
        area.setRangeText("  ", s, area.selectionEnd, "end");
        area.dispatchEvent(new Event("input", { bubbles: true }));
      });
      var match = /^#L(\d+)$/.exec(window.location.hash);
      if (match) goToLine(area, parseInt(match[1], 10));
    });
  }

  if (!window.packforgeEditor) {
    window.packforgeEditor = { init: init, goToLine: goToLine };
    document.addEventListener("click", function (event) {
      var button = event.target.closest && event.target.closest("[data-line]");
      var area = document.getElementById("content");
      if (button && area) goToLine(area, parseInt(button.dataset.line, 10));
    });
    document.addEventListener("htmx:load", function (event) { init(event.target); });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { init(document); });
  } else {
    init(document);
  }
})();
