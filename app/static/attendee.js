// The attendee's page shows times in the browser's timezone: when the page was drawn in
// another (the one the attendee booked in) and the address names none, it is asked for again
// with the browser's as "tz", once. Without scripts the page keeps the booked timezone.
(function () {
  "use strict";
  var shown = document.body && document.body.getAttribute("data-timezone");
  var browser;
  try {
    browser = Intl.DateTimeFormat().resolvedOptions().timeZone;
  } catch (e) {
    return;
  }
  if (!shown || !browser || browser === shown) return;
  var url = new URL(window.location.href);
  if (url.searchParams.has("tz")) return;
  url.searchParams.set("tz", browser);
  window.location.replace(url.toString());
})();
