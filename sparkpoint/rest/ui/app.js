// sparkpoint's web UI: one page over the job's REST API (Flink's paths and fields).
// Routes: #/ (jobs), #/jobs/<jid> (graph and operators), #/jobs/<jid>/vertices/<vid> (its subtasks),
// #/jobs/<jid>/checkpoints, #/jobs/<jid>/checkpoints/<id>, #/jobs/<jid>/config, #/jobs/<jid>/exceptions.
// Every figure carries a data-field attribute (and data-raw: the API's number, where the text shows it in human
// units); the body's data-state is "ready" after each render. Figures an archived job (the history server) does
// not have show as "-".
"use strict";

const REFRESH_MS = 2000;
const FINAL_STATES = ["FINISHED", "CANCELED", "FAILED"];
let refreshTimer = null;
let renderCount = 0;        // a render that a newer one has overtaken (hash changed meanwhile) is dropped

// the answer, or `fallback` when the API has none (an archived job keeps no metrics)
async function apiOr(path, fallback) {
  try { return await api(path); } catch (e) { return fallback; }
}

async function api(path) {
  const response = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try { message = (await response.json()).errors.join("; "); } catch (e) { /* not JSON */ }
    throw new Error(path + ": " + message);
  }
  return response.json();
}

// h("td", {"data-field": "x", class: "num"}, "text", child, ...)
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "onclick") el.onclick = value; else el.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, value);
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function time(ms) { return ms > 0 ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "-"; }
function duration(ms) {
  if (ms < 0) return "-";
  if (ms < 1000) return Math.round(ms) + " ms";
  const s = ms / 1000;
  return s < 120 ? s.toFixed(1) + " s" : Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
}
function bytes(n) {
  if (n < 1024) return n + " B";
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n, i = -1;
  do { v /= 1024; i++; } while (v >= 1024 && i < units.length - 1);
  return v.toFixed(1) + " " + units[i];
}
// a figure shown in human units, the API's number kept in data-raw
function human(tag, field, raw, format, attrs) {
  return h(tag, Object.assign({ class: "num", "data-field": field, "data-raw": raw }, attrs || {}),
           raw === null || raw === undefined || raw === "-" ? "-" : format(Number(raw)));
}
function card(label, field, value) {
  return h("div", { class: "card" }, h("div", { class: "label" }, label),
           h("div", { class: "value", "data-field": field }, value));
}
function table(headers, rows, attrs) {
  return h("table", attrs || {}, h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
           h("tbody", {}, rows));
}
function uidOf(node) {
  const m = /\(uid (.*)\)$/.exec(node.description || "");
  return m ? m[1] : "";
}
function nameOf(node) { return (node.description || "").replace(/ \(uid .*\)$/, ""); }

// -- routes ---------------------------------------------------------------------------------

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean);
  if (parts[0] !== "jobs" || !parts[1]) return { view: "jobs" };
  return { view: parts[2] || "overview", jid: parts[1], checkpoint: parts[3], vertex: parts[3] };
}

function navigation(r) {
  const nav = document.getElementById("nav");
  nav.replaceChildren();
  nav.append(h("a", { href: "#/", class: r.view === "jobs" ? "active" : "" }, "Jobs"));
  if (!r.jid) return;
  for (const [view, label] of [["overview", "Overview"], ["checkpoints", "Checkpoints"],
                               ["config", "Configuration"], ["exceptions", "Exceptions"]]) {
    const href = "#/jobs/" + r.jid + (view === "overview" ? "" : "/" + view);
    nav.append(h("a", { href: href, class: r.view === view ? "active" : "", "data-nav": view }, label));
  }
}

async function render() {
  clearTimeout(refreshTimer);
  const mine = ++renderCount;
  const r = route();
  navigation(r);
  const app = document.getElementById("app");
  let live = false;
  try {
    const views = { jobs: jobsView, overview: overviewView, checkpoints: checkpointsView, config: configView,
                    exceptions: exceptionsView, vertices: vertexView };
    const result = await (views[r.view] || jobsView)(r);
    if (mine !== renderCount) return;
    app.replaceChildren(result.element);
    live = result.live;
  } catch (error) {
    if (mine !== renderCount) return;
    app.replaceChildren(h("p", { class: "error", "data-field": "error" }, String(error.message || error)));
    live = true;
  }
  document.getElementById("refreshed").textContent = "updated " + new Date().toLocaleTimeString();
  document.body.dataset.state = "ready";
  document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
  if (live) refreshTimer = setTimeout(render, REFRESH_MS);   // live refresh until the job is over
}

