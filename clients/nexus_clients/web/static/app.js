// nexus-web page. Plain JS, no build step. Every agent-written string is set with textContent (never through
// an HTML parser), already escaped by the server. Safety rules as in the TUI (docs/TUI.md): the selection
// never leaves a waiting request on its own, and a request that just appeared (or that the selection
// just moved to by itself) cannot be answered for GUARD_MS, by click or key.
"use strict";

const GUARD_MS = 600;
const URGENT_S = 10;  // from this many seconds left the countdown turns urgent and the page says what to do
const HOLD_S = 60;  // what one hold asks for; the daemon caps it at what the agent itself waits
const csrf = document.querySelector('meta[name="nexus-csrf"]').content;
const state = {
  items: new Map(), selected: null, autoAt: -Infinity, offset: 0, connected: false, signedOut: false,
  message: { about: null },
};
const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// A message about one request ("… was denied: timed out") goes when the selection moves to another one, so it
// never stands over a different, live request.
function say(text, level, about) {
  const m = $("message");
  m.textContent = text;
  m.className = level || "info";
  state.message.about = about || null;
}

function now() { return Date.now() / 1000 + state.offset; }
function pending(it) { return !it.resolved; }
function left(it) { return it.deadline - now(); }
function holdable(it) { return pending(it) && it.hold_limit != null && it.hold_limit > it.deadline + 0.5 && left(it) > 0; }
// waiting requests first (oldest first), then the decided ones: a decided row never pushes a waiting one down
function ordered() {
  return [...state.items.values()].sort((a, b) => (pending(b) - pending(a)) || a.created - b.created || (a.id < b.id ? -1 : 1));
}

function selectIfNone() {
  const cur = state.items.get(state.selected);
  if (!cur || !pending(cur)) {
    const first = ordered().find(pending);
    if (first) { state.selected = first.id; state.autoAt = performance.now(); }
    else if (!cur) state.selected = null;
  }
  if (state.message.about && state.message.about !== state.selected) say("");
}

function guardLeft(it) {
  const arrived = it._arrivedAt || 0;
  return Math.max(arrived + GUARD_MS, state.autoAt + GUARD_MS) - performance.now();
}

function answerable() {
  if (state.signedOut) return [null, "This tab is signed out: open the new link nexus-web printed."];
  if (!state.connected) return [null, "nexusd unreachable: nothing was sent."];
  const it = state.items.get(state.selected);
  if (!it) return [null, "No request selected."];
  if (!pending(it)) return [null, "Already " + it.resolved.outcome + "."];
  if (left(it) <= 0) return [null, "Too late: this request has timed out and is being denied."];
  if (guardLeft(it) > 0) return [null, "This request just arrived: read it first, then answer."];
  return [it, ""];
}

function countdown(it) {
  if (!pending(it)) return it.resolved.decision === "allow" ? "✓" : "✗";
  return Math.max(0, Math.ceil(left(it))) + "s";
}

function urgent(it) { return pending(it) && left(it) <= URGENT_S; }

