// nexus-web page. Plain JS, no build step. Every agent-written string is set with textContent (never through
// an HTML parser), already escaped by the server. Safety rules as in the TUI (docs/TUI.md): the selection
// never leaves a waiting request on its own, and a request that just appeared (or that the selection
// just moved to by itself) cannot be answered for GUARD_MS, by click or key.
"use strict";

const GUARD_MS = 600;
const csrf = document.querySelector('meta[name="nexus-csrf"]').content;
const state = { items: new Map(), selected: null, autoAt: -Infinity, offset: 0, connected: false };
const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function say(text, level) {
  const m = $("message");
  m.textContent = text;
  m.className = level || "info";
}

function now() { return Date.now() / 1000 + state.offset; }
function pending(it) { return !it.resolved; }
function ordered() { return [...state.items.values()].sort((a, b) => a.created - b.created || (a.id < b.id ? -1 : 1)); }

function selectIfNone() {
  const cur = state.items.get(state.selected);
  if (!cur || !pending(cur)) {
    const first = ordered().find(pending);
    if (first) { state.selected = first.id; state.autoAt = performance.now(); }
    else if (!cur) state.selected = null;
  }
}

function guardLeft(it) {
  const arrived = it._arrivedAt || 0;
  return Math.max(arrived + GUARD_MS, state.autoAt + GUARD_MS) - performance.now();
}

function answerable() {
  if (!state.connected) return [null, "Not connected to nexusd: nothing was sent."];
  const it = state.items.get(state.selected);
  if (!it) return [null, "No request selected."];
  if (!pending(it)) return [null, "Already " + it.resolved.outcome + "."];
  if (it.deadline - now() <= 0) return [null, "Too late: this request has timed out and is being denied."];
  if (guardLeft(it) > 0) return [null, "This request just arrived: read it first, then answer."];
  return [it, ""];
}

function countdown(it) {
  if (!pending(it)) return it.resolved.decision === "allow" ? "✓" : "✗";
  return Math.max(0, Math.ceil(it.deadline - now())) + "s";
}

let queueKey = "";
function renderQueue() {
  const q = $("queue");
  const items = ordered();
  // Rebuild rows only when something but the countdowns changed: a row replaced under the pointer
  // between mouse-down and mouse-up would swallow the click.
  const key = items.map((it) => it.id + (pending(it) ? "p" : "r") + (it.id === state.selected ? "s" : "")).join(",");
  if (key === queueKey) {
    for (const li of q.children) {
      const it = state.items.get(li.dataset.id);
      if (it) li.querySelector(".countdown").textContent = countdown(it);
    }
    return;
  }
  queueKey = key;
  q.replaceChildren();
  for (const it of items) {
    const li = el("li", null, "queue-item tier-" + it.tier + (pending(it) ? "" : " done") + (it.id === state.selected ? " selected" : ""));
    li.dataset.id = it.id;
    li.tabIndex = 0;
    li.append(el("span", countdown(it), "countdown"), el("span", it.provider + (it.subagent ? "›" + it.subagent : ""), "provider"), el("span", it.session, "session"),
      el("span", it.workspace, "workspace"), el("span", it.tool, "tool"),
      el("span", pending(it) ? it.summary : it.resolved.outcome, "summary"));
    li.addEventListener("click", () => { state.selected = it.id; state.autoAt = -Infinity; render(); });
    q.append(li);
  }
  const waiting = items.filter(pending).length;
  $("count").textContent = waiting ? "(" + waiting + ")" : "";
  $("empty").hidden = items.length > 0;
  document.title = waiting ? "(" + waiting + ") nexus-web" : "nexus-web";
}

function fillList(id, lines) {
  const ul = $(id);
  ul.replaceChildren(...lines.map((x) => el("li", x)));
}