// -- jobs -----------------------------------------------------------------------------------

async function jobsView() {
  const overview = await api("/jobs/overview");
  const rows = overview.jobs.map((job) => h("tr", { "data-job": job.jid },
    h("td", {}, h("a", { href: "#/jobs/" + job.jid, "data-field": "job-name" }, job.name)),
    h("td", { "data-field": "job-id" }, job.jid),
    h("td", { class: "state state-" + job.state, "data-field": "job-state" }, job.state),
    h("td", { "data-field": "job-start" }, time(job["start-time"])),
    h("td", { class: "num", "data-field": "job-duration" }, duration(job.duration))));
  const live = overview.jobs.some((job) => !FINAL_STATES.includes(job.state));
  return { element: h("section", {}, h("h1", {}, "Jobs"),
                      table(["Name", "Job id", "State", "Started", "Duration"], rows, { "data-table": "jobs" })),
           live: live };
}

// -- one job: graph and operators -------------------------------------------------------------

function levels(nodes) {
  const byId = Object.fromEntries(nodes.map((n) => [n.id, n]));
  const level = {};
  const depth = (n) => {
    if (level[n.id] !== undefined) return level[n.id];
    level[n.id] = 0;
    level[n.id] = Math.max(0, ...(n.inputs || []).map((i) => (byId[i.id] ? depth(byId[i.id]) + 1 : 0)));
    return level[n.id];
  };
  nodes.forEach(depth);
  return level;
}

function percent(ratio) { return Math.round(100 * ratio) + " %"; }

// pressure: vertex id -> {level, ratio, busy} (GET .../backpressure: the most backpressured and busiest subtask)
function graph(plan, pressure) {
  const level = levels(plan.nodes);
  const columns = {};
  for (const n of plan.nodes) (columns[level[n.id]] = columns[level[n.id]] || []).push(n);
  const W = 220, H = 84, GX = 90, GY = 24;
  const pos = {};
  for (const [col, nodes] of Object.entries(columns)) {
    nodes.forEach((n, row) => { pos[n.id] = { x: 10 + col * (W + GX), y: 10 + row * (H + GY) }; });
  }
  const width = 20 + (Object.keys(columns).length) * (W + GX);
  const height = 20 + Math.max(...Object.values(columns).map((c) => c.length)) * (H + GY);
  const edges = [], boxes = [];
  for (const n of plan.nodes) {
    for (const input of n.inputs || []) {
      const a = pos[input.id], b = pos[n.id];
      if (!a) continue;
      edges.push(svg("path", { class: "edge", "data-edge": input.id + "->" + n.id,
        d: `M${a.x + W},${a.y + H / 2} C${a.x + W + GX / 2},${a.y + H / 2} ${b.x - GX / 2},${b.y + H / 2} ${b.x},${b.y + H / 2}` }));
      edges.push(svg("text", { x: a.x + W + 4, y: a.y + H / 2 - 6 }, input.ship_strategy));
    }
    const p = pos[n.id], bp = pressure[n.id] || { level: "ok", ratio: 0, busy: 0 };
    boxes.push(svg("g", { class: "node bp-" + bp.level, "data-vertex": n.id },
      svg("rect", { x: p.x, y: p.y, width: W, height: H, rx: 6 }),
      svg("text", { x: p.x + 8, y: p.y + 18, "data-field": "graph-name" }, nameOf(n).slice(0, 30)),
      svg("text", { x: p.x + 8, y: p.y + 36, "data-field": "graph-uid" }, "uid " + uidOf(n)),
      svg("text", { x: p.x + 8, y: p.y + 54, "data-field": "graph-parallelism" }, "parallelism " + n.parallelism),
      svg("text", { x: p.x + 8, y: p.y + 72, "data-field": "graph-busy" },
          "busy " + percent(bp.busy) + ", backpressured " + percent(bp.ratio))));
  }
  return svg("svg", { width: width, height: height, "data-chart": "job-graph" },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6,
                                    markerHeight: 6, orient: "auto" }, svg("path", { d: "M0,0 L10,5 L0,10 z" }))),
    edges, boxes);
}

