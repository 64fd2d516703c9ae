// The dashboard page.  Every value from the registry reaches the page as a text node
// (el() below, textContent): never as HTML, so a session called <script> shows as text.
"use strict";

const TOKEN = document.querySelector('meta[name="agent-registry-token"]').content;
const SVG = "http://www.w3.org/2000/svg";
// openSession: the session whose timeline is open, and openRepository: "" for the served
// repository, else (dashboard --repos) the other repository it is read from
const state = { zone: undefined, author: "", openSession: null, openRepository: "", wikiQuery: "",
                locks: [], room: "", repos: false, repository: "" };

// -- building elements safely -----------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function $(id) { return document.getElementById(id); }

// -- talking to the API -----------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, body) {
  const options = { headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    options.method = "POST";
    options.headers["Content-Type"] = "application/json";
    options.headers["X-Agent-Registry-Token"] = TOKEN;
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (!response.ok) {
    let message = response.statusText;
    if (data && data.error) message = data.error.message;
    else if (data && data.detail) message = JSON.stringify(data.detail);
    throw new ApiError(response.status, message);
  }
  return data;
}

function notify(message, isError) {
  const box = $("notice");
  box.textContent = message;
  box.className = isError ? "error" : "";
  box.hidden = false;
}

// -- times ------------------------------------------------------------------------------

function formatTime(value) {
  if (!value) return "";
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  if (isNaN(date)) return String(value);
  const options = { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit",
                    minute: "2-digit", second: "2-digit", hour12: false };
  try {
    return new Intl.DateTimeFormat("sv-SE", { ...options, timeZone: state.zone }).format(date);
  } catch (e) {
    return new Intl.DateTimeFormat("sv-SE", options).format(date);
  }
}

function today() {
  try {
    return new Intl.DateTimeFormat("en-CA", { timeZone: state.zone, year: "numeric",
                                              month: "2-digit", day: "2-digit" }).format(new Date());
  } catch (e) {
    return new Date().toISOString().slice(0, 10);
  }
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "?";
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (seconds >= size) return Math.floor(seconds / size) + unit;
  }
  return Math.floor(seconds) + "s";
}

// -- every repository (dashboard --repos) -------------------------------------------------

// a row of another repository is read-only: its actions stay with that repository's own
// dashboard; its timeline is read from it (the API's ?repository=, a listed one only)
function ownRow(row) {
  return !state.repos || row.repository === state.repository;
}

function elsewhere(row) {
  return ownRow(row) ? "" : row.repository;
}

function isOpen(row) {
  return state.openSession === row.id && state.openRepository === elsewhere(row);
}

// the repository cell of a row, first in the row (nothing without --repos)
function repositoryCell(row) {
  if (!state.repos) return null;
  const name = row.repository.split("/").filter(Boolean).pop() || row.repository;
  return el("td", { class: "mono repository", title: row.repository }, name);
}

function readOnlyNote() {
  return el("span", { class: "muted" }, "read-only here");
}

// -- sessions ---------------------------------------------------------------------------

function sessionQuery() {
  const params = new URLSearchParams();
  const status = $("f-status").value;
  if (status) params.set("status", status);
  if (status !== "OnWorking") params.set("history", "true");
  for (const [id, name] of [["f-date", "date"], ["f-provider", "provider"], ["f-project", "project"]]) {
    if ($(id).value) params.set(name, $(id).value);
  }
  return params.toString();
}

