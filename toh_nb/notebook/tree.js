// The agent tree's renderer (anywidget ES module). Python owns the state: the rows (one per agent or
// job, pre-order), `visible` (which rows to show, after filter and collapse), `summary`, `message`,
// `transcript`, `view`. This module draws them and sends clicks back as messages
// ({action, id, text}); UI state (search text, status filter, collapse-finished, view) is written to
// the model so Python recomputes `visible`.
//
// Rows arrive as deltas, not as a synced list (and so do the Timeline's settled activations:
// {type: "waterfall", set: {id: activations}, drop: [ids], full}): {type: "rows", set: [rows], drop: [ids], order: [ids] |
// null, full, now} (one child changing sends that child's row). They are kept per model (every view of
// the model shares them); a view that opens asks for all of them once ({action: "hello"}). Each row's
// DOM is built once and patched in place: a row that did not change is not touched, and a row that
// changed keeps its Send box (focus, selection and typed text survive every refresh). A running row's
// elapsed time is counted up here from its `started` time (the kernel's clock: `now` of each message).

const ACTIVE = ["running", "stopping"];
// model -> {rows: Map(id -> row), order: [ids], full, offset, views: Set, waterfall: Map(id -> activations),
// waterfallVersion}
const stores = new WeakMap();

function storeOf(model) {
  let store = stores.get(model);
  if (store) return store;
  store = { rows: new Map(), order: [], full: false, offset: 0, views: new Set(), waterfall: new Map(),
    waterfallVersion: 0 };
  stores.set(model, store);
  model.on("msg:custom", (msg) => {
    if (msg && msg.type === "waterfall") {  // the Timeline's settled agents: {set: {id: activations}, drop, full}
      if (msg.full) store.waterfall = new Map();
      for (const id of msg.drop || []) store.waterfall.delete(id);
      for (const [id, acts] of Object.entries(msg.set || {})) store.waterfall.set(id, acts);
      store.waterfallVersion += 1;
      for (const view of store.views) view();
      return;
    }
    if (!msg || msg.type !== "rows") return;
    if (msg.full) { store.rows = new Map(); store.full = true; }
    for (const id of msg.drop || []) store.rows.delete(id);
    for (const row of msg.set || []) store.rows.set(row.id, row);
    if (msg.order) store.order = msg.order;
    if (typeof msg.now === "number") store.offset = msg.now - Date.now() / 1000;
    for (const view of store.views) view();
  });
  return store;
}

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
function facts(row, seconds) {
  const out = [];
  const add = (text, drop) => { if (text) out.push({ text, drop }); };
  if (row.kind === "agent" && row.mode !== "root") add(row.mode, "");
  if (row.kind === "agent") add(`turns ${row.turns}`, "tokens");
  add(tokens(row), "tokens");
  add(elapsed(seconds === undefined ? row.elapsed_s : seconds), "time");
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
  const store = storeOf(model);
  const clock = () => Date.now() / 1000 + store.offset; // the kernel's time, now
  const rowList = () => store.order.map((id) => store.rows.get(id)).filter((r) => r);
  const elapsedOf = (row) => (ACTIVE.includes(row.status) && row.started !== null && row.elapsed_s === null
    ? Math.max(0, clock() - row.started) : row.elapsed_s);
  const entries = new Map(); // id -> {row, node, line, head: [nodes], send, time, info, open, folded}
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
  const waterfall = makeWaterfall(model, rowList, () => store);
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

  // the parts of a row before its Send box, built anew when the row changed
  function rowHead(entry, row) {
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
      onclick: () => { state.open.has(row.id) ? state.open.delete(row.id) : state.open.add(row.id); patch(entry, entry.row, true); } }));
    if (row.failures_below) marks.push(h("span", { class: "toh-failures-below",
      title: `${row.failures_below} failure${row.failures_below === 1 ? "" : "s"} below`,
      text: `\u26a0 ${row.failures_below}` }));
    const all = facts(row, elapsedOf(row));
    const info = h("span", { class: "toh-facts", title: all.map((f) => f.text).join(" · ") },
      ...all.map((f, i) => h("span", { class: `toh-fact${f.drop ? ` toh-drop-${f.drop}` : ""}${f.drop === "time" ? " toh-elapsed" : ""}`,
        text: (i ? " · " : "") + f.text })));
    entry.info = info;
    const actions = h("span", { class: "toh-actions" });
    if (row.can_interrupt) actions.append(actionButton("toh-interrupt", "Interrupt", `stop the current turn of ${row.id}`,
      () => ({ action: "interrupt", id: row.id })));
    if (row.can_kill) actions.append(actionButton("toh-kill", "Kill", `kill job ${row.id}`,
      () => ({ action: "kill", id: row.id })));
    if (row.has_transcript) actions.append(actionButton("toh-transcript", "Transcript", `show the conversation of ${row.id}`,
      () => ({ action: "transcript", id: row.id })));
    const note = outcomeNote(row.id);
    if (note) actions.append(note);
    return [caret, name, ident, badge, ...marks, info, actions].filter((n) => n);
  }

  // the Send box of a continuable child: built once, never detached while the row can send
  function sendBox(row) {
    const box = h("input", { type: "text", class: "toh-send-text", placeholder: `message for ${row.short}` });
    box.value = state.sendText.get(row.id) || "";
    box.addEventListener("input", () => state.sendText.set(row.id, box.value));
    const send = () => {
      if (request({ action: "send", id: row.id, text: box.value })) { box.value = ""; state.sendText.delete(row.id); }
    };
    box.addEventListener("keydown", (e) => { if (e.key === "Enter") send(); });
    return h("span", { class: "toh-send" }, box,
      actionButton("toh-send-button", "Send", `message ${row.id}`, () => ({ action: "send", id: row.id }), send));
  }

  function makeEntry(row) {
    const line = h("div", { class: `toh-row toh-kind-${row.kind}`, "data-id": row.id, role: "treeitem" });
    const entry = { row: null, node: h("div", { class: "toh-node" }, line), line, head: [], send: null, diag: null };
    patch(entry, row, true);
    return entry;
  }

  // bring an entry's DOM to `row`: the head is replaced, the Send box stays where it is
  function patch(entry, row, force) {
    if (!force && entry.row === row) return;
    const { line } = entry;
    entry.row = row;
    line.style.paddingLeft = `${row.level * 18}px`;
    const anchor = entry.send || null;
    for (const node of entry.head) node.remove();
    entry.head = rowHead(entry, row);
    for (const node of entry.head) line.insertBefore(node, anchor);
    if (row.can_send && !entry.send) { entry.send = sendBox(row); line.append(entry.send); }
    if (!row.can_send && entry.send) { entry.send.remove(); entry.send = null; }
    const open = !!row.diagnostic && state.open.has(row.id);
    if (entry.diag) { entry.diag.remove(); entry.diag = null; }
    if (open) {  // the expanded diagnostic, under its row
      entry.diag = h("pre", { class: "toh-diagnostic", "data-for": row.id, style: `margin-left:${row.level * 18 + 28}px`,
        text: row.diagnostic });
      entry.node.append(entry.diag);
    }
  }

  // put `want` (nodes) into `parent` in order, moving as few nodes as possible (a moved node loses focus)
  function reconcile(parent, want) {
    const wanted = new Set(want);
    let cur = parent.firstChild;
    for (const node of want) {
      while (cur && cur !== node && !wanted.has(cur)) { const next = cur.nextSibling; cur.remove(); cur = next; }
      if (cur === node) { cur = cur.nextSibling; continue; }
      parent.insertBefore(node, cur);
    }
    while (cur) { const next = cur.nextSibling; cur.remove(); cur = next; }
  }

  function drawRows() {
    const folded = new Set(model.get("folded"));  // folded by the user or by "collapse finished"
    const want = [];
    for (const id of model.get("visible")) {
      const row = store.rows.get(id);
      if (!row) continue;
      let entry = entries.get(id);
      if (!entry) { entry = makeEntry(row); entries.set(id, entry); } else patch(entry, row, false);
      entry.line.classList.toggle("toh-folded", folded.has(id));
      want.push(entry.node);
    }
    for (const id of [...entries.keys()]) if (!store.rows.has(id)) entries.delete(id);
    reconcile(list, want);
    const hidden = model.get("hidden");
    summary.replaceChildren(h("b", { text: "agent tree" }), ` — ${model.get("summary")}`,
      hidden ? h("i", { text: ` (${hidden} more not shown)` }) : "",
      model.get("hub_closed") ? h("i", { text: " (the hub is closed)" }) : "");
  }

  // once a second: the elapsed times of running rows move (only their time text is touched)
  function tick() {
    if (!el.isConnected) return;
    for (const entry of entries.values()) {
      const row = entry.row;
      if (!ACTIVE.includes(row.status) || row.elapsed_s !== null || !entry.info) continue;
      const span = entry.info.querySelector(".toh-elapsed");
      const all = facts(row, elapsedOf(row));
      const text = all.find((f) => f.drop === "time");
      if (span && text) span.textContent = (span.textContent.startsWith(" · ") ? " · " : "") + text.text;
      entry.info.title = all.map((f) => f.text).join(" · ");
    }
  }
  const ticker = setInterval(tick, 1000);

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
  const onRows = () => redraw();
  store.views.add(onRows);
  const handlers = [["change:visible", redraw], ["change:folded", redraw],
    ["change:summary", redraw], ["change:hidden", redraw], ["change:hub_closed", redraw],
    ["change:now", () => { if (model.get("view") === "timeline") redraw(); }], ["change:view", drawView],
    ["change:waterfall_live", () => { if (model.get("view") === "timeline") redraw(); }], ["msg:custom", waterfall.onMessage],
    ["change:transcript", drawChat], ["change:asks", drawAsks], ["change:message", drawMessage], ["change:message_error", drawMessage],
    ["change:query", () => { if (search.value !== model.get("query")) search.value = model.get("query"); }],
    ["change:status_filter", () => { status.value = model.get("status_filter"); }],
    ["change:collapse_finished", () => { finished.checked = model.get("collapse_finished"); }],
    ["msg:custom", onMsg]];
  for (const [name, fn] of handlers) model.on(name, fn);
  if (!store.full) model.send({ action: "hello" }); // the kernel answers with every row
  drawRows(); drawView(); drawChat(); drawMessage(); drawAsks();
  return () => {
    for (const [name, fn] of handlers) model.off(name, fn);
    store.views.delete(onRows);
    clearInterval(ticker);
  };
}

export default { render };