async function vertexFigures(jid, vertex) {
  const [watermarks, late, backpressure] = await Promise.all([
    apiOr(`/jobs/${jid}/vertices/${vertex.id}/watermarks`, []),
    apiOr(`/jobs/${jid}/vertices/${vertex.id}/subtasks/metrics?get=numLateRecordsDropped&agg=sum`, []),
    apiOr(`/jobs/${jid}/vertices/${vertex.id}/backpressure`, {})]);
  const values = watermarks.map((w) => Number(w.value));
  const least = watermarks.length ? watermarks[values.indexOf(Math.min(...values))].value : "-";  // exact digits
  const subtasks = backpressure.subtasks || [];
  const pressure = { level: backpressure.backpressureLevel || "ok",
                     ratio: Math.max(0, ...subtasks.map((s) => s.ratio)),
                     busy: Math.max(0, ...subtasks.map((s) => s.busyRatio)) };
  return { watermark: values.length ? Math.min(...values) : null, watermarkRaw: least,
           late: late.length ? late[0].sum : 0, pressure: pressure };
}

// a watermark as a date-time (event time is milliseconds since 1970, as Flink's UI shows it)
function watermarkText(w) {
  if (w === null) return "-";
  if (w <= -9223372036854775000) return "no watermark";
  if (w >= 9223372036854775000) return "end of input";
  return new Date(w).toISOString().replace("T", " ").replace("Z", "");
}

async function overviewView(r) {
  const [job, metrics] = await Promise.all([api("/jobs/" + r.jid),
    apiOr(`/jobs/${r.jid}/metrics?get=numberOfEpochs,epochsPerSecond,uptime,numRestarts`, [])]);
  const m = Object.fromEntries(metrics.map((x) => [x.id, x.value]));
  const nodes = Object.fromEntries(job.plan.nodes.map((n) => [n.id, n]));
  const figures = await Promise.all(job.vertices.map((v) => vertexFigures(r.jid, v)));
  const rows = job.vertices.map((v, i) => h("tr", { "data-vertex": v.id },
    h("td", {}, h("a", { href: `#/jobs/${r.jid}/vertices/${v.id}`, "data-field": "op-name" }, v.name)),
    h("td", { "data-field": "op-uid" }, uidOf(nodes[v.id] || {})),
    h("td", { class: "num", "data-field": "op-parallelism" }, v.parallelism),
    h("td", { class: "num", "data-field": "op-records-in" }, v.metrics["read-records"]),
    h("td", { class: "num", "data-field": "op-records-out" }, v.metrics["write-records"]),
    h("td", { class: "num", "data-field": "op-watermark", "data-raw": figures[i].watermarkRaw },
      watermarkText(figures[i].watermark)),
    h("td", { class: "num", "data-field": "op-late-records" }, figures[i].late),
    h("td", { class: "num", "data-field": "op-busy" }, percent(figures[i].pressure.busy)),
    h("td", { class: "bp-" + figures[i].pressure.level, "data-field": "op-backpressure" },
      figures[i].pressure.level + " (" + percent(figures[i].pressure.ratio) + ")")));
  const pressure = Object.fromEntries(job.vertices.map((v, i) => [v.id, figures[i].pressure]));
  const element = h("section", {},
    h("h1", {}, job.name, " ", h("span", { class: "state state-" + job.state, "data-field": "job-state" }, job.state)),
    h("div", { class: "cards" },
      card("Job id", "job-id", job.jid), card("Started", "job-start", time(job["start-time"])),
      card("Duration", "job-duration", duration(job.duration)), card("Epochs", "epochs", m.numberOfEpochs ?? "-"),
      card("Epochs per second", "epochs-per-second", m.epochsPerSecond ?? "-"),
      card("Restarts", "restarts", m.numRestarts ?? "0")),
    h("h2", {}, "Job graph"), graph(job.plan, pressure),
    h("h2", {}, "Operators"),
    table(["Operator", "uid", "Parallelism", "Records in", "Records out", "Watermark", "Late records dropped",
           "Busy (max)", "Backpressure (max)"], rows, { "data-table": "operators" }));
  return { element: element, live: !FINAL_STATES.includes(job.state) };
}