function renderDetail() {
  const it = state.items.get(state.selected);
  const box = $("detail");
  if (!it) { box.hidden = true; return; }
  box.hidden = false;
  if (box.dataset.id !== it.id) {  // a different request: reset the editors, never carry text over
    box.dataset.id = it.id;
    $("d-message").value = "";
    $("rule-editor").hidden = true;
  }
  $("d-countdown").textContent = countdown(it);
  $("d-tier").textContent = "risk: " + it.tier + (it.requirement ? " (needs " + it.requirement + ")" : "");
  $("d-tier").className = "tier tier-" + it.tier;
  $("d-tool").textContent = it.tool;
  $("d-agent").textContent = it.provider + (it.agent_pid ? " (pid " + it.agent_pid + ")" : "") + (it.mode ? ", mode " + it.mode : "");
  $("d-session").textContent = it.session + (it.subagent ? " (subagent " + it.subagent + ")" : "");
  $("d-workspace").textContent = it.workspace + (it.cwd !== it.workspace ? " (cwd " + it.cwd + ")" : "");
  $("d-reason").textContent = it.reason;
  fillList("d-effects", it.effects.length ? it.effects : [it.headline]);
  fillList("d-flags", it.flags);
  $("d-hidden").hidden = !it.hidden_chars;
  $("d-what-title").textContent = it.command !== null ? "command" : "input";
  $("d-what").textContent = it.command !== null ? it.command : it.input;
  $("d-diff-box").hidden = !it.diff;
  if (it.diff) {
    $("d-diff-path").textContent = it.diff.path;
    $("d-diff-note").textContent = it.diff.note;
    $("d-diff").textContent = it.diff.text;
  }
  $("d-outcome").hidden = pending(it);
  $("answer-box").hidden = !pending(it);
  if (!pending(it)) $("d-outcome").textContent = it.resolved.outcome;
  const [ok] = answerable();
  for (const b of document.querySelectorAll("#answer-box button[data-act], #rules-go")) b.disabled = !ok;
  $("guard").hidden = !(pending(it) && guardLeft(it) > 0);
}

function render() { selectIfNone(); renderQueue(); renderDetail(); }

const RESOLVED_KEEP_MS = 60000;  // decided requests stay a minute, greyed, with who answered
function prune() {
  const t = performance.now();
  let changed = false;
  for (const [id, it] of state.items) {
    if (it.resolved && id !== state.selected && t - (it._resolvedAt || t) > RESOLVED_KEEP_MS) { state.items.delete(id); changed = true; }
  }
  if (changed) render();
}

function move(step) {
  const ids = ordered().map((it) => it.id);
  if (!ids.length) return;
  const i = ids.indexOf(state.selected);
  const next = ids[Math.max(0, Math.min(ids.length - 1, i < 0 ? 0 : i + step))];
  state.selected = next;
  state.autoAt = -Infinity;  // the person chose: no guard for the choice itself (the arrival guard stays)
  render();
}

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json", "x-nexus-csrf": csrf }, body: JSON.stringify(body),
  });
  let data = {};
  try { data = await r.json(); } catch (e) { data = { error: "HTTP " + r.status }; }
  return [r.status, data];
}

async function send(decision, scope, extra) {
  const [it, why] = answerable();
  if (!it) { say(why, "warning"); render(); return; }
  const body = Object.assign({ id: it.id, decision: decision, scope: scope }, extra || {});
  const message = $("d-message").value.trim();
  if (message) body.message = message;
  const [status, data] = await post("/api/answer", body);
  if (status === 200) {
    it._answeredHere = decision + " (" + scope + ")";
    say("Sent: " + decision + " (" + scope + ").");
  } else {
    say((status === 409 ? "" : "Answer not accepted: ") + (data.error || "HTTP " + status), status === 409 ? "warning" : "error");
  }
  render();
}

let editing = null;  // "always" | "never"
function openEditor(kind) {
  const [it, why] = answerable();
  if (!it) { say(why, "warning"); render(); return; }
  const rules = kind === "always" ? it.suggestions : it.never_rules;
  if (kind === "always" && !rules.length) {
    say("\"Always\" refused: nexusd found no rule narrow enough to learn safely. Answer once or for this session.", "warning");
    return;
  }
  editing = kind;
  $("rules-label").textContent = kind === "always" ? "allow rules to persist (one per line; narrow them if you like)" : "deny rules to persist (one per line)";
  $("rules-text").value = rules.join("\n");
  $("risk-confirm").checked = false;
  $("risk-confirm-box").hidden = !(kind === "always" && it.dangerous);
  $("risk-tier").textContent = it.tier;
  $("rule-editor").hidden = false;
  $("rules-text").focus();
}

function act(name) {
  if (name === "allow_once") return send("allow", "once");
  if (name === "allow_session") {
    const it = state.items.get(state.selected);
    if (it && !it.suggestions.length) { say("No rule to remember for this session (nexusd offered none): answer once.", "warning"); return; }
    return send("allow", "session");
  }
  if (name === "deny") return send("deny", "once");
  if (name === "always" || name === "never") return openEditor(name);
}

