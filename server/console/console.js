// latch web console: plain JS, no build step. The cluster view (members,
// sessions, lock queues) comes from the event stream /api/v1/cluster/events;
// the tree is read with /api/v1/children and /api/v1/nodes and kept live by
// a recursive watch on / with lock events (/api/v1/watch/?kind=recursive,locks),
// which also marks the holders another session waits for (lock-contended).
// The charts draw every member's samples from
// /api/v1/stats/events?member=ID as inline SVG; the lock history comes
// from /api/v1/locks/{path}/history. All script is in this file (the
// console runs under script-src 'self').
"use strict";

const $ = (sel) => document.querySelector(sel);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const apiPath = (p) => (p === "/" ? "" : p.slice(1)).split("/").map(encodeURIComponent).join("/");

async function getJSON(url) {
  const r = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await r.json();
  if (!r.ok) throw new Error(body.name + ": " + body.message);
  return body;
}

// ---- cluster view ----------------------------------------------------

function ms(n) {
  if (n == null) return "";
  return n >= 1000 ? (n / 1000).toFixed(1) + " s" : n + " ms";
}

function until(t) {
  if (!t) return "";
  const d = new Date(t) - Date.now();
  return d > 0 ? "in " + ms(Math.round(d)) : "due";
}

// contended: the held request nodes a conflicting request waits behind
// (lock-contended events until the hold's lock-released or lock-lost).
const contended = new Set();
let lastCluster = null;

function renderCluster(c) {
  lastCluster = c;
  $("#leader").textContent = c.leader || "none";
  $("#revision").textContent = c.revision;
  $("#member").textContent = c.member;

  $("#members tbody").innerHTML = (c.members || []).map((m) => `
    <tr data-member="${esc(m.id)}">
      <td>${esc(m.id)}</td>
      <td>${m.leader ? "<b>leader</b>" : m.voter ? "follower" : "learner"}</td>
      <td><span class="badge ${m.healthy && m.ready ? "ok" : m.healthy ? "warn" : "bad"}" title="${esc(m.error)}">${m.healthy ? (m.ready ? "healthy" : "not ready") : "unreachable"}</span></td>
      <td>${m.applied || ""}</td><td><code>${esc(m.api_addr)}</code></td><td><code>${esc(m.client_addr)}</code></td>
    </tr>`).join("");

  const sessions = c.sessions || [];
  $("#sessions tbody").innerHTML = sessions.length ? sessions.map((s) => `
    <tr data-session="${s.id}">
      <td>${s.id}</td><td>${esc(s.identity) || '<span class="empty">anonymous</span>'}</td>
      <td>${ms(s.ttl_ms)}</td><td>${ms(s.expires_in_ms)}</td>
      <td><span class="badge ${s.state === "alive" ? "ok" : s.state === "jeopardy" ? "warn" : "bad"}">${esc(s.state)}</span></td>
    </tr>`).join("") : '<tr><td colspan="5" class="empty">no sessions</td></tr>';

  const queues = c.locks || [];
  $("#locks").innerHTML = queues.length ? queues.map((q) => `
    <div class="queue" data-lock="${esc(q.path)}">
      <h3>${esc(q.path)}</h3>
      <table><thead><tr><th>#</th><th>state</th><th>mode</th><th>holder</th><th>session</th><th>token</th><th>expires</th><th>lock-delay</th></tr></thead><tbody>
      ${q.queue.map((l, i) => `
        <tr class="${l.lock_delay ? "delay" : l.granted ? "held" : "waiting"}" data-node="${esc(l.node)}" data-state="${l.lock_delay ? "lock-delay" : l.granted ? "held" : "waiting"}"${l.granted && contended.has(l.node) ? ' data-contended="true"' : ""}>
          <td>${i + 1}</td><td>${l.lock_delay ? "lock-delay until " + esc(l.delay_ends_at) : l.granted ? "held" + (contended.has(l.node) ? ' <span class="badge warn">contended</span>' : "") : "waiting"}</td>
          <td>${esc(l.mode)}</td><td>${esc(l.client_id) || '<code>' + esc((l.node || "").split("/").pop()) + "</code>"}</td>
          <td>${l.session_id}</td><td>${l.fencing_token || ""}</td><td>${l.expires_at ? until(l.expires_at) : ""}</td><td>${ms(l.lock_delay_ms)}</td>
        </tr>`).join("")}
      </tbody></table>
    </div>`).join("") : '<p class="empty" id="no-locks">no lock is held or waited for</p>';

  const elections = queues.map((q) => {
    const holder = q.queue.find((l) => l.granted && !l.lock_delay && l.mode === "exclusive");
    return holder && holder.client_id ? { path: q.path, holder, waiting: q.queue.filter((l) => !l.granted).length } : null;
  }).filter(Boolean);
  $("#elections tbody").innerHTML = elections.length ? elections.map((e) => `
    <tr data-election="${esc(e.path)}"><td>${esc(e.path)}</td><td><code>${esc(e.holder.client_id)}</code></td>
    <td>${e.holder.fencing_token}</td><td>${e.holder.session_id}</td><td>${e.waiting}</td></tr>`).join("")
    : '<tr><td colspan="5" class="empty">no election has a leader</td></tr>';
}