// -- one operator: its subtasks ----------------------------------------------------------------

async function vertexView(r) {
  const [job, vertex, watermarks, backpressure] = await Promise.all([api("/jobs/" + r.jid),
    api(`/jobs/${r.jid}/vertices/${r.vertex}`), apiOr(`/jobs/${r.jid}/vertices/${r.vertex}/watermarks`, []),
    apiOr(`/jobs/${r.jid}/vertices/${r.vertex}/backpressure`, {})]);
  const mark = Object.fromEntries(watermarks.map((w) => [w.id.split(".")[0], w.value]));  // exact digits
  const pressure = Object.fromEntries((backpressure.subtasks || []).map((s) => [s.subtask, s]));
  const rows = vertex.subtasks.map((s) => h("tr", { "data-subtask": s.subtask },
    h("td", { class: "num" }, s.subtask),
    h("td", { class: "state state-" + s.status, "data-field": "sub-status" }, s.status),
    h("td", { class: "num", "data-field": "sub-records-in" }, s.metrics["read-records"]),
    h("td", { class: "num", "data-field": "sub-records-out" }, s.metrics["write-records"]),
    h("td", { class: "num", "data-field": "sub-watermark", "data-raw": mark[s.subtask] ?? "-" },
      watermarkText(mark[s.subtask] === undefined ? null : Number(mark[s.subtask]))),
    h("td", { class: "num", "data-field": "sub-busy" }, pressure[s.subtask] ? percent(pressure[s.subtask].busyRatio) : "-"),
    h("td", { class: "num", "data-field": "sub-backpressure" },
      pressure[s.subtask] ? percent(pressure[s.subtask].ratio) : "-"),
    h("td", { "data-field": "sub-taskmanager" }, s["taskmanager-id"])));
  const element = h("section", {},
    h("h1", {}, h("span", { "data-field": "vertex-name" }, vertex.name), " of ", job.name),
    h("div", { class: "cards" },
      card("Parallelism", "vertex-parallelism", vertex.parallelism),
      card("Max parallelism", "vertex-max-parallelism", vertex.maxParallelism),
      card("Records in", "vertex-records-in", vertex.subtasks.reduce((a, s) => a + s.metrics["read-records"], 0)),
      card("Records out", "vertex-records-out", vertex.subtasks.reduce((a, s) => a + s.metrics["write-records"], 0))),
    h("h2", {}, "Subtasks"),
    table(["Subtask", "Status", "Records in", "Records out", "Watermark", "Busy", "Backpressured", "Task manager"],
          rows, { "data-table": "subtasks" }));
  return { element: element, live: !FINAL_STATES.includes(job.state) };
}

// -- checkpoints -------------------------------------------------------------------------------

function barChart(title, field, history, valueOf, format) {
  const items = history.slice().reverse();
  const W = 460, H = 160, pad = 30;
  const max = Math.max(1, ...items.map(valueOf));
  const gap = items.length > 60 ? 1 : 4;
  const bw = items.length ? Math.max(1, Math.min(40, (W - pad) / items.length - gap)) : 0;
  const every = Math.max(1, Math.ceil(items.length / 10));   // at most ~10 labels: they never overlap
  const bars = items.map((c, i) => {
    const v = valueOf(c), bh = Math.round((H - pad) * v / max);
    const x = pad + i * (bw + gap), y = H - 18 - bh;
    const label = i % every === 0 || i === items.length - 1 ? svg("text", { x: x, y: H - 4, "data-label": c.id }, c.id)
                                                             : null;
    return svg("g", { "data-bar": c.id, "data-value": v },
      svg("rect", { class: "bar " + (c.is_savepoint ? "savepoint" : c.status === "FAILED" ? "failed" : ""),
                    x: x, y: y, width: bw, height: bh }, svg("title", {}, `#${c.id}: ${format(v)}`)),
      label);
  });
  return h("div", {}, h("div", {}, title + " (max " + format(max) + ")"),
           svg("svg", { width: W, height: H, "data-chart": field }, bars));
}

