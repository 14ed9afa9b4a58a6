// What every page's markup used to do with inline handlers, which the studio's
// Content-Security-Policy (script-src 'self', docs/deploy.md) no longer runs:
// - <form data-confirm="Delete x?"> asks before it submits; Cancel keeps the page;
// - <select data-fill="id_input"> copies the chosen <option>'s data-input into the
//   field with that id (try-it's "Start from an evalset case").
// Listeners sit on the document, so content that htmx swaps in is covered too.
(function () {
  "use strict";
  if (window.packforgeStudio) return;
  window.packforgeStudio = true;

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-confirm")) return;
    if (!window.confirm(form.getAttribute("data-confirm"))) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  document.addEventListener("change", function (event) {
    var select = event.target;
    if (!(select instanceof HTMLSelectElement) || !select.hasAttribute("data-fill")) return;
    var option = select.selectedOptions[0];
    var field = document.getElementById(select.getAttribute("data-fill"));
    if (option && field) field.value = option.dataset.input || "";
  });
})();