async function loadSessions() {
  const data = await api("/api/sessions?" + sessionQuery());
  const body = $("sessions").tBodies[0];
  const rows = [];
  for (const s of data.sessions) {
    const open = isOpen(s);
    const toggle = el("button", { type: "button", class: "link", "aria-expanded": String(open) },
                      open ? "hide" : "timeline");
    toggle.addEventListener("click", () => toggleSession(s.id, elsewhere(s)));
    const actions = el("td", {}, toggle, ownRow(s) ? null : readOnlyNote());
    if (s.status === "OnWorking" && ownRow(s)) {
      const kill = el("button", { type: "button", class: "action" }, "Kill…");
      kill.addEventListener("click", () => confirmKill(s));
      actions.append(kill);
    }
    // a live session past its TTL (or whose process is gone) is no green OnWorking
    const shown = s.stale_reason ? "zombie" : s.status;
    const status = el("span", { class: "state " + shown }, shown);
    if (s.stale_reason) status.setAttribute("title", s.stale_reason);
    rows.push(el("tr", { "data-session": s.id, "data-repository": s.repository },
      repositoryCell(s),
      el("td", { class: "mono" }, s.id),
      el("td", {}, s.provider, s.ai_version ? " " + s.ai_version : ""),
      el("td", { class: "mono wrap" }, s.project),
      el("td", { class: "wrap" }, s.working_on),
      el("td", {}, status, s.stale_reason ? el("div", { class: "muted" }, s.stale_reason) : null),
      el("td", {}, formatTime(s.registered_at)),
      el("td", {}, s.status === "OnWorking" ? age(s.heartbeat_age_seconds) + " ago" : formatTime(s.finished_at)),
      el("td", {}, String((s.locks || []).length)),
      actions));
    if (open) rows.push(el("tr", { class: "detail", "data-detail": s.id },
                             el("td", { colspan: state.repos ? "10" : "9", id: "session-detail" }, "loading…")));
  }
  body.replaceChildren(...rows);
  $("sessions-empty").hidden = data.sessions.length > 0;
  $("session-count").textContent = data.total > data.sessions.length
    ? `${data.sessions.length} of ${data.total}` : `${data.total}`;
  fillChoices($("f-provider"), data.providers);
  $("projects").replaceChildren(...data.projects.map((p) => el("option", { value: p })));
  if (data.sessions.some(isOpen)) await loadSessionDetail(state.openSession, state.openRepository);
}

function fillChoices(select, values) {
  const chosen = select.value;
  const options = [el("option", { value: "" }, "any"), ...values.map((v) => el("option", { value: v }, v))];
  select.replaceChildren(...options);
  select.value = values.includes(chosen) ? chosen : "";
}

async function toggleSession(sid, repository = "") {
  const same = state.openSession === sid && state.openRepository === repository;
  state.openSession = same ? null : sid;
  state.openRepository = same ? "" : repository;
  await refresh(loadSessions);
}

async function loadSessionDetail(sid, repository) {
  const from = repository ? "?" + new URLSearchParams({ repository }) : "";
  const [detail, timeline] = await Promise.all([
    api("/api/sessions/" + encodeURIComponent(sid) + from),
    api("/api/sessions/" + encodeURIComponent(sid) + "/timeline" + from)]);
  const cell = $("session-detail");
  if (!cell) return;
  const s = detail.session;
  const fields = el("dl", { class: "fields" });
  for (const key of ["working_on", "git_branch", "host", "pid", "cmdline", "todo_past",
                     "todo_present", "todo_future", "space", "locks", "issues", "handoff"]) {
    const value = Array.isArray(s[key]) ? s[key].join(", ") : s[key];
    if (value === "" || value === null || value === undefined) continue;
    fields.append(el("dt", {}, key.replaceAll("_", " ")), el("dd", { class: "mono" }, String(value)));
  }
  const legend = el("p", { class: "muted legend" },
    "bars: session alive, paths held (pale: still open) · white tick: heartbeat · dot: diary, " +
    "handoff or update · red square: ended or lock freed");
  const parts = [el("h3", {}, "Timeline of ", el("span", { class: "mono" }, sid)),
                 drawTimeline(timeline), legend, eventList(timeline), fields,
                 // another repository's messages are read in its own dashboard (threads too)
                 repository ? el("p", { class: "muted" }, "read-only here: from " + repository)
                   : await inboxPane(sid)];
  if (detail.diary) parts.push(el("details", {}, el("summary", {}, "diary"), el("pre", { class: "diary" }, detail.diary)));
  cell.replaceChildren(...parts);
}

// -- messages: a session's inbox, and a conversation opened from it ---------------------------

// a live update redraws the pane: what the reader opened (the pane, threads) stays open
// (choice: the reader's fold or unfold, null to follow the default: unfolded while
// something waits; a new waiting message brings the default back)
const inboxView = { sid: null, choice: null, waiting: 0, threads: new Set(), draft: "" };

