// The agent tree's renderer (anywidget ES module). Python owns the state: `rows` (one per agent or
// job, pre-order), `visible` (which rows to show, after filter and collapse), `summary`, `message`,
// `transcript`, `view`. This module draws them and sends clicks back as messages
// ({action, id, text}); UI state (search text, status filter, collapse-finished, view) is written to
// the model so Python recomputes `visible`. Rows are keyed by id and only re-drawn when they change,
// so a refresh of a few rows in a big tree touches only those rows.

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) if (child !== null && child !== undefined) el.append(child);
  return el;
}

function elapsed(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const m = Math.floor(seconds / 60), s = Math.floor(seconds % 60);
  return `${m} min ${String(s).padStart(2, "0")} s`;
}

// the facts a row shows after its status, most important first; `drop` says which a narrow tree hides
// first (cost, then time, then tokens: the CSS container queries in tree.css), every one stays in the
// facts' hover title
function facts(row) {
  const out = [];
  const add = (text, drop) => { if (text) out.push({ text, drop }); };
  if (row.kind === "agent" && row.mode !== "root") add(row.mode, "");
  if (row.kind === "agent") add(`turns ${row.turns}`, "tokens");
  add(tokens(row), "tokens");
  add(elapsed(row.elapsed_s), "time");
  add(row.detail || null, "");
  for (const [k, v] of row.extra) add(`${k.replace(/_/g, " ")} ${v}`, /cost/.test(k) ? "cost" : "");
  return out;
}

function tokens(row) {
  if (row.kind !== "agent") return row.subtree_tokens ? `Σ ${row.subtree_tokens}` : "";
  const own = `${row.input_tokens} in / ${row.output_tokens} out`;
  return row.children ? `${own} · Σ ${row.subtree_tokens}` : own;
}