let queueKey = "";
function renderQueue() {
  const q = $("queue");
  const items = ordered();
  // Rebuild rows only when something but the countdowns changed: a row replaced under the pointer
  // between mouse-down and mouse-up would swallow the click.
  const waiting = items.filter(pending).length;
  $("count").textContent = waiting ? "(" + waiting + ")" : "";
  renderEmpty(items.length);
  document.title = state.signedOut ? "signed out · nexus-web" : waiting ? "(" + waiting + ") nexus-web" : "nexus-web";
  const key = items.map((it) => it.id + (pending(it) ? "p" : "r") + (it.id === state.selected ? "s" : "")).join(",");
  if (key === queueKey) {
    for (const li of q.children) {
      const it = state.items.get(li.dataset.id);
      if (!it) continue;
      const c = li.querySelector(".countdown");
      c.textContent = countdown(it);
      c.classList.toggle("urgent", urgent(it));
    }
    return;
  }
  const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.id : null;
  queueKey = key;
  q.replaceChildren();
  for (const it of items) {
    const li = el("li", null, "queue-item tier-" + it.tier + (pending(it) ? "" : " done") + (it.id === state.selected ? " selected" : ""));
    li.dataset.id = it.id;
    li.tabIndex = 0;
    li.setAttribute("role", "option");
    li.setAttribute("aria-selected", it.id === state.selected ? "true" : "false");
    const cd = el("span", countdown(it), "countdown" + (urgent(it) ? " urgent" : ""));
    const summary = el("span", pending(it) ? it.summary : it.resolved.outcome, "summary");
    li.append(cd, el("span", it.provider + (it.subagent ? "›" + it.subagent : ""), "provider"), el("span", it.session, "session"),
      el("span", it.workspace, "workspace"), el("span", it.tool, "tool"), summary);
    if (it.lookalike) li.append(el("span", "⚠ " + it.lookalike, "lookalike"));
    li.setAttribute("aria-label", it.tool + " from " + it.provider + ", session " + it.session + ": " + (pending(it) ? it.summary : it.resolved.outcome));
    li.addEventListener("click", () => choose(it.id, false));
    li.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); e.stopPropagation(); choose(it.id, true); }
    });
    q.append(li);
    if (focused === it.id) li.focus();
  }
}

function renderEmpty(count) {
  const e = $("empty");
  e.hidden = count > 0;
  e.textContent = state.signedOut ? "Signed out: this tab shows nothing live."
    : state.connected ? "Nothing is waiting."
      : "nexusd unreachable: what waits cannot be shown or answered until it is back (agents' asks are denied meanwhile).";
  e.className = state.connected ? "empty" : "empty down";
}

// The person chose a row (click, or Enter on a focused row): no guard for the choice itself; Enter opens it.
function choose(id, open) {
  state.selected = id;
  state.autoAt = -Infinity;
  closeDialog();
  render();
  if (open) $("detail").focus();
}

// Text with a line-break opportunity after each "/" (and "=", ","): a long path wraps between its parts,
// not in the middle of a name. textContent only: each part is a text node.
function breakable(node, text) {
  node.replaceChildren();
  for (const part of String(text).split(/(?<=[\/=,])/)) {
    node.append(document.createTextNode(part), document.createElement("wbr"));
  }
  return node;
}

function fillList(id, lines) {
  const ul = $(id);
  ul.replaceChildren(...lines.map((x) => breakable(el("li"), x)));
}

function diffInto(pre, text) {
  pre.replaceChildren(...text.split("\n").map((line) => {
    const cls = line.startsWith("+++") || line.startsWith("---") ? "d-file" : line.startsWith("+") ? "d-add"
      : line.startsWith("-") ? "d-del" : line.startsWith("@@") ? "d-hunk" : "d-ctx";
    return el("span", line + "\n", cls);
  }));
}

function renderDetail() {
  const it = state.items.get(state.selected);
  const box = $("detail");
  if (!it) { box.hidden = true; closeDialog(); return; }
  box.hidden = false;
  if (box.dataset.id !== it.id) {  // a different request: reset the editors, never carry text over
    box.dataset.id = it.id;
    $("d-message").value = "";
    closeDialog();
    fillStatic(it);
  }
  const cd = $("d-countdown");
  cd.textContent = pending(it) ? countdown(it) + " left" : countdown(it);
  cd.classList.toggle("urgent", urgent(it));
  $("dlg-countdown").textContent = pending(it) ? countdown(it) : "decided";
  $("dlg-countdown").classList.toggle("urgent", urgent(it));
  const warn = $("d-urgent");
  warn.hidden = !urgent(it) || left(it) <= 0;
  if (!warn.hidden) {
    warn.textContent = Math.ceil(left(it)) + " s left before the automatic deny: " +
      (holdable(it) ? "answer now, or hold it (h) for more time." : "answer now (its agent cannot wait longer).");
  }
  $("hold-box").hidden = !pending(it);
  const hold = $("hold");
  hold.disabled = !holdable(it) || state.signedOut || !state.connected;
  $("dlg-hold").disabled = hold.disabled;
  $("hold-note").textContent = !pending(it) ? "" : holdable(it)
    ? "can be held until " + new Date((it.hold_limit - state.offset) * 1000).toLocaleTimeString() + " (what the agent waits)"
    : "cannot be held longer: the agent stops waiting at the deadline";
  $("d-outcome").hidden = pending(it);
  $("answer-box").hidden = !pending(it);
  if (!pending(it)) $("d-outcome").textContent = it.resolved.outcome;
  const [ok] = answerable();
  for (const b of document.querySelectorAll("#answer-box button[data-act], #dlg-go")) b.disabled = !ok;
  $("guard").hidden = !(pending(it) && guardLeft(it) > 0);
}

