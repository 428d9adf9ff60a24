// skyhub console: live updates without a framework.
// The page subscribes to /console/events (server-sent events, resumed by the browser with
// Last-Event-ID after a dropped connection). On a change it fetches the same page again and
// swaps every [data-live-region] whose content changed, so counts, rows and diagrams follow
// the database within a second; forms are outside those regions and keep what was typed.
(function () {
  "use strict";
  const body = document.body;
  const state = document.getElementById("live-state");
  function say(text) { if (state && state.textContent !== text) state.textContent = text; }

  // the browser's time zone for the schedule field
  document.querySelectorAll("[data-browser-tz]").forEach(function (input) {
    if (!input.value || input.value === "UTC") {
      try { input.value = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"; } catch (e) { /* keep UTC */ }
    }
  });
  // more image rows, one at a time; focus goes to the new URL field
  const more = document.getElementById("more-images");
  if (more) {
    more.addEventListener("click", function () {
      const next = document.querySelector(".image-row[hidden]");
      if (!next) { more.disabled = true; return; }
      next.hidden = false;
      const input = next.querySelector("input");
      if (input) input.focus();
      if (!document.querySelector(".image-row[hidden]")) more.disabled = true;
    });
  }
  // the compose page (publishers/compose.py): each network's counters and preview follow what is typed,
  // counted as the server counts (Bluesky: graphemes; Instagram and Threads: characters)
  const compose = document.querySelector("form[data-compose]");
  if (compose) {
    const seg = window.Intl && Intl.Segmenter ? new Intl.Segmenter() : null;
    const tag = /(?:^|\s)#[\p{L}\p{N}\p{M}_]/gu;
    const val = function (sel, root) { const el = (root || compose).querySelector(sel); return el ? el.value : ""; };
    const put = function (root, sel, text) { const el = root.querySelector(sel); if (el && el.textContent !== text) el.textContent = text; };
    const update = function () {
      compose.querySelectorAll("[data-network]").forEach(function (net) {
        const p = net.dataset.network, text = val("[data-own-caption]", net) || val("[data-shared-caption]");
        const chars = Array.from(text);
        const n = p === "bsky" && seg ? Array.from(seg.segment(text)).length : chars.length;
        const tags = (text.match(tag) || []).length, limit = +net.dataset.limit, tagLimit = +(net.dataset.tagLimit || 0);
        put(net, "[data-count]", n.toLocaleString("en-US"));
        put(net, "[data-tags]", String(tags));
        put(net, "[data-over]", n > limit || (tagLimit && tags > tagLimit) ? " · over " + net.querySelector("h3").textContent + "'s limit" : "");
        const cut = +net.dataset.cut, shown = chars.length > cut ? chars.slice(0, cut).join("") : text;
        const preview = net.querySelector("[data-preview]");
        if (preview) {
          put(preview, "[data-more]", "");
          if (preview.firstChild && preview.firstChild.nodeType === 3) preview.firstChild.textContent = shown;
          else preview.insertBefore(document.createTextNode(shown), preview.firstChild);
          let more = preview.querySelector("[data-more]");
          if (chars.length > cut && !more) { more = document.createElement("span"); more.className = "muted"; more.dataset.more = ""; preview.appendChild(more); }
          if (more) more.textContent = chars.length > cut ? " … more" : "";
        }
        const none = net.querySelector("[data-no-comment]");
        put(net, "[data-preview-comment]", (none && none.checked ? "" : val("[data-own-comment]", net) || val("[data-shared-comment]")) || "none");
        put(net, "[data-preview-alt]", val("[data-first-alt]") || "none");
        net.querySelectorAll("[data-image-line]").forEach(function (line) { line.hidden = !val("#image-1").trim(); });
      });
    };
    compose.addEventListener("input", update);
    compose.addEventListener("change", update);
  }
  // the browser's zone, for the server (checked against zoneinfo there): the person's times and calendar are in
  // it until they choose one. A calendar drawn in another zone than the browser's is drawn again, once.
  let browserZone = "";
  try { browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { /* none: UTC */ }
  if (browserZone && /^[A-Za-z0-9_+\-\/]{1,64}$/.test(browserZone)) {
    const sent = (document.cookie.match(/(?:^|; )skyhub_zone=([^;]*)/) || [])[1];
    if (sent !== encodeURIComponent(browserZone)) {
      document.cookie = "skyhub_zone=" + encodeURIComponent(browserZone) + "; path=/; max-age=31536000; samesite=strict";
    }
    const cal = document.querySelector("[data-calendar]");
    if (cal && cal.dataset.zoneFrom !== "person" && document.documentElement.dataset.zone !== browserZone &&
        !sessionStorage.getItem("skyhub-zone-redrawn")) {
      sessionStorage.setItem("skyhub-zone-redrawn", "1");
      location.reload();
    }
  }
  // the calendar: drag a post to another day (its time of day kept); the server moves it as the pick form does
  const calendar = document.querySelector("[data-calendar]");
  if (calendar) {
    const said = document.getElementById("cal-said");
    let dragged = null;
    calendar.addEventListener("dragstart", function (e) {
      const entry = e.target.closest && e.target.closest("li.cal-entry[draggable=true]");
      if (!entry) return;
      dragged = entry;
      e.dataTransfer.effectAllowed = "move";
      e.dataTransfer.setData("text/plain", entry.dataset.id);
    });
    calendar.addEventListener("dragover", function (e) {
      const day = dragged && e.target.closest && e.target.closest("li.cal-day");
      if (!day) return;
      e.preventDefault();
      calendar.querySelectorAll("li.cal-day.drop").forEach(function (d) { if (d !== day) d.classList.remove("drop"); });
      day.classList.add("drop");
    });
    calendar.addEventListener("dragend", function () {
      calendar.querySelectorAll("li.cal-day.drop").forEach(function (d) { d.classList.remove("drop"); });
    });
    calendar.addEventListener("drop", function (e) {
      const day = dragged && e.target.closest && e.target.closest("li.cal-day");
      if (!day) return;
      e.preventDefault();
      const entry = dragged;
      dragged = null;
      day.classList.remove("drop");
      const form = new URLSearchParams({ csrf: calendar.dataset.csrf, id: entry.dataset.id, revs: entry.dataset.revs,
        date: day.dataset.date, time: entry.dataset.clock, view: calendar.dataset.view, start: calendar.dataset.start });
      if (said) { said.classList.remove("error"); said.textContent = "moving " + entry.dataset.id + "…"; }
      fetch("/console/publish/calendar/move", { method: "POST", body: form, credentials: "same-origin",
        headers: { "Accept": "application/json" } })
        .then(function (r) { return r.json().catch(function () { return { ok: false, sentence: "the hub answered " + r.status }; }); })
        .then(function (answer) {
          if (answer.ok) { location.assign(location.pathname + location.search.replace(/&?done=[^&]*/, "") +
            (location.search ? "&" : "?") + "done=" + encodeURIComponent(answer.sentence)); return; }
          if (said) { said.classList.add("error"); said.textContent = answer.sentence; }
        })
        .catch(function () { if (said) { said.classList.add("error"); said.textContent = "the hub could not be reached: nothing was moved"; } });
    });
  }
  // the import form: a chosen file's text goes into the box the form sends (the console's forms are text)
  const importFile = document.getElementById("import-file");
  if (importFile) {
    importFile.addEventListener("change", function () {
      const file = importFile.files && importFile.files[0];
      if (!file) return;
      const reader = new FileReader();
      reader.onload = function () {
        document.getElementById("import-content").value = String(reader.result || "");
        document.getElementById("import-name").value = file.name;
      };
      reader.readAsText(file);
    });
  }
  const summary = document.getElementById("error-summary");
  if (summary) summary.setAttribute("tabindex", "-1"), summary.focus();

  // Times (the contract of hub/console/web.py when()): every <time datetime="ISO UTC"> is shown in the
  // zone of <html data-zone="Area/City"> when the server set one, else in the browser's; <time data-ago>
  // also says how long ago, kept fresh. The UTC text the server wrote stays in the title.
  const root = document.documentElement;
  root.classList.add("js");
  const formats = {};
  function formatter(zone) {
    const key = zone || "";
    if (!formats[key]) {
      const options = { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit",
                        hourCycle: "h23", timeZoneName: "short" };
      if (zone) options.timeZone = zone;
      try { formats[key] = new Intl.DateTimeFormat("en-GB", options); }
      catch (e) { formats[key] = zone ? formatter("") : null; }  // a zone the browser does not know: the browser's own
    }
    return formats[key];
  }
  function local(date) {
    const f = formatter(root.dataset.zone || "");
    if (!f) return null;
    const p = {};
    f.formatToParts(date).forEach(function (part) { p[part.type] = part.value; });
    return p.year + "-" + p.month + "-" + p.day + " " + p.hour + ":" + p.minute + ":" + p.second + " " + (p.timeZoneName || "");
  }
  function ago(ms) {
    let s = Math.round((Date.now() - ms) / 1000);
    const future = s < 0; s = Math.abs(s);
    const text = s < 60 ? s + " s" : s < 3600 ? Math.floor(s / 60) + " min" : s < 172800 ? Math.floor(s / 3600) + " h" : Math.floor(s / 86400) + " d";
    return future ? "in " + text : text + " ago";
  }
  function times(scope) {
    (scope || document).querySelectorAll("time[datetime]").forEach(function (el) {
      const date = new Date(el.getAttribute("datetime"));
      if (isNaN(date.getTime())) return;
      if (!el.dataset.shown) {
        el.dataset.shown = local(date) || el.textContent;
        el.title = el.dataset.shown + " (" + (el.dataset.ms || date.getTime()) + ")";
      }
      const how = el.getAttribute("data-ago");
      const text = how === "only" ? ago(date.getTime()) : how !== null ? el.dataset.shown + " (" + ago(date.getTime()) + ")" : el.dataset.shown;
      if (el.textContent !== text) el.textContent = text;
    });
  }
  times(document);
  setInterval(function () { times(document); }, 1000);
  window.skyhubTimes = times;  // for a product's own script

  // Moves that destroy (cancel, dismiss, delete): without a script the form's required "Yes" box asks;
  // with one, the box is hidden and a dialog asks instead (the box is ticked when the person says yes).
  function confirms(scope) {
    (scope || document).querySelectorAll("form[data-confirm]").forEach(function (form) {
      if (form.dataset.armed) return;
      form.dataset.armed = "1";
      const box = form.querySelector("input[name=confirm]");
      if (box) box.required = false;
      form.addEventListener("submit", function (e) {
        if (!window.confirm(form.dataset.confirm)) { e.preventDefault(); return; }
        if (box) box.checked = true;
      });
    });
  }
  confirms(document);

  if (body.dataset.live !== "on" || !window.EventSource) return;
  let inFlight = false, again = false, timer = null;

  function refresh() {
    if (inFlight) { again = true; return; }
    inFlight = true;
    fetch(location.href, { headers: { "X-Console-Live": "1" }, credentials: "same-origin", redirect: "manual" })
      .then(function (r) {
        if (r.type === "opaqueredirect" || r.status === 401 || r.status === 303) { location.assign("/console/sign-in"); return null; }
        return r.ok ? r.text() : null;
      })
      .then(function (html) {
        if (!html) return;
        const fresh = new DOMParser().parseFromString(html, "text/html");
        fresh.querySelectorAll("[data-live-region][id]").forEach(function (region) {
          const old = document.getElementById(region.id);
          if (!old || old.innerHTML === region.innerHTML) return;
          const active = document.activeElement && old.contains(document.activeElement) ? document.activeElement.id : null;
          old.innerHTML = region.innerHTML;
          times(old); confirms(old);
          old.classList.remove("updated"); void old.offsetWidth; old.classList.add("updated");
          if (active) { const el = document.getElementById(active); if (el) el.focus(); }
        });
        const seq = fresh.body && fresh.body.dataset.seq;
        if (seq) body.dataset.seq = seq;
      })
      .catch(function () { /* the stream's reconnect brings the next refresh */ })
      .finally(function () {
        inFlight = false;
        if (again) { again = false; schedule(); }
      });
  }
  function schedule() { if (!timer) timer = setTimeout(function () { timer = null; refresh(); }, 120); }

  const source = new EventSource("/console/events?since=" + encodeURIComponent(body.dataset.seq || "0"));
  source.addEventListener("open", function () { say("live"); });
  source.addEventListener("change", function (e) { body.dataset.lastEvent = e.lastEventId; schedule(); });
  source.addEventListener("signed-out", function () { source.close(); location.assign("/console/sign-in"); });
  source.addEventListener("error", function () {
    if (source.readyState === EventSource.CLOSED) { say("offline"); refresh(); }  // a 401: refresh() finds the sign-in redirect
    else say("reconnecting…");
  });
})();