async function inboxPane(sid) {
  let data;
  try {
    data = await api("/api/sessions/" + encodeURIComponent(sid) + "/inbox?all=true");
  } catch (e) {
    // a session the registry cannot address (an id a peer wrote by hand) still shows its
    // timeline: the inbox says why it is missing, as text
    if (!(e instanceof ApiError)) throw e;
    return el("p", { class: "muted inbox" }, "inbox unavailable: " + e.message);
  }
  const waiting = data.messages.filter((m) => !m.acked).length;
  const items = data.messages.map((m) => {
    const open = el("button", { type: "button", class: "link" }, "thread");
    const item = el("li", { "data-message": m.id, class: m.acked ? "acked" : "unread" },
      el("span", { class: "muted" }, formatTime(m.at) + " "),
      m.importance === "high" ? el("strong", { class: "high" }, "HIGH ") : "",
      el("strong", {}, m.kind === "handoff" ? "handoff" : "message"), " from ",
      el("span", { class: "mono" }, m.from), m.sender === "person" ? " (a person)" : "",
      m.subject ? " · " + m.subject : "",
      m.ack_required ? el("span", { class: "muted" }, " · ack required") : "",
      m.acked ? el("span", { class: "muted" }, " (acknowledged) ") : " ", open,
      el("pre", { class: "message" }, m.body));
    open.addEventListener("click", () => {
      inboxView.threads.add(m.id);
      refresh(() => showThread(item, m.id));
    });
    return item;
  });
  if (inboxView.sid !== sid) Object.assign(inboxView, { sid, choice: null, waiting: 0, threads: new Set(), draft: "" });
  await Promise.all(items.filter((item) => inboxView.threads.has(item.dataset.message))
    .map((item) => showThread(item, item.dataset.message)));
  if (waiting > inboxView.waiting) inboxView.choice = null;
  inboxView.waiting = waiting;
  const unfolded = waiting > 0;
  const pane = el("details", { class: "inbox", open: (inboxView.choice ?? unfolded) ? "" : null },
    el("summary", {}, `inbox: ${waiting} waiting, ${data.messages.length} in all`),
    data.messages.length ? el("ol", {}, ...items) : el("p", { class: "muted" }, "no messages"));
  pane.addEventListener("toggle", () => {
    inboxView.choice = pane.open === unfolded ? null : pane.open;
  });
  pane.append(writeForm(sid));
  return pane;
}

// a person writes to the session (POST /api/messages: the token rule of every change)
function writeForm(sid) {
  // a live update redraws the pane: what the person is typing is kept
  const body = el("textarea", { name: "body", rows: "2", required: "", placeholder: "write to " + sid });
  body.value = inboxView.draft;
  body.addEventListener("input", () => { inboxView.draft = body.value; });
  const importance = el("select", { name: "importance" },
    ...["normal", "high", "low"].map((v) => el("option", { value: v }, v)));
  const ack = el("input", { type: "checkbox", name: "ack_required" });
  const form = el("form", { class: "write" }, body, " ",
    el("label", {}, "importance ", importance), " ",
    el("label", {}, ack, " ack required"), " ",
    el("button", { type: "submit" }, "send"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    inboxView.draft = "";
    act("/api/messages", { to: sid, body: body.value, importance: importance.value,
                           ack_required: ack.checked, by: author() },
        (r) => `sent ${r.id} to ${r.recipients.join(", ")}`);
  });
  return form;
}

async function showThread(item, mid) {
  const data = await api("/api/messages/" + encodeURIComponent(mid) + "/thread");
  const list = el("ol", { class: "thread" }, ...data.messages.map((m) => el("li", {},
    el("span", { class: "muted" }, formatTime(m.at) + " "), el("span", { class: "mono" }, m.from),
    m.acked_by.length ? el("span", { class: "muted" }, " (acknowledged by " + m.acked_by.join(", ") + ")") : null,
    el("pre", { class: "message" }, m.body))));
  item.querySelector("ol.thread")?.remove();
  item.append(list);
}