function persist() {
  const rules = $("rules-text").value.split("\n").map((x) => x.trim()).filter(Boolean);
  if (!rules.length) { say("No rule given: nothing sent.", "warning"); return; }
  const extra = { rules: rules };
  if (editing === "always") {
    if (!$("risk-confirm-box").hidden && !$("risk-confirm").checked) { say("Tick the confirmation first: this request is flagged.", "warning"); return; }
    if (!$("risk-confirm-box").hidden) extra.confirm_risk = true;
    send("allow", "always", extra);
  } else {
    send("deny", "never", extra);
  }
  $("rule-editor").hidden = true;
}

// ------------------------------------------------------------------ the live stream

function connect() {
  const es = new EventSource("/api/events");
  es.addEventListener("snapshot", (ev) => {
    const d = JSON.parse(ev.data);
    state.offset = d.now - Date.now() / 1000;
    state.connected = d.connected;
    const old = state.items;
    state.items = new Map();
    for (const it of d.items) {
      const before = old.get(it.id);
      it._arrivedAt = before ? before._arrivedAt : performance.now();
      if (it.resolved) it._resolvedAt = (before && before._resolvedAt) || performance.now();
      state.items.set(it.id, it);
    }
    if (!state.items.has(state.selected)) state.selected = null;
    $("conn").textContent = d.connected ? "connected to nexusd " + d.version : "nexusd unreachable: " + d.detail;
    $("conn").className = "conn " + (d.connected ? "up" : "down");
    render();
  });
  es.addEventListener("prompt", (ev) => {
    const d = JSON.parse(ev.data);
    state.offset = d.now - Date.now() / 1000;
    if (state.items.has(d.item.id)) return;
    d.item._arrivedAt = performance.now();
    state.items.set(d.item.id, d.item);
    render();
    setTimeout(render, GUARD_MS + 20);
  });
  es.addEventListener("resolved", (ev) => {
    const d = JSON.parse(ev.data);
    const it = state.items.get(d.id);
    if (!it) return;
    it.resolved = d;
    it._resolvedAt = performance.now();
    if (d.id === state.selected && !it._answeredHere) say("The selected request was " + d.outcome + ".", "warning");
    const was = state.selected;
    render();
    if (state.selected !== was) setTimeout(render, GUARD_MS + 20);
  });
  es.addEventListener("link", (ev) => {
    const d = JSON.parse(ev.data);
    state.connected = d.connected;
    $("conn").textContent = d.detail;
    $("conn").className = "conn down";
    render();
  });
  es.addEventListener("policy", (ev) => {
    const d = JSON.parse(ev.data);
    say(d.ok ? "Policy reloaded." : "Policy reload failed: " + d.errors.join("; ") + " (the last good policy stays).", d.ok ? "info" : "error");
  });
  es.onerror = () => {
    state.connected = false;
    $("conn").textContent = "lost nexus-web; reconnecting…";
    $("conn").className = "conn down";
    renderDetail();
  };
}

// ------------------------------------------------------------------ other tabs

async function getJSON(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  const data = await r.json().catch(() => ({ error: "HTTP " + r.status }));
  if (!r.ok) throw new Error(data.error || "HTTP " + r.status);
  return data;
}

function row(cells) {
  const tr = el("tr");
  for (const c of cells) tr.append(c instanceof Node ? (() => { const td = el("td"); td.append(c); return td; })() : el("td", c));
  return tr;
}

async function loadHistory() {
  const params = new URLSearchParams(new FormData($("audit-form")));
  try {
    const d = await getJSON("/api/audit?" + params.toString());
    $("audit").tBodies[0].replaceChildren(...d.records.reverse().map((r) => row([
      new Date(r.time * 1000).toLocaleTimeString(), r.decision, r.source, r.tool, r.summary, r.session, r.answered_by, r.reason])));
  } catch (e) { say("History: " + e.message, "error"); }
}

async function loadRules() {
  try {
    const d = await getJSON("/api/rules");
    $("rules").tBodies[0].replaceChildren(...d.rules.map((r) => {
      let cell = "";
      if (r.removable) {
        cell = el("button", "remove");
        cell.type = "button";
        cell.addEventListener("click", async () => {
          if (!confirm("Remove the " + r.kind + " rule " + r.rule + "?")) return;
          const [status, data] = await post("/api/rules/remove", { kind: r.kind, rule: r.raw });
          say(status === 200 ? "Removed " + r.kind + " rule " + r.rule + "." : "Not removed: " + (data.error || status), status === 200 ? "info" : "error");
          loadRules();
        });
      }
      return row([r.kind, r.rule + (r.warning ? "  ⚠ " + r.warning : ""), r.layer, r.origin, cell]);
    }));
    fillList("trusted", d.trusted);
  } catch (e) { say("Rules: " + e.message, "error"); }
}