function connectCluster() {
  const es = new EventSource("/api/v1/cluster/events");
  es.addEventListener("cluster", (e) => {
    $("#conn").textContent = "live";
    $("#conn").className = "badge ok";
    const c = JSON.parse(e.data);
    renderCluster(c);
    syncStats(c.members);
    noteClientIDs(c.locks);
    refreshHistory();
  });
  es.onerror = () => {
    $("#conn").textContent = "reconnecting…";
    $("#conn").className = "badge bad";
    // A browser retries a dropped stream by itself, but not one that
    // answered an error (no leader reachable while one is elected).
    if (es.readyState === EventSource.CLOSED) setTimeout(connectCluster, 1000);
  };
}

// ---- tree ------------------------------------------------------------

const expanded = new Set(["/"]);
let selected = "/";

function li(path) {
  return document.querySelector(`#tree li[data-path="${CSS.escape(path)}"]`);
}

function nodeItem(path, name) {
  const el = document.createElement("li");
  el.dataset.path = path;
  el.innerHTML = `<span class="toggle">▸</span><span class="name">${esc(name)}</span><ul></ul>`;
  el.querySelector(".name").onclick = () => select(path);
  el.querySelector(".toggle").onclick = () => toggle(path);
  return el;
}

async function loadChildren(path) {
  const item = li(path);
  if (!item) return;
  const names = [];
  let after = "";
  for (;;) {
    const page = await getJSON(`/api/v1/children/${apiPath(path)}?after=${encodeURIComponent(after)}`);
    names.push(...page.children);
    if (!page.more) break;
    after = page.next_after;
  }
  const ul = item.querySelector(":scope > ul");
  const have = new Map([...ul.children].map((c) => [c.dataset.path, c]));
  const want = names.map((n) => (path === "/" ? "/" : path + "/") + n);
  for (const [p, c] of have) if (!want.includes(p)) c.remove();
  want.forEach((p, i) => {
    let c = have.get(p);
    if (!c) {
      c = nodeItem(p, p.split("/").pop());
      if (have.size) c.classList.add("fresh");
    }
    if (ul.children[i] !== c) ul.insertBefore(c, ul.children[i] || null);
  });
  item.querySelector(":scope > .toggle").textContent = names.length ? (expanded.has(path) ? "▾" : "▸") : "";
  for (const p of want) if (expanded.has(p)) loadChildren(p);
}

function toggle(path) {
  const item = li(path);
  if (expanded.has(path) && path !== "/") {
    expanded.delete(path);
    item.querySelector(":scope > ul").innerHTML = "";
    item.querySelector(":scope > .toggle").textContent = "▸";
  } else {
    expanded.add(path);
    loadChildren(path);
  }
}