function fillStatic(it) {
  $("d-tier").textContent = "risk: " + it.tier;
  $("d-tier").className = "tier tier-" + it.tier;
  $("d-tool").textContent = it.tool;
  $("d-agent").textContent = it.provider + (it.agent_pid ? " (pid " + it.agent_pid + ")" : "") + (it.mode ? ", mode " + it.mode : "");
  $("d-session").textContent = it.session + (it.subagent ? " (subagent " + it.subagent + ")" : "");
  breakable($("d-workspace"), it.workspace + (it.cwd !== it.workspace ? " (cwd " + it.cwd + ")" : ""));
  $("d-reason").textContent = it.reason;
  $("d-reach").textContent = it.reach || "-";
  $("d-stated").textContent = it.stated ? "“" + it.stated + "” (its own words, not checked)" : "(no description given)";
  $("d-lookalike").hidden = !it.lookalike;
  $("d-lookalike").textContent = "⚠ " + it.lookalike;
  fillList("d-effects", it.effects.length ? it.effects : [it.headline]);
  fillList("d-flags", it.flags);
  $("d-hidden").hidden = !it.hidden_chars;
  $("d-diff-box").hidden = !it.diff;
  if (it.diff) {  // the change first, coloured; the raw input below it, folded
    breakable($("d-diff-path"), it.diff.path);
    $("d-diff-note").textContent = it.diff.note;
    diffInto($("d-diff"), it.diff.text);
  }
  $("d-what-box").open = !it.diff;
  $("d-what-title").textContent = it.command !== null ? "command" : it.diff ? "raw input (JSON)" : "input";
  $("d-what").textContent = it.command !== null ? it.command : it.input;
  fillList("d-always", it.suggestions.length ? it.suggestions.map((r) => "allow " + r)
    : ["nothing: no rule narrow enough to learn safely (answer once or for this session)"]);
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
  choose(ids[Math.max(0, Math.min(ids.length - 1, i < 0 ? 0 : i + step))], false);
}

async function post(path, body) {
  let r;
  try {
    r = await fetch(path, {
      method: "POST", credentials: "same-origin",
      headers: { "content-type": "application/json", "x-nexus-csrf": csrf }, body: JSON.stringify(body),
    });
  } catch (e) { return [0, { error: "nexus-web unreachable: nothing was sent" }]; }
  if (r.status === 401) signedOut();
  let data = {};
  try { data = await r.json(); } catch (e) { data = { error: "HTTP " + r.status }; }
  return [r.status, data];
}

async function send(decision, scope, extra) {
  const [it, why] = answerable();
  if (!it) { say(why, "warning"); render(); return false; }
  const body = Object.assign({ id: it.id, decision: decision, scope: scope }, extra || {});
  const message = $("d-message").value.trim();
  if (message) body.message = message;
  const [status, data] = await post("/api/answer", body);
  const label = decision + (body.abort ? " and stop the agent" : "") + " (" + scope + ")";
  if (status === 200) {
    it._answeredHere = label;
    say("Sent: " + label + ".");
    closeDialog();
  } else {
    say((status === 409 ? "" : "Answer not accepted: ") + (data.error || "HTTP " + status), status === 409 ? "warning" : "error", it.id);
  }
  render();
  return status === 200;
}