async function loadGrants() {
  try {
    const d = await getJSON("/api/grants");
    $("grants").tBodies[0].replaceChildren(...d.grants.map((g) => {
      const button = el("button", "revoke");
      button.type = "button";
      button.addEventListener("click", async () => {
        if (!confirm("Revoke grant " + g.id + ": " + g.kind + " " + g.rule + "?")) return;
        const [status, data] = await post("/api/grants/revoke", { id: g.id });
        say(status === 200 ? "Revoked " + g.id + "." : "Not revoked: " + (data.error || status), status === 200 ? "info" : "error");
        loadGrants();
      });
      const scope = g.scope + (g.session ? " " + g.session : "") + (g.origin ? " (" + g.origin + ")" : "");
      const expires = g.expires ? new Date(g.expires * 1000).toLocaleString() : "-";
      return row([g.id, g.kind, g.rule, scope, g.given_by || "-", expires, String(g.uses), button]);
    }));
  } catch (e) { say("Grants: " + e.message, "error"); }
}

function facts(id, pairs) {
  const dl = $(id);
  dl.replaceChildren();
  for (const [k, v] of pairs) dl.append(el("dt", k), el("dd", v));
}

async function loadStatus() {
  try {
    const s = await getJSON("/api/status");
    facts("status", [["nexusd", s.version + " (pid " + s.pid + ", up " + Math.round(s.uptime) + " s)"], ["pending", s.pending],
      ["connections", Object.entries(s.connections).map(([k, v]) => k + " " + v).join(", ")],
      ["locked", s.locked || "no"], ["audit", s.audit_error ? "ERROR: " + s.audit_error + " (" + s.audit_unrecorded + " unrecorded)" : "ok"],
      ["policy errors", s.policy_errors.join("; ") || "none"]]);
    $("sessions").tBodies[0].replaceChildren(...Object.entries(s.sessions).map(([k, v]) => row([k, v])));
    $("sources").tBodies[0].replaceChildren(...s.policy.map((p) => row([p.layer, p.path, p.loaded ? "loaded" : "not loaded", p.error])));
    const sb = s.sandbox;
    facts("sandbox", sb ? [["available", sb.available ? "yes (" + sb.backend + ")" : "no"], ["platform", sb.platform], ["reason", sb.reason || "-"],
      ...Object.entries(sb.checks)] : [["probe", "not run"]]);
  } catch (e) { say("Status: " + e.message, "error"); }
}

function showTab(name) {
  for (const b of document.querySelectorAll(".tab")) b.classList.toggle("active", b.dataset.tab === name);
  for (const p of document.querySelectorAll(".tabpane")) p.hidden = p.id !== "tab-" + name;
  if (name === "history") loadHistory();
  if (name === "rules") loadRules();
  if (name === "grants") loadGrants();
  if (name === "status") loadStatus();
}

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll(".tab")) b.addEventListener("click", () => showTab(b.dataset.tab));
  for (const b of document.querySelectorAll("#answer-box button[data-act]")) b.addEventListener("click", () => act(b.dataset.act));
  $("rules-go").addEventListener("click", persist);
  $("rules-cancel").addEventListener("click", () => { $("rule-editor").hidden = true; });
  $("audit-form").addEventListener("submit", (e) => { e.preventDefault(); loadHistory(); });
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.tagName === "TEXTAREA" || t.tagName === "INPUT" || t.tagName === "SELECT")) return;
    if ($("tab-queue").hidden || !$("rule-editor").hidden) return;
    const keys = { y: "allow_once", s: "allow_session", n: "deny", a: "always", e: "never" };
    if (keys[e.key]) { e.preventDefault(); act(keys[e.key]); }
    else if (e.key === "j" || e.key === "ArrowDown") { e.preventDefault(); move(1); }
    else if (e.key === "k" || e.key === "ArrowUp") { e.preventDefault(); move(-1); }
  });
  setInterval(() => { prune(); renderQueue(); renderDetail(); }, 250);
  connect();
});