async function loadRoom() {
  if (!state.room) return;
  const data = await api("/api/rooms/" + encodeURIComponent(state.room));
  $("room").tBodies[0].replaceChildren(...data.sessions.map((s) => el("tr", { "data-session": s.id },
    el("td", { class: "mono" }, s.id), el("td", {}, s.repo), el("td", {}, s.provider),
    el("td", { class: "wrap" }, s.working_on), el("td", {}, s.present ? "present" : "away"),
    el("td", {}, formatTime(s.heartbeat_at)))));
  $("room-empty").hidden = data.sessions.length > 0;
}

function eventList(timeline) {
  const items = timeline.events.map((e) => el("li", {},
    el("span", { class: "muted" }, formatTime(e.at) + " "), el("strong", {}, e.kind), " ",
    e.paths.length ? el("span", { class: "mono" }, e.paths.join(", ") + " ") : null,
    e.by ? el("span", { class: "muted" }, `by ${e.by}${e.reason ? ": " + e.reason : ""}`) : null));
  const note = timeline.truncated ? " (only the most recent are shown)" : "";
  return el("details", {}, el("summary", {}, `${timeline.events.length} events${note}`), el("ol", {}, items));
}

// -- the timeline chart (SVG drawn here: no chart library, no network) -----------------------

function drawTimeline(timeline) {
  const lanes = timeline.lanes.filter((l) => l.intervals.length || l.marks.length);
  // from the first event to the last one, or to now while something is still open
  const times = [];
  let open = false;
  for (const lane of lanes) {
    for (const i of lane.intervals) {
      times.push(i.start);
      if (i.end === null) open = true; else times.push(i.end);
    }
    for (const m of lane.marks) times.push(m.at);
  }
  if (open || !times.length) times.push(timeline.now);
  const first = Math.min(...times), last = Math.max(...times);
  const span = Math.max(last - first, 1);
  const width = 1000, label = 230, laneHeight = 26, top = 10;
  const height = top + Math.max(lanes.length, 1) * laneHeight + 34;
  const x = (t) => label + ((t - first) / span) * (width - label - 16);
  const chart = svg("svg", { class: "timeline", viewBox: `0 0 ${width} ${height}`, role: "img" });
  chart.append(svg("title", {}, "timeline of " + timeline.session));
  const axis = svg("g", { class: "axis" });
  for (let k = 0; k <= 4; k++) {
    const t = first + (span * k) / 4;
    axis.append(svg("line", { class: "grid", x1: x(t), x2: x(t), y1: top, y2: height - 24 }));
    // within a day the date is said once, on the first tick
    const text = k > 0 && span < 86400 ? formatTime(t).slice(11) : formatTime(t);
    axis.append(svg("text", { x: x(t), y: height - 8, "text-anchor": k === 0 ? "start" : k === 4 ? "end" : "middle" },
                    text));
  }
  chart.append(axis);
  lanes.forEach((lane, index) => {
    const y = top + index * laneHeight;
    const isSession = index === 0 && lane.label === "session";
    const name = lane.label.length > 34 ? lane.label.slice(0, 33) + "…" : lane.label;
    const text = svg("text", { x: 4, y: y + 16 }, isSession ? "session" : name);
    text.append(svg("title", {}, lane.label));
    chart.append(text);
    for (const interval of lane.intervals) {
      const end = interval.end === null ? timeline.now : interval.end;
      const bar = svg("rect", { class: `bar ${isSession ? "session" : "lock"}${interval.end === null ? " open" : ""}`,
                                x: x(interval.start), y: y + 5, width: Math.max(x(end) - x(interval.start), 2),
                                height: laneHeight - 10, rx: 3 });
      bar.append(svg("title", {}, `${lane.label}: ${formatTime(interval.start)} → ${interval.end === null ? "now" : formatTime(end)}`));
      chart.append(bar);
    }
    for (const mark of lane.marks) {
      const at = x(mark.at);
      const kind = ["finished", "stopped", "killed", "lock freed"].includes(mark.kind) ? "end" : mark.kind;
      const shape = mark.kind === "heartbeat"
        ? svg("line", { class: "mark heartbeat", x1: at, x2: at, y1: y + 7, y2: y + laneHeight - 7 })
        : svg(kind === "end" ? "rect" : "circle", kind === "end"
          ? { class: "mark end", x: at - 4, y: y + 9, width: 8, height: 8 }
          : { class: "mark " + kind, cx: at, cy: y + laneHeight / 2, r: 4 });
      shape.append(svg("title", {}, `${mark.kind} at ${formatTime(mark.at)}`));
      chart.append(shape);
    }
  });
  if (!lanes.length) chart.append(svg("text", { x: label, y: top + 16 }, "no history found"));
  return chart;
}