async function hold() {
  const it = state.items.get(state.selected);
  if (!it || !pending(it)) return;
  if (!holdable(it)) { say("Cannot be held longer: its agent stops waiting at the deadline. Answer now.", "warning", it.id); return; }
  const [status, data] = await post("/api/hold", { id: it.id, seconds: HOLD_S });
  if (status !== 200) say("Not held: " + (data.error || "HTTP " + status), "warning", it.id);
}

// ------------------------------------------------------------------ the dialog (one, inline, with the time left)

let dialog = null;  // {kind, id, rules, checks, ...}

function closeDialog() {
  dialog = null;
  $("dialog").hidden = true;
}

function openDialog(kind, it, title, text) {
  dialog = { kind: kind, id: it.id, checks: [], seq: 0 };
  $("dlg-title").textContent = title;
  $("dlg-text").textContent = text;
  for (const id of ["dlg-duration-box", "dlg-edit", "dlg-edit-label", "dlg-diff", "dlg-broad-box", "risk-confirm-box"]) $(id).hidden = true;
  $("dlg-broad").checked = false;
  $("risk-confirm").checked = false;
  $("dlg-rules").replaceChildren();
  $("dlg-go").textContent = "Confirm";
  $("dialog").hidden = false;
  renderDetail();
  $("dialog").scrollIntoView({ block: "nearest" });
}

function dialogRules() {
  if ($("dlg-edit").hidden || dialog.kind === "edit") return dialog.rules;
  return $("dlg-edit").value.split("\n").map((x) => x.trim()).filter(Boolean);
}

// The daemon's one narrowness check (rule_check) for the rules in the dialog: each rule with its verdict.
async function checkRules() {
  if (!dialog || dialog.kind === "edit") return;
  const kind = dialog.kind === "never" ? "deny" : "allow";
  const rules = dialogRules();
  const seq = ++dialog.seq;
  if (!rules.length) { dialog.checks = []; showChecks(); return; }
  const [status, data] = await post("/api/rules/check", { kind: kind, rules: rules });
  if (!dialog || seq !== dialog.seq) return;  // a newer edit is being checked
  dialog.checks = status === 200 ? data.results : rules.map((r) => ({ rule: r, status: "refused", reason: data.error || "not checked" }));
  showChecks();
}

function showChecks() {
  const ul = $("dlg-rules");
  ul.replaceChildren(...dialog.checks.map((c) => {
    const li = el("li", null, "check-" + c.status);
    const word = { ok: "ok", confirm: "wide: confirm", refused: "refused" }[c.status] || c.status;
    li.append(el("strong", word + ": "), el("code", c.rule), el("span", " — " + c.reason));
    return li;
  }));
  const wide = dialog.checks.filter((c) => c.status === "confirm");
  $("dlg-broad-box").hidden = !wide.length;
  if (wide.length) $("dlg-broad-text").textContent = "Allow anyway: I read why " + wide.map((c) => c.rule).join(", ") + (wide.length > 1 ? " are" : " is") + " wide";
}

function rulesReady() {
  const rules = dialogRules();
  if (!rules.length) return [null, "No rule given: nothing sent."];
  if (dialog.checks.length !== rules.length || dialog.checks.some((c, i) => c.rule !== rules[i])) return [null, "Still checking the rules: try again."];
  const bad = dialog.checks.find((c) => c.status === "refused");
  if (bad) return [null, "Refused: " + bad.rule + " — " + bad.reason];
  const wide = dialog.checks.some((c) => c.status === "confirm");
  if (wide && !$("dlg-broad").checked) return [null, "Tick the box first: a rule is wide (see why above)."];
  return [{ rules: rules, confirm_broad: wide }, ""];
}

function eod() {
  const d = new Date();
  const midnight = new Date(d.getFullYear(), d.getMonth(), d.getDate() + 1);
  return Math.max(60, Math.round((midnight - d) / 1000));
}