async function select(path) {
  document.querySelectorAll("#tree li.selected").forEach((e) => e.classList.remove("selected"));
  const item = li(path);
  if (item) item.classList.add("selected");
  selected = path;
  $("#node-path").textContent = path;
  try {
    const n = await getJSON(`/api/v1/nodes/${apiPath(path)}`);
    if (selected !== path) return; // a later click won the race
    $("#node-data").textContent = n.data ?? (n.data_base64 ? "base64: " + n.data_base64 : "");
    const st = n.stat;
    $("#node-stat").innerHTML = Object.entries(st).map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join("");
  } catch (err) {
    if (selected !== path) return;
    $("#node-data").textContent = String(err.message);
    $("#node-stat").innerHTML = "";
  }
}

function parentOf(p) {
  const i = p.lastIndexOf("/");
  return i <= 0 ? "/" : p.slice(0, i);
}

function connectTree() {
  const root = nodeItem("/", "/");
  $("#tree").appendChild(root);
  loadChildren("/");
  select("/");
  const es = new EventSource("/api/v1/watch/?kind=recursive,locks");
  es.addEventListener("change", (e) => {
    const msg = JSON.parse(e.data);
    const dirty = new Set();
    let locks = false;
    for (const ev of msg.events) {
      if (ev.type.startsWith("lock-")) {
        if (ev.type === "lock-contended") contended.add(ev.path);
        if (ev.type === "lock-released" || ev.type === "lock-lost") contended.delete(ev.path);
        locks = true;
        continue;
      }
      if (ev.type === "created" || ev.type === "deleted") dirty.add(parentOf(ev.path));
      if (ev.type === "children-changed") dirty.add(ev.path);
      if (ev.path === selected) select(selected);
    }
    for (const p of dirty) if (expanded.has(p)) loadChildren(p);
    if (locks && lastCluster) renderCluster(lastCluster);
  });
  es.addEventListener("resync", () => {
    loadChildren("/");
    select(selected);
  });
}

// ---- charts over time ---------------------------------------------------

// The charts; each series is a field of the members' samples.
const CHARTS = [
  { id: "rates", title: "writes/s and reads/s", series: [["writes", "writes/s"], ["reads", "reads/s"]] },
  { id: "latency", title: "request latency, ms", series: [["p50_ms", "p50"], ["p99_ms", "p99"]] },
  { id: "sessions", title: "sessions", series: [["sessions", "open"]] },
  { id: "locks", title: "locks", series: [["locks_held", "held"], ["locks_waiting", "waiting"]] },
  { id: "watch", title: "watch events/s", series: [["watch_events", "events/s"]] },
  { id: "leader", title: "leader changes", series: [["leader_changes", "new terms"]] },
];
// How one second of several members adds up: rates of work each member
// does alone add; what every member sees alike (the replicated state,
// the events it applies, the terms) and latencies take the largest.
const COMBINE = { writes: "sum", reads: "sum" };
const WINDOW = 300; // seconds shown at most: the members keep 5 minutes
const MIN_SPAN = 30; // seconds shown at least (a young cluster has less)
const W = 300, H = 80; // the charts' viewBox
const SVG = "http://www.w3.org/2000/svg";

const seconds = new Map(); // second -> Map(member -> sample)
let newest = 0;
const statsStreams = new Map(); // member id -> EventSource

function addSample(s) {
  const sec = Math.round(s.t / 1000);
  if (!seconds.has(sec)) seconds.set(sec, new Map());
  seconds.get(sec).set(s.member, s);
  newest = Math.max(newest, sec);
  for (const k of seconds.keys()) if (k < newest - WINDOW - 5) seconds.delete(k);
}

function syncStats(members) {
  const ids = new Set((members || []).map((m) => m.id));
  for (const id of ids) {
    if (statsStreams.has(id)) continue;
    const es = new EventSource("/api/v1/stats/events?member=" + encodeURIComponent(id));
    es.addEventListener("history", (e) => {
      for (const s of JSON.parse(e.data).samples) addSample(s);
      scheduleDraw();
    });
    es.addEventListener("sample", (e) => {
      addSample(JSON.parse(e.data));
      scheduleDraw();
      refreshHistory(); // also while the cluster view is quiet or reconnecting
    });
    es.onerror = () => {
      // A member that cannot be reached answers an error, and a browser
      // does not retry that: the next cluster view tries again.
      if (es.readyState === EventSource.CLOSED) statsStreams.delete(id);
    };
    statsStreams.set(id, es);
  }
  for (const [id, es] of statsStreams) {
    if (!ids.has(id)) {
      es.close();
      statsStreams.delete(id);
    }
  }
}