// -- locks ------------------------------------------------------------------------------

async function loadLocks() {
  const data = await api("/api/locks");
  state.locks = data.locks;
  const rows = data.locks.map((lock) => {
    let release = readOnlyNote();
    if (ownRow(lock)) {
      release = el("button", { type: "button", class: "action" }, "Force-release…");
      release.addEventListener("click", () => confirmForceRelease(lock));
    }
    const lockState = el("span", { class: "state " + lock.state }, lock.state);
    if (lock.stale_reason) lockState.setAttribute("title", lock.stale_reason);
    return el("tr", { "data-path": lock.path, "data-repository": lock.repository },
      repositoryCell(lock),
      el("td", { class: "mono" }, lock.path),
      el("td", {}, lock.mode),
      el("td", { class: "mono" }, lock.owner),
      el("td", { class: "wrap" }, lock.working_on),
      el("td", {}, age(lock.age_seconds)),
      el("td", {}, lockState, lock.stale_reason ? el("div", { class: "muted" }, lock.stale_reason) : null),
      el("td", {}, lock.unconfirmed ? el("span", { class: "state unconfirmed" }, "unconfirmed") : "confirmed"),
      el("td", {}, release));
  });
  $("locks").tBodies[0].replaceChildren(...rows);
  $("locks-empty").hidden = rows.length > 0;
  $("lock-count").textContent = String(rows.length);
}

// -- overlaps: the conflict forecast (agent-registry overlap) -----------------------------

async function loadOverlaps() {
  let data;
  try {
    data = await api("/api/overlaps");
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    $("overlap-method").textContent = "unavailable: " + e.message;
    return;
  }
  $("overlap-method").textContent = data.note || "";
  const rows = data.overlaps.map((o) => el("tr", { "data-pair": o.sessions.join(" ") },
    el("td", {}, ...o.sides.map((side, i) => el("div", {},
      i ? "and " : "", ...side.sessions.flatMap((sid, n) => n ? [", ", sessionLink(sid)] : [sessionLink(sid)]), " ",
      el("span", { class: "muted" }, [side.branch, side.working_on].filter(Boolean).join(" · "))))),
    el("td", {}, ...o.kinds.map((kind) => el("span", { class: "state overlap " + kind }, kind))),
    el("td", {}, el("ul", { class: "paths" }, ...o.paths.map((p) => el("li", { class: "mono" },
      p.path, el("span", { class: "muted" }, " " + p.kind +
        (p.held_by.length ? ", held by " + p.held_by.join(", ") : "")))))),
    el("td", {}, formatTime(o.since))));
  $("overlaps").tBodies[0].replaceChildren(...rows);
  $("overlaps-empty").hidden = rows.length > 0;
  $("overlap-count").textContent = String(rows.length);
}

// a session named in the overlap pane: opens its row's timeline in the sessions table
function sessionLink(sid) {
  const link = el("a", { href: "#sessions-section", class: "mono session-link" }, sid);
  link.addEventListener("click", async (event) => {
    event.preventDefault();
    state.openSession = sid;
    state.openRepository = "";
    await refresh(loadSessions);
    const row = document.querySelector(`#sessions tr[data-session="${CSS.escape(sid)}"]`);
    if (row) row.scrollIntoView({ block: "center" });
  });
  return link;
}

// -- sync -------------------------------------------------------------------------------