function editRules(kind, it) {
  const allow = kind !== "never";
  const rules = kind === "never" ? it.never_rules : it.suggestions;
  const titles = {
    session: "Allow for this session: the rules nexusd would grant",
    allow_for: "Allow for a while: the rules nexusd would grant",
    always: "Always allow: the rules nexusd would persist",
    never: "Never: the deny rules nexusd would persist",
  };
  const texts = {
    session: "Every call of session " + it.session + " that these rules match is allowed without asking, until the session ends.",
    allow_for: "Every call, in every session, that these rules match is allowed without asking until the time below.",
    always: "Persisted: every future call these rules match is allowed. Narrow or edit them (one per line).",
    never: "Persisted: every future call these rules match is denied (one per line).",
  };
  openDialog(kind, it, titles[kind], texts[kind]);
  dialog.rules = rules.slice();
  if (kind === "always" || kind === "never") {
    $("dlg-edit-label").textContent = allow ? "allow rules (one per line)" : "deny rules (one per line)";
    $("dlg-edit-label").hidden = false;
    $("dlg-edit").hidden = false;
    $("dlg-edit").value = rules.join("\n");
    $("dlg-edit").focus();
  }
  if (kind === "allow_for") $("dlg-duration-box").hidden = false;
  if (kind === "always" && it.dangerous) { $("risk-confirm-box").hidden = false; $("risk-tier").textContent = it.tier; }
  $("dlg-go").textContent = { session: "Allow for this session", allow_for: "Allow for a while", always: "Persist", never: "Persist deny" }[kind];
  checkRules();
}

function openEdit(it) {
  if (it.editable === null && it.raw_input === null) {
    say("This request cannot be edited here (hidden characters, or too large): answer it, or edit it in nexus-tui.", "warning", it.id);
    return;
  }
  openDialog("edit", it, "Edit, then allow once", "Change the call; nexusd decides the edited call again and refuses one that widens it.");
  dialog.step = "edit";
  $("dlg-edit-label").textContent = it.editable !== null ? "command" : "input (JSON)";
  $("dlg-edit-label").hidden = false;
  $("dlg-edit").hidden = false;
  $("dlg-edit").value = it.editable !== null ? it.editable : JSON.stringify(it.raw_input, null, 2);
  $("dlg-go").textContent = "Review the change";
  $("dlg-edit").focus();
}

function lineDiff(a, b) {
  const x = a.split("\n"), y = b.split("\n");
  const out = ["--- the agent's call", "+++ your edit"];
  const n = Math.max(x.length, y.length);
  for (let i = 0; i < n; i++) {
    if (x[i] === y[i]) out.push(" " + x[i]);
    else { if (i < x.length) out.push("-" + x[i]); if (i < y.length) out.push("+" + y[i]); }
  }
  return out.join("\n");
}

async function confirmDialog() {
  const [it, why] = answerable();
  if (!it || !dialog || it.id !== dialog.id) { say(why || "The dialog belongs to another request.", "warning"); return; }
  const k = dialog.kind;
  if (k === "edit") return confirmEdit(it);
  const [ready, problem] = rulesReady();
  if (!ready) { say(problem, "warning", it.id); return; }
  if (k === "never") return send("deny", "never", { rules: ready.rules });
  const extra = { rules: ready.rules, confirm_broad: ready.confirm_broad };
  if (k === "session") return send("allow", "session", extra);
  if (k === "allow_for") {
    const v = $("dlg-duration").value;
    extra.duration = v === "eod" ? eod() : Number(v);
    return send("allow", "timed", extra);
  }
  if (k === "always") {
    if (!$("risk-confirm-box").hidden && !$("risk-confirm").checked) { say("Tick the confirmation first: this request is flagged.", "warning", it.id); return; }
    if (!$("risk-confirm-box").hidden) extra.confirm_risk = true;
    return send("allow", "always", extra);
  }
}

