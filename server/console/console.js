// latch web console: plain JS, no build step. The cluster view (members,
// sessions, lock queues) comes from the event stream /api/v1/cluster/events;
// the tree is read with /api/v1/children and /api/v1/nodes and kept live by
// a recursive watch on / with lock events (/api/v1/watch/?kind=recursive,locks),
// which also marks the holders another session waits for (lock-contended).
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
    renderCluster(JSON.parse(e.data));
  });
  es.onerror = () => {
    $("#conn").textContent = "reconnecting…";
    $("#conn").className = "badge bad";
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
    $("#node-data").textContent = n.data ?? (n.data_base64 ? "base64: " + n.data_base64 : "");
    const st = n.stat;
    $("#node-stat").innerHTML = Object.entries(st).map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join("");
  } catch (err) {
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

connectTree();
connectCluster();