async function loadSync() {
  const data = await api("/api/sync");
  const list = $("sync");
  const items = [];
  const labels = { enabled: "enabled", remote: "remote", ahead: "ahead (to push)", behind: "behind",
                   last_success: "last success", last_error: "last error", detail: "detail" };
  for (const [key, title] of Object.entries(labels)) {
    if (data[key] === undefined || data[key] === null || data[key] === "") continue;
    const value = key.startsWith("last_success") ? formatTime(data[key]) : String(data[key]);
    items.push(el("dt", {}, title), el("dd", {}, value));
  }
  for (const refused of data.refused || []) {
    items.push(el("dt", {}, "refused"), el("dd", { class: "mono" },
      `${refused.op || ""} ${(refused.paths || []).join(", ")} by ${refused.session || "?"}: ` +
      `${refused.reason || ""} (${formatTime(refused.at)})`));
  }
  list.replaceChildren(...items);
  $("sync-now").hidden = !data.enabled;
  $("sync-setup").hidden = data.enabled;
}

async function confirmSyncSetup() {
  const url = $("sync-url").value.trim();
  const name = $("sync-name").value.trim() || "origin";
  if (!url) return;
  const go = await confirmDialog({ title: "Share the registry through " + url,
    text: `The URL is checked with git ls-remote, added as the git remote "${name}" and the registry branch is pushed to it. ` +
          "Everyone who can read that repository can read every session, diary and wiki entry.", reason: false });
  if (go === null) return;
  await act("/api/sync/remote", { url, name }, (r) => `pushed ${r.branch} to ${r.remote.name} (${r.remote.url})` +
            (r.warning ? ` — warning: ${r.warning}` : ""));
}

// -- watchdog (agent-registry watch) ---------------------------------------------------

async function loadWatch() {
  const data = await api("/api/watch");
  $("watch-section").hidden = !data.configured;
  if (!data.configured) return;
  $("watch-running").textContent = data.running ? "running" : "not running";
  $("watch-running").className = "badge " + (data.running ? "on" : "off");
  const items = [el("dt", {}, "last pass"), el("dd", {}, formatTime(data.last_pass)),
                 el("dt", {}, "targets"), el("dd", { class: "mono" }, data.targets.join(", ")),
                 el("dt", {}, "pending"), el("dd", {}, String(data.pending.length))];
  if (data.fetch_error) items.push(el("dt", {}, "fetch error"), el("dd", {}, data.fetch_error));
  for (const sent of data.recent.slice(0, 5)) {
    items.push(el("dt", {}, `sent ${formatTime(sent.sent_at)}`), el("dd", {}, `${sent.event} ${sent.session}: ${sent.body}`));
  }
  for (const failure of data.failures.slice(0, 5)) {
    items.push(el("dt", {}, `failed ${formatTime(failure.at)}`), el("dd", { class: "mono" },
      `${failure.event} ${failure.session} (attempt ${failure.attempts}): ` +
      failure.errors.map((e) => `${e.target}: ${e.error}`).join("; ")));
  }
  $("watch").replaceChildren(...items);
}

// -- wiki -------------------------------------------------------------------------------

async function searchWiki() {
  const q = state.wikiQuery;
  const list = $("wiki-results");
  let data;
  try {
    data = await api("/api/wiki?" + new URLSearchParams({ q }));
  } catch (error) {
    $("wiki-ranker").textContent = error.message;
    list.replaceChildren();
    return;
  }
  // a newer search or refresh may have started while this one waited: the newest query wins
  if (q !== state.wikiQuery) return;
  // a refresh rebuilds the list; an entry the reader had open stays open
  const open = new Set([...list.querySelectorAll("details[open]")].map((d) => d.dataset.entry));
  const latest = data.ranker === "latest";
  const llm = data.llm_off ? ` (LLM off: ${data.llm_off})` : "";
  $("wiki-ranker").textContent = latest ? (data.results.length ? "latest entries" : "the wiki has no entries yet")
    : data.results.length ? `ranked by ${data.ranker}${llm}` : "not done before, as far as the wiki knows";
  list.replaceChildren(...data.results.map((r) => {
    const details = el("details", { "data-entry": r.id },
      el("summary", {}, el("strong", {}, r.what || r.router || r.id), " ",
         el("span", { class: "mono muted" }, r.session_id), el("span", { class: "score" }, latest ? r.date : `score ${Number(r.score).toPrecision(3)}`)),
      r.why && !latest ? el("p", { class: "muted" }, r.why) : null);
    details.addEventListener("toggle", () => { if (details.open) loadWikiEntry(details, r.id); }, { once: true });
    details.open = open.has(r.id);
    return el("li", {}, details);
  }));
}