function confirmEdit(it) {
  const original = it.editable !== null ? it.editable : JSON.stringify(it.raw_input, null, 2);
  const text = $("dlg-edit").value;
  let updated;
  if (it.editable !== null) updated = Object.assign({}, it.raw_input, { command: text });
  else {
    try { updated = JSON.parse(text); } catch (e) { say("Not JSON: " + e.message, "warning", it.id); return; }
    if (!updated || typeof updated !== "object" || Array.isArray(updated)) { say("The input must be a JSON object.", "warning", it.id); return; }
  }
  if (dialog.step === "edit") {
    if (text === original) { say("Nothing changed: use Allow once.", "warning", it.id); return; }
    dialog.step = "review";
    dialog.updated = updated;
    diffInto($("dlg-diff"), lineDiff(original, it.editable !== null ? text : JSON.stringify(updated, null, 2)));
    $("dlg-diff").hidden = false;
    $("dlg-edit").hidden = true;
    $("dlg-edit-label").hidden = true;
    $("dlg-text").textContent = "Allow once, edited as shown? nexusd decides the edited call again.";
    $("dlg-go").textContent = "Allow once, edited";
    return;
  }
  return send("allow", "once", { updated_input: dialog.updated });
}

function act(name) {
  if (name === "hold") return hold();
  const [it, why] = answerable();
  if (!it) { say(why, "warning"); render(); return; }
  if (name === "allow_once") return send("allow", "once");
  if (name === "deny") return send("deny", "once");
  if (name === "abort") return send("deny", "once", { abort: true });
  if (name === "edit") return openEdit(it);
  if (name === "always" && !it.suggestions.length) {
    say("\"Always\" refused: nexusd found no rule narrow enough to learn safely. Answer once or for this session.", "warning", it.id);
    return;
  }
  if ((name === "allow_session" || name === "allow_for") && !it.suggestions.length) {
    say("No rule to remember (nexusd offered none): answer once.", "warning", it.id);
    return;
  }
  if (name === "allow_session") return editRules("session", it);
  if (name === "allow_for" || name === "always" || name === "never") return editRules(name, it);
}

// ------------------------------------------------------------------ the live stream, and a restarted nexus-web

let es = null;
let checking = null;

function connect() {
  if (es) es.close();
  es = new EventSource("/api/events");
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
    if (dialog && dialog.id === d.id) closeDialog();
    const was = state.selected;
    render();
    if (was === d.id && !it._answeredHere) {
      // the message names the request it is about: never a banner that reads as if it were the one now shown
      if (state.selected === d.id) say("The selected request was " + d.outcome + ".", "warning", d.id);
      else say("The request you were reading (" + it.tool + " " + it.summary.slice(0, 50) + ") was " + d.outcome + "; now showing the next one.", "warning", state.selected);
    }
    if (state.selected !== was) setTimeout(render, GUARD_MS + 20);
  });
  es.addEventListener("held", (ev) => {
    const d = JSON.parse(ev.data);
    const it = state.items.get(d.id);
    if (!it || !pending(it)) return;
    state.offset = d.now - Date.now() / 1000;
    it.deadline = d.deadline;
    it.hold_limit = d.limit;
    if (d.id === state.selected) say("Held by " + d.by + ": " + Math.ceil(left(it)) + " s left.", "info", d.id);
    render();
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
    checkSession();
  };
}

// Why the stream broke: this server no longer knows the session (401: nexus-web was restarted, its sessions and
// token are new), or the server is not reachable (stopped, or the network). The browser stops reconnecting an
// EventSource that got a 401, so without this a tab would say "reconnecting…" forever.
function checkSession() {
  if (checking || state.signedOut) return;
  checking = setTimeout(async () => {
    checking = null;
    let status = 0;
    try { status = (await fetch("/api/whoami", { credentials: "same-origin", cache: "no-store" })).status; } catch (e) { status = 0; }
    if (status === 401) { signedOut(); return; }
    if (status === 0) {
      $("conn").textContent = "nexus-web unreachable (stopped?); retrying…";
      checkSession();
      return;
    }
    if (!es || es.readyState === EventSource.CLOSED) connect();
  }, 1000);
}

