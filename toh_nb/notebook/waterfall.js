// The Timeline view as a waterfall (part of the tree's ES module: widget.py puts this file before
// tree.js, whose `h` and `elapsed` helpers it uses). The kernel sends the activations of agents not running
// as deltas (tree.js keeps them per model: `store.waterfall`, a Map) and syncs `waterfall_live` (running
// ones): {agent id: [activation]}, an activation being one turn {turn, start,
// end, reason, input_tokens, output_tokens, spans}, a span one model or tool call [kind, name, start, end,
// input_tokens, output_tokens, is_error] (times to the millisecond). A span's messages are asked for when it is clicked (the `span`
// action; the kernel answers {type: "span", id, turn, start, messages}). Every
// shown row gets a lane under a time axis with ticks: an agent's lane has a thin line for its lifetime
// and one bar per activation (so the idle gaps between a continuable child's turns show), with its
// model calls (upper half) and tool calls (lower half) drawn inside the bar; a job's lane is one bar.
// A click on a span shows its messages below the waterfall, a click on a bar the turn's calls.

const WF_TARGET_TICKS = 8;
// tick steps in seconds: 1-2-5 under ten seconds, then steps a clock reads
const WF_STEPS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600,
  900, 1800, 3600, 7200, 14400, 28800, 86400];

function wfStep(span) {  // the smallest step that gives at most WF_TARGET_TICKS intervals
  for (const step of WF_STEPS) if (span / step <= WF_TARGET_TICKS) return step;
  return Math.ceil(span / WF_TARGET_TICKS / 86400) * 86400;
}

function wfTickLabel(t, step) {  // seconds since the axis start, as the axis prints them
  if (t === 0) return "0 s";
  if (t < 60 || step < 1) {
    const digits = step >= 1 ? 0 : Math.min(3, Math.ceil(-Math.log10(step) - 1e-9));
    return `${t.toFixed(digits)} s`;
  }
  if (t < 3600) {
    const m = Math.floor(t / 60), s = Math.round(t - m * 60);
    return s ? `${m} min ${s} s` : `${m} min`;
  }
  const hours = Math.floor(t / 3600), m = Math.round((t - hours * 3600) / 60);
  return m ? `${hours} h ${m} min` : `${hours} h`;
}

function wfTicks(span) {  // [{t, label}] from 0 to span
  const step = wfStep(span);
  const out = [];
  for (let i = 0; i * step <= span + step * 1e-9; i++) out.push({ t: i * step, label: wfTickLabel(i * step, step) });
  return out;
}

function wfTokens(item) {
  return item.input_tokens || item.output_tokens ? `${item.input_tokens} in / ${item.output_tokens} out` : "";
}

function wfClock(epoch) {
  return new Date(epoch * 1000).toLocaleTimeString([], { hour12: false });
}

function wfState(activation) {  // the bar's class: how the turn ended (or that it runs)
  if (activation.end === null) return "running";
  const reason = activation.reason || "completed";
  if (reason === "completed") return "completed";
  if (reason === "aborted" || reason === "interrupted") return "aborted";
  return "failed";
}

function wfSpanTitle(span, now) {
  const end = span.end !== null ? span.end : now;
  const what = span.kind === "model" ? "model call" : `tool ${span.name}`;
  return [what, elapsed(Math.max(0, end - span.start)) + (span.end === null ? " (running)" : ""), wfTokens(span),
    span.is_error ? "error" : ""].filter(Boolean).join(" · ");
}

function wfActTitle(name, activation, now) {
  const end = activation.end !== null ? activation.end : now;
  return [`${name} turn ${activation.turn}`, elapsed(Math.max(0, end - activation.start)),
    activation.end === null ? "running" : activation.reason || "completed", wfTokens(activation),
    `${activation.spans.length} call${activation.spans.length === 1 ? "" : "s"}`].filter(Boolean).join(" · ");
}