async function loadWikiEntry(container, id) {
  let entry;
  try {
    entry = await api("/api/wiki/" + encodeURIComponent(id));
  } catch (error) {
    container.append(el("p", { class: "muted" }, error.message));
    return;
  }
  const fields = el("dl", { class: "fields" });
  const shown = ["what", "how", "solved", "files_touched", "bugs", "tools", "router", "provider",
                 "model", "date", "status", "session_id"];
  const keys = [...shown.filter((k) => k in entry),
                ...Object.keys(entry).filter((k) => !shown.includes(k) && !["body", "id"].includes(k))];
  for (const key of keys) {
    const value = entry[key];
    const empty = value === null || value === undefined || value === "" || (Array.isArray(value) && !value.length);
    if (empty || (typeof value === "object" && !Array.isArray(value))) continue;
    fields.append(el("dt", {}, key), el("dd", {}, Array.isArray(value) ? value.join(", ") : String(value)));
  }
  container.append(fields);
  if (entry.body) container.append(el("div", { class: "muted" }, "diary"), el("pre", { class: "diary" }, entry.body));
}

// -- actions, each confirmed ------------------------------------------------------------

function confirmDialog({ title, text, reason = true, force = null }) {
  const dialog = $("confirm");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-reason-label").hidden = !reason;
  $("confirm-reason").value = "";
  $("confirm-force-label").hidden = !force;
  $("confirm-force").checked = false;
  $("confirm-force-text").textContent = force || "";
  const ok = $("confirm-ok");
  const update = () => {
    ok.disabled = (reason && !$("confirm-reason").value.trim()) || (force && !$("confirm-force").checked);
  };
  $("confirm-reason").oninput = update;
  $("confirm-force").onchange = update;
  update();
  return new Promise((resolve) => {
    dialog.onclose = () => resolve(dialog.returnValue === "ok" ? $("confirm-reason").value.trim() : null);
    dialog.returnValue = "";
    dialog.showModal();
    if (reason) $("confirm-reason").focus();
  });
}

function author() {
  return $("author").value.trim() || undefined;
}

async function act(path, body, describe) {
  try {
    const result = await api(path, body);
    // 202: done locally, not confirmed by the remote (the message says why)
    if (result && result.error) notify(result.error.message, true);
    else notify(describe(result));
  } catch (error) {
    notify(error.message, true);
  }
  await refreshAll();
}

async function confirmKill(session) {
  const reason = await confirmDialog({
    title: "Kill session " + session.id,
    text: `It is working on: ${session.working_on || "(nothing said)"}. Its process gets SIGTERM ` +
          "(then SIGKILL after 5 s) if it runs on this machine; it ends as Killed and its locks are freed." });
  if (reason === null) return;
  await act("/api/sessions/" + encodeURIComponent(session.id) + "/kill", { reason, by: author() },
            (r) => `${session.id} killed (${r.signal || "logical stop"}), released ${r.released.length} lock(s)`);
}

async function confirmForceRelease(lock) {
  const fresh = lock.state === "fresh";
  const reason = await confirmDialog({
    title: "Force-release " + lock.path,
    text: fresh
      ? `This lock is FRESH: ${lock.owner} is alive and may be editing ${lock.path} right now.`
      : `This lock is stale (${lock.stale_reason}); freeing it is safe.`,
    force: fresh ? `Free it anyway, although ${lock.owner} is live` : null });
  if (reason === null) return;
  await act("/api/locks/force-release", { path: lock.path, reason, by: author(), force: fresh },
            (r) => `freed ${r.path} (held by ${r.previous.join(", ")})`);
}

