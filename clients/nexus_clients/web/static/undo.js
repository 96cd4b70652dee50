// nexus-web's undo page. Plain JS, no build step. Every string from the daemon arrives escaped by the server
// and is set with textContent (never through an HTML parser). A rewind is always shown as a dry run first;
// changes made after the call by someone else are named and need their own confirmation (force).
"use strict";

const csrf = document.querySelector('meta[name="nexus-csrf"]').content;
const $ = (id) => document.getElementById(id);
let selected = null;
let plan = null;

function say(text, level) { const m = $("message"); m.textContent = text; m.className = level || "info"; }

async function getJSON(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

async function postJSON(path, body) {
  const r = await fetch(path, {
    method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json", "x-nexus-csrf": csrf }, body: JSON.stringify(body),
  });
  const reply = await r.json();
  if (!r.ok) throw new Error(reply.error || r.statusText);
  return reply;
}

function counts(e) {
  return e.checkpoint ? `+${e.added} ~${e.changed} -${e.deleted} files, +${e.plus} -${e.minus} lines` : "no checkpoint";
}

async function load() {
  try {
    const { entries } = await getJSON("/api/undo/history");
    const list = $("undo-list");
    list.replaceChildren();
    for (const e of entries) {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.id = String(e.id);
      const when = new Date(e.time * 1000).toLocaleTimeString();
      const who = e.kind === "rescue" ? "rescue" : `${e.provider} ${e.session.slice(0, 12)}`;
      b.textContent = `${e.id}  ${when}  ${who}  ${e.tool}: ${e.summary}  (${counts(e)})`;
      b.addEventListener("click", () => open(e.id));
      li.appendChild(b);
      list.appendChild(li);
    }
    say(`${entries.length} checkpoints`);
  } catch (err) { say(`cannot load the history: ${err.message}`, "error"); }
}

async function open(id) {
  selected = id;
  plan = null;
  $("undo-plan").hidden = true;
  try {
    const { entry, diff, cut } = await getJSON(`/api/undo/show?id=${encodeURIComponent(id)}`);
    $("undo-detail").hidden = false;
    $("undo-title").textContent = `${entry.id} ${entry.tool}: ${entry.summary}`;
    $("undo-where").textContent = `${entry.workspace} · ${counts(entry)}${entry.note ? " · " + entry.note : ""}`;
    $("undo-diff").textContent = diff + (cut ? "\n(diff cut: nexusctl history show prints it whole)" : "");
  } catch (err) { say(`cannot load the diff: ${err.message}`, "error"); }
}

async function dryRun() {
  if (selected === null) return;
  try {
    const r = await postJSON("/api/undo/rewind", { id: selected, dry_run: true });
    if (!r.ok || r.changes.length === 0) { say(r.detail, r.ok ? "info" : "error"); return; }
    plan = r;
    $("undo-changes").textContent = r.changes.map(([a, p]) => `${a.padEnd(8)} ${p}`).join("\n");
    $("undo-conflicts").textContent = r.conflicts.length
      ? "Changed after the call by someone else (will be overwritten):\n" + r.conflicts.join("\n") : "";
    $("undo-plan").hidden = false;
    say(r.detail);
  } catch (err) { say(`cannot rewind: ${err.message}`, "error"); }
}

async function confirmRewind() {
  if (selected === null || plan === null) return;
  const force = plan.conflicts.length > 0;
  if (force && !window.confirm(`Overwrite ${plan.conflicts.length} file(s) changed after the call by someone else?`)) return;
  try {
    const r = await postJSON("/api/undo/rewind", { id: selected, force });
    $("undo-plan").hidden = true;
    plan = null;
    await load();  // (the list first: its "N checkpoints" must not replace what the rewind says)
    say(r.detail + (r.errors.length ? "; " + r.errors.slice(0, 3).join("; ") : ""), r.ok ? "info" : "error");
  } catch (err) { say(`not rewound: ${err.message}`, "error"); }
}

$("undo-rewind").addEventListener("click", dryRun);
$("undo-confirm").addEventListener("click", confirmRewind);
$("undo-cancel").addEventListener("click", () => { plan = null; $("undo-plan").hidden = true; });
load();
