// Every dashboard page's script, loaded in the head before the page is drawn. It marks that
// scripts run (class "js"), so that on a phone the header folds its menu behind the Menu
// button; without scripts the menu stays open and the page still works.
document.documentElement.classList.add("js");

// A destructive button (class "danger") asks before its form is sent: its data-confirm is the
// question. Without scripts the form is sent as it is.
document.addEventListener("submit", function (event) {
  "use strict";
  var question = event.submitter && event.submitter.getAttribute("data-confirm");
  if (question && !window.confirm(question)) event.preventDefault();
});

document.addEventListener("DOMContentLoaded", function () {
  "use strict";
  var toggle = document.querySelector(".menu-toggle");
  var menu = document.getElementById("menu");
  if (!toggle || !menu) return;

  function setOpen(open) {
    toggle.setAttribute("aria-expanded", String(open));
    menu.classList.toggle("open", open);
  }

  toggle.addEventListener("click", function () {
    setOpen(toggle.getAttribute("aria-expanded") !== "true");
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && menu.classList.contains("open")) {
      setOpen(false);
      toggle.focus();
    }
  });
});