// The waterfall of one tree: `el` and `detail` to put in the page, `draw()` after any change of rows,
// visible rows, `now` or the waterfall traits, `onMessage` for the kernel's custom messages. The selected
// bar or span survives redraws (kept by agent id, turn and the span's start).
function makeWaterfall(model, rowList, storeOfModel) {
  const el = h("div", { class: "toh-wf" });
  const detail = h("div", { class: "toh-wf-detail" });
  const messages = new Map(); // "id|turn|start" -> the span's messages, as the kernel sent them
  const spanKey = (id, turn, start) => `${id}|${turn}|${start}`;
  let selected = null; // {id, turn, span: the span's start | null}
  el.addEventListener("keydown", (e) => {  // bars and spans are buttons for the keyboard too
    if (e.key === "Enter" && e.target.getAttribute && e.target.getAttribute("role") === "button") {
      e.preventDefault(); e.target.click();
    }
  });

  function select(next) {
    selected = selected && next && selected.id === next.id && selected.turn === next.turn && selected.span === next.span
      ? null : next;  // a second click on the selection closes it
    if (selected && selected.span !== null && !messages.has(spanKey(selected.id, selected.turn, selected.span))) {
      model.send({ action: "span", id: selected.id, text: { turn: selected.turn, start: selected.span } });
    }
    draw();
  }

  function onMessage(msg) {
    if (!msg || msg.type !== "span") return;
    messages.set(spanKey(msg.id, msg.turn, msg.start), msg.messages);
    if (selected && selected.id === msg.id && selected.turn === msg.turn && selected.span === msg.start) draw();
  }

  // every agent's activations, the settled ones and the running ones, each span made an object again
  // (synced as [kind, name, start, end, input_tokens, output_tokens, is_error]); an agent whose activations
  // did not change keeps its converted copy
  let cached = { version: -1, live: null, data: {} };
  const converted = new Map(); // id -> [activations as sent, as drawn]
  function convert(id, acts) {
    const known = converted.get(id);
    if (known && known[0] === acts) return known[1];
    const out = acts.map((a) => ({ ...a, spans: a.spans.map(([kind, name, start, end, input_tokens, output_tokens, is_error]) =>
      ({ kind, name, start, end, input_tokens, output_tokens, is_error })) }));
    converted.set(id, [acts, out]);
    return out;
  }
  function synced() {
    const store = storeOfModel(), live = model.get("waterfall_live") || {};
    if (cached.version === store.waterfallVersion && cached.live === live) return cached.data;
    const data = {};
    for (const [id, acts] of store.waterfall) data[id] = convert(id, acts);
    for (const [id, acts] of Object.entries(live)) data[id] = convert(id, acts);
    for (const id of converted.keys()) if (!(id in data)) converted.delete(id);
    cached = { version: store.waterfallVersion, live, data };
    return data;
  }

  function pct(value) { return `${value.toFixed(3)}%`; }

  function drawDetail(byId, data) {
    if (!selected) { detail.replaceChildren(); detail.style.display = "none"; return; }
    const row = byId.get(selected.id);
    const activation = (data[selected.id] || []).find((a) => a.turn === selected.turn);
    if (!row || !activation) { selected = null; detail.replaceChildren(); detail.style.display = "none"; return; }
    detail.style.display = "";
    const now = model.get("now");
    const close = h("button", { class: "toh-wf-close", text: "Close", onclick: () => select(null) });
    const whole = h("button", { class: "toh-wf-transcript", text: "Transcript",
      title: `show the whole conversation of ${row.id}`, onclick: () => model.send({ action: "transcript", id: row.id }) });
    if (selected.span === null) {
      const items = activation.spans.map((span) => h("li", {},
        h("a", { href: "#", text: wfSpanTitle(span, now), onclick: (e) => { e.preventDefault(); select({ ...selected, span: span.start }); } })));
      detail.replaceChildren(h("div", { class: "toh-wf-detail-head" },
        h("b", { text: wfActTitle(row.name, activation, now) }), whole, close),
        items.length ? h("ol", { class: "toh-wf-spans" }, ...items) : h("i", { text: "(no model or tool call logged)" }));
      return;
    }
    const span = activation.spans.find((s) => s.start === selected.span);
    if (!span) { selected = null; drawDetail(byId, data); return; }
    const said = messages.get(spanKey(row.id, activation.turn, span.start));
    const shown = (said || []).map((m) => h("div", { class: `toh-wf-msg toh-wf-msg-${m.role}` },
      h("span", { class: "toh-role", text: m.tool && m.role !== "assistant" ? `${m.role} · ${m.tool}` : m.role }),
      h("pre", { class: "toh-wf-text", text: m.text || (m.tool && m.role === "assistant" ? `(calls ${m.tool})` : "") })));
    detail.replaceChildren(h("div", { class: "toh-wf-detail-head" },
      h("b", { text: `${row.name} turn ${activation.turn} · ${wfSpanTitle(span, now)}` }), whole, close),
      ...(said === undefined ? [h("i", { class: "toh-wf-loading", text: "loading\u2026" })]
        : shown.length ? shown : [h("i", { text: "(waiting for the model)" })]));
  }

  function draw() {
    const rows = rowList();
    const byId = new Map(rows.map((r) => [r.id, r]));
    const data = synced();
    const now = model.get("now");
    const shown = model.get("visible").map((id) => byId.get(id)).filter((r) => r && r.started !== null);
    // the axis: from the first start to the last end; to now only while something runs
    let t0 = Infinity, t1 = -Infinity, running = false;
    for (const row of shown) {
      t0 = Math.min(t0, row.started);
      const acts = data[row.id];
      if (acts && acts.length) {
        for (const a of acts) {
          if (a.end === null) running = true; else t1 = Math.max(t1, a.end);
        }
      } else if (row.ended !== null) t1 = Math.max(t1, row.ended);
      else if (row.status === "running" || row.status === "stopping") running = true;
      t1 = Math.max(t1, row.started);
    }
    if (running) t1 = Math.max(t1, now);
    if (!shown.length) { t0 = now; t1 = now; }
    const span = Math.max(t1 - t0, 1e-3);
    const x = (t) => ((t - t0) / span) * 100;
    // the track's width in pixels (the view minus the name column), so a label is drawn only where it fits
    const trackPx = Math.max((el.clientWidth || 860) - 270, 100);
    const fits = (text, percentOfTrack) => (percentOfTrack / 100) * trackPx >= text.length * 5.5 + 4;
    const ticks = wfTicks(span);
    const axis = h("div", { class: "toh-wf-axis" }, ...ticks.map((tick) => h("span", { class: "toh-wf-tick",
      style: `left:${pct(x(t0 + tick.t))}`, "data-t": String(tick.t), text: tick.label })));
    const grid = h("div", { class: "toh-wf-grid" }, ...ticks.map((tick) => h("span", { class: "toh-wf-gridline",
      style: `left:${pct(x(t0 + tick.t))}` })));
    const head = h("div", { class: "toh-wf-head" },
      h("span", { class: "toh-lane-name toh-wf-origin", text: shown.length ? `since ${wfClock(t0)}` : "" }),
      h("span", { class: "toh-lane-track toh-wf-axis-track" }, axis));

    const lanes = shown.map((row) => {
      const track = h("span", { class: "toh-lane-track" });
      const acts = data[row.id];
      const end = row.ended !== null ? row.ended : (row.status === "running" || row.status === "stopping" ? now : t1);
      if (row.kind === "agent" && acts) {
        // the agent's lifetime: a thin line; its work: one bar per activation
        track.append(h("span", { class: "toh-wf-life", style: `left:${pct(x(row.started))};width:${pct(Math.max(x(end) - x(row.started), 0))}` }));
        for (const a of acts) {
          const aEnd = a.end !== null ? a.end : now;
          const dur = Math.max(aEnd - a.start, 1e-6);
          const on = selected && selected.id === row.id && selected.turn === a.turn;
          const bar = h("div", { class: `toh-act toh-act-${wfState(a)}${on && selected.span === null ? " toh-selected" : ""}`,
            "data-turn": String(a.turn), role: "button", tabindex: "0", title: wfActTitle(row.name, a, now),
            style: `left:${pct(x(a.start))};width:${pct(Math.max(x(aEnd) - x(a.start), 0.15))}`,
            onclick: () => select({ id: row.id, turn: a.turn, span: null }) });
          a.spans.forEach((s) => {
            const sEnd = s.end !== null ? s.end : now;
            const label = s.kind === "model" ? (wfTokens(s) ? `${s.input_tokens + s.output_tokens} tok` : "model") : s.name;
            const width = Math.max(((sEnd - s.start) / dur) * 100, 0);
            bar.append(h("span", {
              class: `toh-span toh-span-${s.kind}${s.is_error ? " toh-span-error" : ""}${s.end === null ? " toh-span-running" : ""}${on && selected.span === s.start ? " toh-selected" : ""}`,
              role: "button", tabindex: "0", title: wfSpanTitle(s, now),
              text: fits(label, (width * (x(aEnd) - x(a.start))) / 100) ? label : "",
              style: `left:${pct(((s.start - a.start) / dur) * 100)};width:${pct(width)}`,
              onclick: (e) => { e.stopPropagation(); select({ id: row.id, turn: a.turn, span: s.start }); } }));
          });
          track.append(bar);
        }
      } else {  // a job, or an agent whose activations are not synced: one bar for its whole run
        track.append(h("div", { class: `toh-act toh-job toh-${row.status}`,
          title: `${row.name} ${row.id}: ${row.status}, ${elapsed(Math.max(0, end - row.started))}`,
          style: `left:${pct(x(row.started))};width:${pct(Math.max(x(end) - x(row.started), 0.15))}` }));
      }
      return h("div", { class: "toh-lane", "data-id": row.id },
        h("span", { class: "toh-lane-name", style: `padding-left:${row.level * 10}px`, title: `${row.name} ${row.id}`,
          text: `${row.name} ${row.short}`.trim() }), track);
    });
    const body = h("div", { class: "toh-wf-body" }, h("div", { class: "toh-wf-grid-box" }, grid), ...lanes);
    el.replaceChildren(head, body);
    drawDetail(byId, data);
  }

  return { el, detail, draw, onMessage };
}