function signedOut() {
  if (state.signedOut) return;
  state.signedOut = true;
  state.connected = false;
  if (es) es.close();
  state.items.clear();
  state.selected = null;
  closeDialog();
  $("signed-out").hidden = false;
  $("conn").textContent = "signed out: nexus-web was restarted";
  $("conn").className = "conn down";
  say("This tab is signed out (nexus-web was restarted): open the new link it printed in its terminal.", "error");
  render();
  $("relogin-url").focus();
}

function relogin(e) {
  e.preventDefault();
  let url;
  try { url = new URL($("relogin-url").value.trim()); } catch (err) { say("That is not a link.", "warning"); return; }
  // only this server's own sign-in link: a pasted link elsewhere is not followed from here
  if (url.origin !== location.origin || url.pathname !== "/" || !url.searchParams.get("token")) {
    say("That is not this inbox's sign-in link (" + location.origin + "/?token=…).", "warning");
    return;
  }
  location.assign(url.href);
}

// ------------------------------------------------------------------ other tabs

async function getJSON(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  if (r.status === 401) signedOut();
  const data = await r.json().catch(() => ({ error: "HTTP " + r.status }));
  if (!r.ok) throw new Error(data.error || "HTTP " + r.status);
  return data;
}

function row(cells) {
  const tr = el("tr");
  for (const c of cells) tr.append(c instanceof Node ? (() => { const td = el("td"); td.append(c); return td; })() : el("td", c));
  return tr;
}

function when(t) {
  const d = new Date(t * 1000);
  return d.toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" }) + " " + d.toLocaleTimeString();
}

async function loadHistory() {
  const params = new URLSearchParams(new FormData($("audit-form")));
  try {
    const d = await getJSON("/api/audit?" + params.toString());
    $("audit").tBodies[0].replaceChildren(...d.records.reverse().map((r) => {
      let what = r.summary;
      if (r.lookalike) {
        what = el("span");
        what.append(el("span", r.summary), el("span", " ⚠ " + r.lookalike, "lookalike"));
      }
      return row([when(r.time), r.decision, r.source, r.tool, what, r.session, r.answered_by, r.reason]);
    }));
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

let checkTimer = null;
document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll(".tab")) b.addEventListener("click", () => showTab(b.dataset.tab));
  for (const b of document.querySelectorAll("#answer-box button[data-act]")) b.addEventListener("click", () => act(b.dataset.act));
  $("hold").addEventListener("click", hold);
  $("dlg-hold").addEventListener("click", hold);
  $("dlg-go").addEventListener("click", confirmDialog);
  $("dlg-cancel").addEventListener("click", () => { closeDialog(); say(""); });
  $("dlg-edit").addEventListener("input", () => {
    if (!dialog || dialog.kind === "edit") return;
    clearTimeout(checkTimer);
    checkTimer = setTimeout(checkRules, 250);
  });
  $("relogin-form").addEventListener("submit", relogin);
  $("audit-form").addEventListener("submit", (e) => { e.preventDefault(); loadHistory(); });
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "Escape" && dialog) { e.preventDefault(); closeDialog(); return; }
    const t = e.target;
    if (t && (t.tagName === "TEXTAREA" || t.tagName === "INPUT" || t.tagName === "SELECT")) return;
    if ($("tab-queue").hidden || dialog) return;
    const keys = { y: "allow_once", s: "allow_session", f: "allow_for", i: "edit", n: "deny", x: "abort", a: "always", e: "never", h: "hold" };
    if (keys[e.key]) { e.preventDefault(); act(keys[e.key]); }
    else if (e.key === "j" || e.key === "ArrowDown") { e.preventDefault(); move(1); }
    else if (e.key === "k" || e.key === "ArrowUp") { e.preventDefault(); move(-1); }
  });
  setInterval(() => { prune(); renderQueue(); renderDetail(); }, 250);
  connect();
});