function render({ model, el }) {
  el.classList.add("toh-tree");
  const cache = new Map(); // id -> {key, el}
  const state = { sendText: new Map(), open: new Set() }; // open: rows whose diagnostic is expanded

  const search = h("input", { type: "search", class: "toh-search", placeholder: "search label or id",
    "aria-label": "search" });
  search.value = model.get("query");
  search.addEventListener("input", () => { model.set("query", search.value); model.save_changes(); });
  const status = h("select", { class: "toh-status-filter", "aria-label": "status filter" },
    h("option", { value: "", text: "all statuses" }),
    ...model.get("statuses").map((s) => h("option", { value: s, text: s })));
  status.value = model.get("status_filter");
  status.addEventListener("change", () => { model.set("status_filter", status.value); model.save_changes(); });
  const finished = h("input", { type: "checkbox", class: "toh-collapse-finished" });
  finished.checked = model.get("collapse_finished");
  finished.addEventListener("change", () => { model.set("collapse_finished", finished.checked); model.save_changes(); });
  const viewButton = (name, text) => h("button", { class: `toh-view toh-view-${name}`, text,
    onclick: () => { model.set("view", name); model.save_changes(); } });
  const treeTab = viewButton("tree", "Tree");
  const timelineTab = viewButton("timeline", "Timeline");
  const exportButton = h("button", { class: "toh-export", text: "Export JSON", title: "download the tree as JSON",
    onclick: () => model.send({ action: "export" }) });
  const summary = h("div", { class: "toh-summary" });
  const toolbar = h("div", { class: "toh-toolbar" }, search, status,
    h("label", { class: "toh-check" }, finished, " collapse finished"), treeTab, timelineTab, exportButton);
  const list = h("div", { class: "toh-rows", role: "tree" });
  const waterfall = makeWaterfall(model);
  const timeline = h("div", { class: "toh-timeline" }, waterfall.el, waterfall.detail);
  const chat = h("div", { class: "toh-chat" });
  const message = h("pre", { class: "toh-message" });
  const asks = h("div", { class: "toh-asks" });
  el.append(summary, asks, toolbar, list, timeline, chat, message);

  function drawAsks() {  // ACP permission requests waiting for the user (permissions="ask")
    asks.replaceChildren(...model.get("asks").map((ask) => h("div", { class: "toh-ask", "data-ask": ask.id },
      h("b", { text: `${ask.agent} asks permission: ` }), h("span", { text: `${ask.title} (${ask.kind})` }),
      actionButton("toh-allow", "Allow", `allow ${ask.title}`, () => ({ action: "allow", id: ask.id })),
      actionButton("toh-deny", "Deny", `deny ${ask.title}`, () => ({ action: "deny", id: ask.id })))));
  }

  // Action buttons. A click sends {action, id, text, request} and marks its button pending at once
  // (class toh-pending, disabled, aria-busy) until the kernel answers {type: "outcome", request, text,
  // error}; the outcome then shows next to the row's buttons (.toh-click-result). Pending states and
  // outcomes are kept by "action:id", so they survive the row being redrawn by a refresh.
  const pending = new Map(); // request -> "action:id"
  const outcomes = new Map(); // row id -> {text, error}
  let requests = 0;
  const keyOf = (msg) => `${msg.action}:${msg.id}`;
  const isPending = (key) => [...pending.values()].includes(key);

  function request(msg) {  // send one click; returns false when the same click is still pending
    const key = keyOf(msg);
    if (isPending(key)) return false;
    requests += 1;
    pending.set(requests, key);
    model.send({ ...msg, request: requests });
    markPending();
    return true;
  }

  function markPending() {
    for (const button of el.querySelectorAll("button.toh-action[data-action-key]")) {
      const on = isPending(button.dataset.actionKey);
      button.classList.toggle("toh-pending", on);
      button.disabled = on;
      if (on) button.setAttribute("aria-busy", "true"); else button.removeAttribute("aria-busy");
    }
  }

  // message(): the click's {action, id}; onclick: instead of sending message() (Send adds its text)
  function actionButton(cls, text, title, message, onclick) {
    const key = keyOf(message());
    const button = h("button", { class: `toh-action ${cls}`, text, title, "data-action-key": key,
      onclick: onclick || (() => request(message())) });
    if (isPending(key)) { button.classList.add("toh-pending"); button.disabled = true; button.setAttribute("aria-busy", "true"); }
    return button;
  }

  function outcomeNote(id) {  // the last click outcome of row `id`, shown in the row
    const note = outcomes.get(id);
    return note ? h("span", { class: `toh-click-result${note.error ? " toh-error" : ""}`, role: "status", text: note.text }) : null;
  }

  function onOutcome(msg) {
    pending.delete(msg.request);
    if (msg.id !== undefined && msg.id !== null && msg.text) {
      outcomes.set(String(msg.id), { text: msg.text, error: !!msg.error });
      for (const row of el.querySelectorAll(".toh-row")) {
        if (row.dataset.id !== String(msg.id)) continue;
        const actions = row.querySelector(".toh-actions");
        if (!actions) continue;
        actions.querySelectorAll(".toh-click-result").forEach((old) => old.remove());
        actions.append(outcomeNote(String(msg.id)));
      }
    }
    markPending();
  }

  function drawRow(row) {
    const caret = row.children
      ? h("button", { class: "toh-caret", title: "collapse / expand", "aria-label": "toggle",
          onclick: () => model.send({ action: "toggle", id: row.id }) })
      : h("span", { class: "toh-caret-space" });
    const name = h("span", { class: "toh-name", text: row.name, title: row.name });
    const ident = row.short ? h("code", { class: "toh-id", title: `${row.id} (click to copy)`, text: row.short,
      onclick: () => navigator.clipboard && navigator.clipboard.writeText(row.id).catch(() => {}) }) : null;
    const badge = h("span", { class: `toh-badge toh-${row.status}`, text: row.status });
    const marks = [];
    if (row.outcome) marks.push(h("button", { class: `toh-outcome${row.failure ? " toh-failure" : ""}`,
      text: row.outcome, title: row.diagnostic || row.outcome, "aria-expanded": String(state.open.has(row.id)),
      onclick: () => { state.open.has(row.id) ? state.open.delete(row.id) : state.open.add(row.id); drawRows(); } }));
    if (row.failures_below) marks.push(h("span", { class: "toh-failures-below",
      title: `${row.failures_below} failure${row.failures_below === 1 ? "" : "s"} below`,
      text: `\u26a0 ${row.failures_below}` }));
    const all = facts(row);
    const info = h("span", { class: "toh-facts", title: all.map((f) => f.text).join(" · ") },
      ...all.map((f, i) => h("span", { class: `toh-fact${f.drop ? ` toh-drop-${f.drop}` : ""}`,
        text: (i ? " · " : "") + f.text })));
    const actions = h("span", { class: "toh-actions" });
    if (row.can_interrupt) actions.append(actionButton("toh-interrupt", "Interrupt", `stop the current turn of ${row.id}`,
      () => ({ action: "interrupt", id: row.id })));
    if (row.can_kill) actions.append(actionButton("toh-kill", "Kill", `kill job ${row.id}`,
      () => ({ action: "kill", id: row.id })));
    if (row.has_transcript) actions.append(actionButton("toh-transcript", "Transcript", `show the conversation of ${row.id}`,
      () => ({ action: "transcript", id: row.id })));
    const line = h("div", { class: `toh-row toh-kind-${row.kind}`, "data-id": row.id, role: "treeitem",
      style: `padding-left:${row.level * 18}px` }, caret, name, ident, badge, ...marks, info, actions);
    if (row.can_send) {
      const box = h("input", { type: "text", class: "toh-send-text", placeholder: `message for ${row.short}` });
      box.value = state.sendText.get(row.id) || "";
      box.addEventListener("input", () => state.sendText.set(row.id, box.value));
      const send = () => {
        if (request({ action: "send", id: row.id, text: box.value })) { box.value = ""; state.sendText.delete(row.id); }
      };
      box.addEventListener("keydown", (e) => { if (e.key === "Enter") send(); });
      line.append(h("span", { class: "toh-send" }, box,
        actionButton("toh-send-button", "Send", `message ${row.id}`, () => ({ action: "send", id: row.id }), send)));
    }
    const note = outcomeNote(row.id);
    if (note) actions.append(note);
    if (!row.diagnostic || !state.open.has(row.id)) return line;
    // the expanded diagnostic, under its row
    return h("div", { class: "toh-node" }, line,
      h("pre", { class: "toh-diagnostic", "data-for": row.id, style: `margin-left:${row.level * 18 + 28}px`,
        text: row.diagnostic }));
  }

  function drawRows() {
    const rows = model.get("rows");
    const byId = new Map(rows.map((r) => [r.id, r]));
    const folded = new Set(model.get("folded"));  // folded by the user or by "collapse finished"
    const frag = document.createDocumentFragment();
    for (const id of model.get("visible")) {
      const row = byId.get(id);
      if (!row) continue;
      const key = JSON.stringify(row) + (folded.has(id) ? "+" : "-") + (state.open.has(id) ? "o" : "");
      let entry = cache.get(id);
      if (!entry || entry.key !== key) {
        entry = { key, el: drawRow(row) };
        entry.el.classList.toggle("toh-folded", folded.has(id));
        cache.set(id, entry);
      }
      frag.append(entry.el);
    }
    for (const id of [...cache.keys()]) if (!byId.has(id)) cache.delete(id);
    list.replaceChildren(frag);
    const hidden = model.get("hidden");
    summary.replaceChildren(h("b", { text: "agent tree" }), ` — ${model.get("summary")}`,
      hidden ? h("i", { text: ` (${hidden} more not shown)` }) : "",
      model.get("hub_closed") ? h("i", { text: " (the hub is closed)" }) : "");
  }

  function drawTimeline() { waterfall.draw(); }  // waterfall.js

  function drawChat() {
    const t = model.get("transcript");
    if (!t || !t.id) { chat.replaceChildren(); chat.style.display = "none"; return; }
    chat.style.display = "";
    const entries = t.entries.map((e) => {
      if (e.role === "turn") return h("div", { class: "toh-turn", text: e.text });
      const who = e.role === "user" && e.source && e.source !== "user" ? e.source : e.role;
      const calls = (e.calls || []).map((c) => h("details", { class: `toh-call${c.is_error ? " toh-error" : ""}` },
        h("summary", { text: `tool ${c.tool}${c.is_error ? " (error)" : ""}` }),
        h("pre", { text: c.arguments }), c.result !== null ? h("pre", { class: "toh-result", text: c.result }) : null));
      return h("div", { class: `toh-msg toh-msg-${e.role}` }, h("span", { class: "toh-role", text: who }),
        h("div", { class: "toh-text", text: e.text }), ...calls);
    });
    chat.replaceChildren(h("div", { class: "toh-chat-head" }, h("b", { text: `conversation of ${t.name} (${t.id})` }),
      h("button", { class: "toh-chat-md", text: "Markdown", title: "download as Markdown",
        onclick: () => model.send({ action: "export_transcript", id: t.id }) }),
      h("button", { class: "toh-chat-close", text: "Close", onclick: () => model.send({ action: "close_transcript" }) })),
      ...(entries.length ? entries : [h("i", { text: "(empty transcript)" })]));
  }

  function drawView() {
    const view = model.get("view");
    list.style.display = view === "tree" ? "" : "none";
    timeline.style.display = view === "timeline" ? "" : "none";
    treeTab.classList.toggle("toh-on", view === "tree");
    timelineTab.classList.toggle("toh-on", view === "timeline");
    if (view === "timeline") drawTimeline();
  }

  function drawMessage() {
    message.textContent = model.get("message");
    message.classList.toggle("toh-error", model.get("message_error"));
  }

  let scheduled = false;
  function redraw() { // coalesce several trait changes of one sync into one frame
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => { scheduled = false; drawRows(); drawView(); });
  }

  const onMsg = (msg) => {
    if (msg && msg.type === "outcome") { onOutcome(msg); return; }
    if (!msg || msg.type !== "download") return;
    const url = URL.createObjectURL(new Blob([msg.text], { type: msg.mime }));
    const a = h("a", { href: url, download: msg.filename });
    document.body.append(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  };
  const handlers = [["change:rows", redraw], ["change:visible", redraw], ["change:folded", redraw],
    ["change:summary", redraw], ["change:hidden", redraw], ["change:hub_closed", redraw],
    ["change:now", () => { if (model.get("view") === "timeline") redraw(); }], ["change:view", drawView],
    ["change:waterfall", () => { if (model.get("view") === "timeline") redraw(); }],
    ["change:waterfall_live", () => { if (model.get("view") === "timeline") redraw(); }], ["msg:custom", waterfall.onMessage],
    ["change:transcript", drawChat], ["change:asks", drawAsks], ["change:message", drawMessage], ["change:message_error", drawMessage],
    ["change:query", () => { if (search.value !== model.get("query")) search.value = model.get("query"); }],
    ["change:status_filter", () => { status.value = model.get("status_filter"); }],
    ["change:collapse_finished", () => { finished.checked = model.get("collapse_finished"); }],
    ["msg:custom", onMsg]];
  for (const [name, fn] of handlers) model.on(name, fn);
  drawRows(); drawView(); drawChat(); drawMessage(); drawAsks();
  return () => { for (const [name, fn] of handlers) model.off(name, fn); };
}

export default { render };