async function confirmCleanup() {
  const reason = await confirmDialog({
    title: "Clean up zombie sessions",
    text: "Sessions whose process is gone or whose heartbeat is older than the TTL are marked Stop and their locks freed." });
  if (reason === null) return;
  await act("/api/cleanup", { reason, by: author() },
            (r) => r.stopped.length ? "stopped " + r.stopped.map((s) => s.session).join(", ") : "no zombie sessions");
}

async function confirmSync() {
  const go = await confirmDialog({ title: "Sync now", text: "Fetch the remote, replay this clone's pending operations on top, and push.", reason: false });
  if (go === null) return;
  await act("/api/sync", {}, (r) => r.pushed ? `synced with ${r.remote}` : `not pushed: ${r.error}`);
}

// -- live updates -----------------------------------------------------------------------

async function refresh(loader) {
  try {
    await loader();
  } catch (error) {
    notify(error.message, true);
  }
}

async function refreshAll() {
  await Promise.all([refresh(loadSessions), refresh(loadLocks), refresh(loadSync), refresh(loadWatch),
                     refresh(searchWiki), refresh(loadOverlaps)]);
}

function connect() {
  const source = new EventSource("/api/events");
  const live = $("live");
  source.addEventListener("hello", () => {
    live.textContent = "live";
    live.className = "badge on";
    refreshAll();
  });
  source.addEventListener("change", (event) => {
    const change = JSON.parse(event.data);
    const areas = new Set(change.areas);
    const loads = [];
    if (["sessions", "contexts", "messages", "acks"].some((a) => areas.has(a))) loads.push(refresh(loadSessions));
    if (areas.has("sessions") || areas.has("sync")) loads.push(refresh(loadRoom));
    if (areas.has("locks") || areas.has("sessions")) loads.push(refresh(loadLocks));
    if (areas.has("sync")) loads.push(refresh(loadSync));
    if (areas.has("wiki")) loads.push(refresh(searchWiki));
    if (["overlap", "sessions", "locks"].some((a) => areas.has(a))) loads.push(refresh(loadOverlaps));
    document.body.dataset.tip = change.tip || "";
    return Promise.all(loads);
  });
  source.onerror = () => {
    live.textContent = "reconnecting…";
    live.className = "badge off";
  };
}

async function start() {
  const health = await api("/api/health");
  state.zone = health.timezone || undefined;
  state.repos = Boolean(health.repos);
  state.repository = health.repository || "";
  for (const cell of document.querySelectorAll("th.repository")) cell.hidden = !state.repos;
  $("repo").textContent = health.repo || "";
  $("branch").textContent = health.branch ? "branch " + health.branch : "";
  $("author").value = localStorage.getItem("agent-registry-author") || "";
  $("author").placeholder = health.default_author || "your name";
  $("author").addEventListener("change", () => localStorage.setItem("agent-registry-author", $("author").value.trim()));
  $("f-date").value = today();
  for (const id of ["f-date", "f-status", "f-provider", "f-project"]) {
    $(id).addEventListener("change", () => refresh(loadSessions));
  }
  $("f-today").addEventListener("click", () => {
    $("f-date").value = today(); $("f-status").value = "OnWorking"; refresh(loadSessions);
  });
  $("f-history").addEventListener("click", () => {
    $("f-date").value = ""; $("f-status").value = ""; refresh(loadSessions);
  });
  $("cleanup").addEventListener("click", confirmCleanup);
  $("sync-now").addEventListener("click", confirmSync);
  $("sync-setup").addEventListener("submit", (event) => { event.preventDefault(); confirmSyncSetup(); });
  $("room-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.room = $("room-name").value.trim();
    refresh(loadRoom);
  });
  $("wiki-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.wikiQuery = $("wiki-q").value.trim();
    refresh(searchWiki);
  });
  connect();
  // staleness by time makes no commit: re-read the tables now and then
  setInterval(() => { refresh(loadSessions); refresh(loadLocks); refresh(loadWatch); refresh(loadOverlaps); }, 30000);
}

document.addEventListener("DOMContentLoaded", () => start().catch((error) => notify(error.message, true)));
