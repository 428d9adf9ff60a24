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
  const summary = document.getElementById("error-summary");
  if (summary) summary.setAttribute("tabindex", "-1"), summary.focus();

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
