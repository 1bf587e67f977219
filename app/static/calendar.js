// The dashboard's calendar (FullCalendar). The feed sends wall-clock times of the sub
// account's timezone without an offset, so the calendar runs in "UTC" and shows them as sent.
document.addEventListener("DOMContentLoaded", function () {
  var element = document.getElementById("calendar");
  if (!element || !window.FullCalendar) return;
  var narrow = window.matchMedia("(max-width: 40rem)").matches;
  var calendar = new FullCalendar.Calendar(element, {
    timeZone: "UTC",
    now: element.dataset.now,
    initialView: narrow ? "listWeek" : "timeGridWeek",
    headerToolbar: narrow
      ? { left: "prev,next", center: "title", right: "listWeek,dayGridMonth" }
      : { left: "prev,next today", center: "title", right: "dayGridMonth,timeGridWeek,listWeek" },
    buttonText: { today: "Today", month: "Month", week: "Week", list: "List" },
    firstDay: 1,
    nowIndicator: true,
    height: "auto",
    slotMinTime: "06:00:00",
    slotMaxTime: "22:00:00",
    scrollTime: "08:00:00",
    eventDisplay: "block",
    displayEventEnd: true,
    eventTimeFormat: { hour: "2-digit", minute: "2-digit", hour12: false },
    slotLabelFormat: { hour: "2-digit", minute: "2-digit", hour12: false },
    events: element.dataset.entries,
    // The toolbar's chevrons are role="img" without text; their buttons are named already.
    datesSet: hideIcons,
  });
  calendar.render();

  function hideIcons() {
    element.querySelectorAll(".fc-icon").forEach(function (icon) {
      icon.setAttribute("aria-hidden", "true");
    });
  }
});