// points returns [second, value] of one field from second from on,
// oldest first. Leader changes are the cluster's new terms in each
// second: the rise of the highest term any member reported (each member
// sees every change, at its own moment in the second, so their own
// counts would add up to several times the truth).
function points(field, from) {
  if (field === "leader_changes") {
    const terms = points("term", -Infinity);
    return terms.map(([sec, v], i) => [sec, i ? Math.max(0, v - terms[i - 1][1]) : 0]).filter(([sec]) => sec >= from);
  }
  const out = [];
  for (const sec of [...seconds.keys()].sort((a, b) => a - b)) {
    if (sec < from) continue;
    let v = null;
    for (const s of seconds.get(sec).values()) {
      const x = s[field];
      if (x == null) continue;
      v = v == null ? x : COMBINE[field] === "sum" ? v + x : Math.max(v, x);
    }
    if (v != null) out.push([sec, v]);
  }
  return out;
}

function fmt(v) {
  if (v == null) return "–";
  if (v >= 100 || Number.isInteger(v)) return String(Math.round(v));
  return v.toFixed(v >= 10 ? 1 : 2);
}

function svg(name, attrs) {
  const el = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

function buildCharts() {
  const box = $("#charts");
  for (const c of CHARTS) {
    const fig = document.createElement("figure");
    fig.className = "chart";
    fig.dataset.chart = c.id;
    const cap = document.createElement("figcaption");
    cap.innerHTML = `<b>${esc(c.title)}</b> <span class="legend"></span>`;
    const plot = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": c.title });
    for (let y = 1; y < 4; y++) plot.appendChild(svg("line", { class: "grid", x1: 0, x2: W, y1: (H * y) / 4, y2: (H * y) / 4 }));
    c.series.forEach(([field], i) => {
      plot.appendChild(svg("path", { class: "line s" + i, "data-series": field, d: "", "data-points": 0, "data-max": 0, "vector-effect": "non-scaling-stroke" }));
    });
    const axis = document.createElement("div");
    axis.className = "axis";
    axis.innerHTML = `<span class="from"></span><span class="top"></span><span>now</span>`;
    fig.append(cap, plot, axis);
    box.appendChild(fig);
  }
}

let drawPending = false;
function scheduleDraw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => {
    drawPending = false;
    drawCharts();
  });
}

// span is the seconds the charts show: what the members sent, within
// [MIN_SPAN, WINDOW].
function span() {
  const oldest = Math.min(...seconds.keys());
  return Math.min(WINDOW, Math.max(MIN_SPAN, newest - oldest));
}

function drawCharts() {
  const width = span();
  const from = newest - width;
  const ago = width >= 120 ? `−${Math.round(width / 60)} min` : `−${width} s`;
  for (const c of CHARTS) {
    const fig = document.querySelector(`#charts [data-chart="${c.id}"]`);
    const series = c.series.map(([field, label]) => ({ field, label, pts: points(field, from) }));
    let top = 0;
    for (const s of series) for (const [, v] of s.pts) top = Math.max(top, v);
    top = top > 0 ? top * 1.15 : 1;
    const legend = [];
    series.forEach((s, i) => {
      const d = s.pts.map(([sec, v], j) => `${j ? "L" : "M"}${(((sec - from) / width) * W).toFixed(1)},${(H - (v / top) * H).toFixed(1)}`).join("");
      const path = fig.querySelector(`path[data-series="${s.field}"]`);
      path.setAttribute("d", d);
      path.dataset.points = s.pts.length;
      path.dataset.max = s.pts.reduce((m, [, v]) => Math.max(m, v), 0);
      const last = s.pts.length ? s.pts[s.pts.length - 1][1] : null;
      const shown = s.field === "leader_changes" ? `${s.pts.reduce((n, [, v]) => n + v, 0)} in ${ago.slice(1)}` : fmt(last);
      legend.push(`<span class="key s${i}">${esc(s.label)} ${esc(shown)}</span>`);
    });
    fig.querySelector(".legend").innerHTML = legend.join(" ");
    fig.querySelector(".axis .top").textContent = "max " + fmt(top / 1.15);
    fig.querySelector(".axis .from").textContent = ago;
  }
}

