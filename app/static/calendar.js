// The dashboard's calendar (FullCalendar). The feed sends wall-clock times of the sub
// account's timezone without an offset, so the calendar runs in "UTC" and shows them as sent.
//
// Laptops get week, month and list views. Phones (40rem wide or less) get a day or three-day
// time grid and a list, with Today, previous and next, and a sideways swipe between days.
// A booking shows its title first and its time and status second; its full text is its
// tooltip, its link's name, and shown whole on hover and focus (dashboard.css). Blocked time
// and connected calendars' busy time lie behind the bookings in the time grids, and are
// entries of their own in the month and list views, which draw no background.
document.addEventListener("DOMContentLoaded", function () {
  "use strict";
  var element = document.getElementById("calendar");
  if (!element || !window.FullCalendar) return;
  var phone = window.matchMedia("(max-width: 40rem)");
  var layouts = {
    laptop: {
      view: "timeGridWeek",
      views: ["timeGridWeek", "dayGridMonth", "listWeek"],
      toolbar: { left: "prev,next today", center: "title", right: "dayGridMonth,timeGridWeek,listWeek" },
    },
    phone: {
      view: "timeGridDay",
      views: ["timeGridDay", "timeGridThreeDay", "listWeek"],
      toolbar: { left: "prev,today,next", center: "title", right: "timeGridDay,timeGridThreeDay,listWeek" },
    },
  };
  var SWIPE_PX = 60;

  function layout() {
    return phone.matches ? layouts.phone : layouts.laptop;
  }

  function isTimeGrid(viewType) {
    return viewType.indexOf("timeGrid") === 0;
  }

  // Blocked and busy time: behind the bookings where there is a time grid, else an entry.
  function busyDisplay(viewType) {
    return isTimeGrid(viewType) ? "background" : "block";
  }

  function isBusy(props) {
    return props && props.kind !== "booking";
  }

  function node(tag, className, text) {
    var made = document.createElement(tag);
    if (className) made.className = className;
    if (text) made.textContent = text;
    return made;
  }

  function content(arg) {
    var event = arg.event;
    var props = event.extendedProps;
    if (event.display === "background") {
      return { domNodes: [node("div", "fc-event-title", event.title)] };
    }
    if (arg.view.type.indexOf("list") === 0) {
      // The list has a time column; the title cell says what and, for a booking, its status.
      var text = props.kind === "booking" ? event.title + " · " + props.status : event.title;
      return { domNodes: [event.url ? linkTo(event.url, text) : node("span", "", text)] };
    }
    // In a time grid an entry is as tall as it is long: under 45 minutes there is room for one
    // line of title above its time, not two (dashboard.css).
    var minutes = event.end ? (event.end - event.start) / 60000 : 0;
    var box = node("div", minutes < 45 ? "entry entry-short" : "entry");
    box.appendChild(node("span", "entry-title", event.title));
    box.appendChild(
      node("span", "entry-when", props.kind === "booking" ? props.when + " · " + props.status : props.when)
    );
    return { domNodes: [box] };
  }

  function linkTo(url, text) {
    var link = node("a", "", text);
    link.href = url;
    return link;
  }

  var current = layout();
  var calendar = new FullCalendar.Calendar(element, {
    timeZone: "UTC",
    now: element.dataset.now,
    initialView: current.view,
    headerToolbar: current.toolbar,
    views: {
      timeGridThreeDay: { type: "timeGrid", duration: { days: 3 }, buttonText: "3 days" },
    },
    buttonText: { today: "Today", month: "Month", week: "Week", day: "Day", list: "List" },
    firstDay: 1,
    nowIndicator: true,
    height: "auto",
    slotMinTime: "06:00:00",
    slotMaxTime: "22:00:00",
    scrollTime: "08:00:00",
    eventDisplay: "block",
    displayEventEnd: true,
    dayMaxEvents: 4,
    eventTimeFormat: { hour: "2-digit", minute: "2-digit", hour12: false },
    slotLabelFormat: { hour: "2-digit", minute: "2-digit", hour12: false },
    events: element.dataset.entries,
    eventDataTransform: function (raw) {
      if (isBusy(raw.extendedProps)) raw.display = busyDisplay(calendar ? calendar.view.type : current.view);
      return raw;
    },
    eventContent: content,
    // A month's day cell is named by its date alone, which axe rightly calls a mismatch once
    // the cell shows entries; unnamed, a cell is read by its content (the date comes first).
    dayCellDidMount: function (arg) {
      arg.el.removeAttribute("aria-labelledby");
    },
    eventDidMount: function (arg) {
      if (arg.event.extendedProps.detail) arg.el.title = arg.event.extendedProps.detail;
    },
    datesSet: function (arg) {
      var display = busyDisplay(arg.view.type);
      calendar.getEvents().forEach(function (event) {
        if (isBusy(event.extendedProps) && event.display !== display) event.setProp("display", display);
      });
    },
  });
  calendar.render();

  // The toolbar's chevrons are role="img" without text (their buttons are named already):
  // hidden from assistive technology whenever the toolbar is drawn, a layout change included.
  function hideIcons() {
    element.querySelectorAll(".fc-icon:not([aria-hidden])").forEach(function (icon) {
      icon.setAttribute("aria-hidden", "true");
    });
  }
  hideIcons();
  new MutationObserver(hideIcons).observe(element, { childList: true, subtree: true });

  // A phone turned sideways (or a window narrowed) gets the other layout's views, back on
  // the view it last showed in that layout.
  phone.addEventListener("change", function () {
    current.last = calendar.view.type;
    current = layout();
    calendar.setOption("headerToolbar", current.toolbar);
    var view = current.last || current.view;
    if (view !== calendar.view.type) calendar.changeView(view);
  });

  // A sideways swipe on a phone moves to the next or previous days, as the buttons do.
  var touchStart = null;
  element.addEventListener(
    "touchstart",
    function (event) {
      touchStart = event.touches.length === 1 ? event.touches[0] : null;
      if (touchStart) touchStart = { x: touchStart.clientX, y: touchStart.clientY };
    },
    { passive: true }
  );
  element.addEventListener(
    "touchend",
    function (event) {
      if (!touchStart || !phone.matches) return;
      var end = event.changedTouches[0];
      var dx = end.clientX - touchStart.x;
      var dy = end.clientY - touchStart.y;
      touchStart = null;
      if (Math.abs(dx) >= SWIPE_PX && Math.abs(dx) > 2 * Math.abs(dy)) {
        if (dx < 0) calendar.next();
        else calendar.prev();
      }
    },
    { passive: true }
  );
});