function latestRow(label, field, c) {
  if (!c) return h("tr", { "data-latest": field }, h("th", {}, label), h("td", { "data-field": field + "-id" }, "none"),
                   h("td", {}, ""));
  const where = c.external_path || c.failure_message || "";
  return h("tr", { "data-latest": field }, h("th", {}, label),
           h("td", { "data-field": field + "-id" }, c.id ?? c.checkpoint_id ?? "-"),
           h("td", { "data-field": field + "-path" }, where));
}

async function checkpointsView(r) {
  if (r.checkpoint) return checkpointDetailsView(r);
  const [job, stats] = await Promise.all([api("/jobs/" + r.jid), api(`/jobs/${r.jid}/checkpoints`)]);
  const counts = stats.counts, latest = stats.latest, summary = stats.summary;
  const history = stats.history || [];
  const rows = history.map((c) => h("tr", { "data-checkpoint": c.id },
    h("td", {}, h("a", { href: `#/jobs/${r.jid}/checkpoints/${c.id}`, "data-field": "cp-id" }, c.id)),
    h("td", { "data-field": "cp-status" }, c.status),
    h("td", { "data-field": "cp-savepoint" }, c.is_savepoint ? "savepoint" : "checkpoint"),
    h("td", { "data-field": "cp-trigger" }, time(c.trigger_timestamp)),
    human("td", "cp-duration", c.end_to_end_duration, duration),
    human("td", "cp-state-size", c.state_size, bytes),
    human("td", "cp-checkpointed-size", c.checkpointed_size, bytes),
    h("td", { class: "num", "data-field": "cp-acks" }, c.num_acknowledged_subtasks + "/" + c.num_subtasks)));
  const sum = (k) => summary[k] || {};
  const element = h("section", {},
    h("h1", {}, "Checkpoints of ", job.name),
    h("div", { class: "cards" },
      card("Triggered", "count-total", counts.total), card("In progress", "count-in-progress", counts.in_progress),
      card("Completed", "count-completed", counts.completed), card("Failed", "count-failed", counts.failed),
      card("Restored", "count-restored", counts.restored)),
    h("h2", {}, "Latest"),
    h("table", { "data-table": "latest" }, h("tbody", {},
      latestRow("Completed checkpoint", "latest-completed", latest.completed),
      latestRow("Savepoint", "latest-savepoint", latest.savepoint),
      latestRow("Failed checkpoint", "latest-failed", latest.failed),
      latestRow("Restored", "latest-restored", latest.restored))),
    h("h2", {}, "Summary"),
    table(["", "min", "avg", "p50", "p99", "max"], ["end_to_end_duration", "state_size", "checkpointed_size"].map(
      (k) => h("tr", { "data-summary": k }, h("th", {}, k),
        ["min", "avg", "p50", "p99", "max"].map((a) => human("td", `summary-${k}-${a}`, sum(k)[a] ?? "-",
                                                             k === "end_to_end_duration" ? duration : bytes))))),
    h("h2", {}, "Charts"),
    h("div", { class: "charts" },
      barChart("End-to-end duration per checkpoint", "chart-duration", history, (c) => Math.max(0, c.end_to_end_duration),
               duration),
      barChart("State size per checkpoint", "chart-size", history, (c) => c.state_size, bytes)),
    h("h2", {}, "History"),
    table(["Id", "Status", "Type", "Triggered", "End to end", "State size", "Checkpointed size", "Acks"],
          rows, { "data-table": "history" }));
  return { element: element, live: !FINAL_STATES.includes(job.state) };
}