// ---- lock history ------------------------------------------------------

let historyPath = "";
let historyBusy = false;
let historyLast = 0;
const clientIDs = new Map(); // request node -> the client_id the queue view showed

function noteClientIDs(queues) {
  for (const q of queues || []) for (const l of q.queue) if (l.client_id) clientIDs.set(l.node, l.client_id);
}

function time(t) {
  if (!t) return "";
  const d = new Date(t);
  return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

// holds pairs each end of a hold with its grant (the history is newest
// first) and returns the holds, newest first.
function holds(history) {
  const open = new Map();
  const out = [];
  for (const ev of [...history].reverse()) {
    if (ev.event === "granted") {
      const h = { grant: ev, end: null };
      open.set(ev.node, h);
      out.push(h);
    } else if (open.has(ev.node)) {
      open.get(ev.node).end = ev;
      open.delete(ev.node);
    } else {
      out.push({ grant: null, end: ev }); // its grant is older than the window
    }
  }
  return out.reverse();
}

function renderHistory(h) {
  const rows = holds(h.history);
  $("#history-status").textContent = `${rows.length} hold${rows.length === 1 ? "" : "s"} of ${h.path}${$("#history-subtree").checked ? " and below" : ""}, at revision ${h.revision}`;
  $("#history tbody").innerHTML = rows.length ? rows.map(({ grant, end }) => {
    const ev = grant || end;
    const who = clientIDs.get(ev.node) || ev.identity || "session " + ev.session;
    const how = end ? end.event + (end.by ? " by " + end.by : "") : "held";
    return `<tr class="${end ? "ended" : "held"}" data-token="${ev.token}" data-end="${esc(end ? end.event : "held")}" data-node="${esc(ev.node)}">
      <td><code>${esc(ev.path)}</code></td><td>${esc(who)}</td><td>${ev.session}</td><td>${ev.token}</td><td>${esc(ev.mode)}</td>
      <td>${grant ? time(grant.time) : ""}</td><td>${end ? time(end.time) : ""}</td><td><span class="badge ${end ? (end.event === "released" ? "ok" : "warn") : "held"}">${esc(how)}</span></td>
    </tr>`;
  }).join("") : '<tr><td colspan="8" class="empty">no grant recorded</td></tr>';
}

async function loadHistory() {
  if (!historyPath || historyBusy) return;
  historyBusy = true;
  historyLast = Date.now();
  try {
    const sub = $("#history-subtree").checked ? "&recursive=true" : "";
    renderHistory(await getJSON(`/api/v1/locks/${apiPath(historyPath)}/history?limit=200${sub}`));
  } catch (err) {
    $("#history-status").textContent = String(err.message);
    $("#history tbody").innerHTML = "";
  } finally {
    historyBusy = false;
  }
}

// refreshHistory reloads the shown history as the cluster changes, at
// most once a second.
function refreshHistory() {
  if (historyPath && Date.now() - historyLast >= 1000) loadHistory();
}

function showHistory(path) {
  historyPath = path;
  $("#history-path").value = path;
  loadHistory();
}

function connectHistory() {
  $("#history-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const p = $("#history-path").value.trim();
    if (p) showHistory(p.startsWith("/") ? p : "/" + p);
  });
  // mousedown, not click: the queue view is drawn again whenever the
  // cluster view changes (lease countdowns: several times a second), and
  // a click needs the same element under both halves of the press.
  $("#locks").addEventListener("mousedown", (e) => {
    const h = e.target.closest(".queue h3");
    if (h) showHistory(h.closest(".queue").dataset.lock);
  });
}

buildCharts();
connectHistory();
connectTree();
connectCluster();