async function checkpointDetailsView(r) {
  const [job, details] = await Promise.all([api("/jobs/" + r.jid),
    api(`/jobs/${r.jid}/checkpoints/details/${r.checkpoint}`)]);
  const sections = [];
  for (const v of job.vertices) {
    const task = details.tasks[v.id];
    const sub = await api(`/jobs/${r.jid}/checkpoints/details/${r.checkpoint}/subtasks/${v.id}`);
    const rows = sub.subtasks.map((s) => h("tr", { "data-subtask": s.index },
      h("td", { class: "num" }, s.index), h("td", { "data-field": "st-status" }, s.status),
      human("td", "st-duration", s.end_to_end_duration, duration),
      human("td", "st-sync", s.checkpoint ? s.checkpoint.sync : "-", duration),
      human("td", "st-async", s.checkpoint ? s.checkpoint.async : "-", duration),
      human("td", "st-state-size", s.state_size, bytes),
      human("td", "st-checkpointed-size", s.checkpointed_size, bytes)));
    sections.push(h("div", { "data-vertex": v.id },
      h("h2", {}, v.name, " ", h("span", { "data-field": "vx-status" }, task.status), " ",
        h("span", { "data-field": "vx-acks" }, task.num_acknowledged_subtasks + "/" + task.num_subtasks), " acks, ",
        h("span", { "data-field": "vx-state-size" }, task.state_size), " B"),
      table(["Subtask", "Status", "End to end", "Sync", "Async", "State size", "Checkpointed size"], rows,
            { "data-table": "subtasks" })));
  }
  const element = h("section", {},
    h("h1", {}, (details.is_savepoint ? "Savepoint " : "Checkpoint "), h("span", { "data-field": "cp-id" }, details.id),
      " ", h("span", { "data-field": "cp-status" }, details.status)),
    h("div", { class: "cards" },
      card("Triggered", "cp-trigger", time(details.trigger_timestamp)),
      card("End to end", "cp-duration", duration(details.end_to_end_duration)),
      card("State size", "cp-state-size", bytes(details.state_size)),
      card("Path", "cp-path", details.external_path || "-")),
    sections);
  return { element: element, live: details.status === "IN_PROGRESS" };
}

// -- configuration and exceptions ----------------------------------------------------------

async function configView(r) {
  const [job, cp, config] = await Promise.all([api("/jobs/" + r.jid), api(`/jobs/${r.jid}/checkpoints/config`),
                                               api(`/jobs/${r.jid}/config`)]);
  const flat = { mode: cp.mode, interval: cp.interval, timeout: cp.timeout, min_pause: cp.min_pause,
                 max_concurrent: cp.max_concurrent, externalization_enabled: cp.externalization.enabled,
                 delete_on_cancellation: cp.externalization.delete_on_cancellation, state_backend: cp.state_backend,
                 checkpoint_storage: cp.checkpoint_storage, tolerable_failed_checkpoints: cp.tolerable_failed_checkpoints };
  const user = config["execution-config"]["user-config"];
  const element = h("section", {}, h("h1", {}, "Configuration of ", job.name),
    h("h2", {}, "Checkpointing"),
    table(["Setting", "Value"], Object.entries(flat).map(([k, v]) => h("tr", { "data-setting": k },
      h("th", {}, k), h("td", { "data-field": "cfg-" + k }, String(v)))), { "data-table": "checkpoint-config" }),
    h("h2", {}, "Job configuration"),
    table(["Key", "Value"], Object.keys(user).sort().map((k) => h("tr", { "data-key": k },
      h("th", {}, k), h("td", { "data-field": "job-config-value" }, user[k]))), { "data-table": "job-config" }));
  return { element: element, live: false };
}

async function exceptionsView(r) {
  const [job, exceptions] = await Promise.all([api("/jobs/" + r.jid), api(`/jobs/${r.jid}/exceptions`)]);
  const entries = exceptions.exceptionHistory.entries;
  const element = h("section", {}, h("h1", {}, "Exceptions of ", job.name),
    h("p", { "data-field": "exception-count" }, entries.length + " exception(s)"),
    entries.map((e) => h("div", { "data-exception": e.timestamp }, h("h2", {}, e.exceptionName, " at ", time(e.timestamp)),
                         h("pre", {}, e.stacktrace))));
  return { element: element, live: !FINAL_STATES.includes(job.state) };
}

window.addEventListener("hashchange", render);
render();
