// athanor dashboard: every figure comes from the coordinator's JSON API
// (/api/cluster, /api/telemetry: the view `athanor top` reads; /api/job,
// /api/logs: the RPCs behind `athanor job` and `athanor logs`). The billing
// page's own code is billing.js.
"use strict";

const PALETTE = ["#1e88e5", "#8e24aa", "#43a047", "#f4511e", "#00897b", "#6d4c41", "#3949ab", "#c0ca33"];
function tenantColour(t) {
  let h = 0;
  for (const c of t) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return PALETTE[h % PALETTE.length];
}
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("data-")) e.setAttribute(k, v); else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
function num(x, digits) { return x === undefined || x === null ? "" : Number(x).toFixed(digits); }
// With tokens (docs/security.md), open the dashboard as .../#token=TOKEN: the
// fragment never leaves the browser; the token is kept for this tab only and
// sent as a bearer token with every API call.
(function takeToken() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("athanor-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
})();
async function getJson(url) {
  const token = sessionStorage.getItem("athanor-token");
  const headers = token ? {"Authorization": "Bearer " + token} : {};
  const r = await fetch(url, {cache: "no-store", headers});
  if (!r.ok) {
    // The server's reason (an RPC's refusal, say) after the status.
    const e = new Error(url + ": HTTP " + r.status + ": " + (await r.text()).trim());
    e.status = r.status;
    throw e;
  }
  return r.json();
}
function stamp(view) {
  document.getElementById("updated").textContent = "view of " + new Date(Number(view.unix_ms)).toLocaleTimeString();
}
function hasFigures(j) { return j.last && Number(j.last.step) >= 0 && j.last.unix_ms && Number(j.last.unix_ms) > 0; }

function renderGrid(view) {
  const grid = document.getElementById("grid");
  grid.replaceChildren();
  for (const n of view.nodes) {
    const row = el("div", {class: "node", "data-node": n.name},
                   el("span", {class: "name"}, n.name), el("span", {class: "nstate"}, n.state));
    for (const g of n.gpus) {
      const allocated = g.job_id !== "";
      const cell = el("div", {class: "gpu " + (allocated ? "allocated" : "free"), "data-node": n.name,
                              "data-gpu": g.index, "data-job": g.job_id, "data-tenant": g.tenant,
                              "data-state": allocated ? "allocated" : "free",
                              title: allocated ? `job ${g.job_id} (${g.tenant})` : "free"},
                      el("span", {}, "gpu" + g.index),
                      el("span", {}, allocated ? "job " + g.job_id : "free"),
                      el("span", {}, g.measured ? num(g.utilization, 0) + "%" : (allocated ? "util n/a" : "")));
      if (allocated) cell.style.background = tenantColour(g.tenant);
      if (allocated && g.measured && g.utilization < 10) cell.classList.add("idle");
      row.append(cell);
    }
    grid.append(row);
  }
}

function renderJobs(view) {
  const body = document.querySelector("#jobs tbody");
  body.replaceChildren();
  for (const j of view.jobs) {
    const f = hasFigures(j);
    body.append(el("tr", {"data-job": j.id, "data-state": j.state},
      el("td", {}, el("a", {href: "/job?id=" + encodeURIComponent(j.id)}, j.id)), el("td", {}, j.name),
      el("td", {}, j.tenant), el("td", {class: "state state-" + j.state}, j.state), el("td", {}, j.gpus),
      el("td", {}, j.attempt), el("td", {class: "step"}, f ? j.last.step : ""),
      el("td", {class: "loss"}, f ? num(j.last.loss, 4) : ""), el("td", {}, f ? num(j.steps_per_s, 2) : ""),
      el("td", {}, f ? num(j.last.tokens_per_s, 0) : "")));
  }
  const queue = document.querySelector("#queue tbody");
  queue.replaceChildren();
  for (const j of view.jobs.filter(j => j.state === "PENDING")) {
    queue.append(el("tr", {"data-job": j.id},
      el("td", {}, j.queue_position), el("td", {}, el("a", {href: "/job?id=" + j.id}, j.id)),
      el("td", {}, j.tenant), el("td", {}, j.gpus), el("td", {class: "why"}, j.why.join("; ") || j.reason)));
  }
}

function renderTenants(view) {
  const body = document.querySelector("#tenants tbody");
  body.replaceChildren();
  for (const t of view.tenants) {
    const quota = t.quota_gpus >= 0 ? t.quota_gpus : null;
    const share = quota ? Math.min(100, 100 * t.gpus_allocated / quota) : 0;
    const bar = el("div", {class: "bar"}, el("div", {}));
    bar.firstChild.style.width = share + "%";
    body.append(el("tr", {"data-tenant": t.tenant},
      el("td", {}, t.tenant), el("td", {class: "allocated"}, t.gpus_allocated),
      el("td", {}, quota === null ? "none" : quota), el("td", {}, quota === null ? "" : bar),
      el("td", {}, num(t.gpu_seconds / 3600, 3)), el("td", {}, t.jobs_running), el("td", {}, t.jobs_pending)));
  }
}

function when(unix) { return Number(unix) > 0 ? new Date(Number(unix) * 1000).toLocaleString() : ""; }

// The caller's interactive instances (/api/instances): a link to each
// notebook (on the coordinator's --notebook-listen port), the last use, and
// a banner for each warned one with the time left and any advice.
function renderInstances(answer) {
  const body = document.querySelector("#instances tbody");
  const banners = document.getElementById("instance-banners");
  body.replaceChildren();
  banners.replaceChildren();
  const now = Date.now() / 1000;
  for (const j of answer.jobs || []) {
    const running = j.state === "JOB_RUNNING";
    const url = `https://${location.hostname}:${answer.notebook_port}/notebook/${encodeURIComponent(j.id)}/`;
    const link = j.spec.notebook && running && answer.notebook_port > 0
        ? el("a", {href: `https://${location.hostname}:${answer.notebook_port}/notebook-login?next=` +
                         encodeURIComponent(new URL(url).pathname), target: "_blank", "data-notebook": j.id}, "open notebook")
        : (j.spec.notebook ? "notebook (not running)" : "");
    const a = j.last_activity || {};
    const last = a.signal ? `${a.signal}${a.detail ? " (" + a.detail + ")" : ""} at ${when(a.at_unix)}` : "";
    const reclaim = Number(j.reclaim_at_unix) > 0 ? `${when(j.reclaim_at_unix)} (in ${Math.max(0, Math.round(Number(j.reclaim_at_unix) - now))} s)` : "";
    body.append(el("tr", {"data-instance": j.id},
      el("td", {}, el("a", {href: "/job?id=" + encodeURIComponent(j.id)}, j.id)), el("td", {}, j.spec.name),
      el("td", {}, j.spec.tenant), el("td", {class: "state state-" + j.state.replace(/^JOB_/, "")}, j.state.replace(/^JOB_/, "")), el("td", {}, link),
      el("td", {}, last), el("td", {}, reclaim)));
    if ((j.reason || "").startsWith("idle since") || j.advice) {
      banners.append(el("div", {class: "banner", "data-banner": j.id},
        `instance ${j.id}: `, j.reason || "", j.advice ? el("div", {}, "advice: " + j.advice) : ""));
    }
  }
}

async function athanorOverview() {
  for (;;) {
    try {
      const view = await getJson("/api/cluster");
      renderGrid(view);
      renderJobs(view);
      renderTenants(view);
      try {  // the overview stands without it
        renderInstances(await getJson("/api/instances"));
      } catch (e) {
        document.getElementById("instance-banners").textContent = "instances: " + String(e);
      }
      stamp(view);
      document.body.dataset.loaded = "1";
    } catch (e) {
      document.getElementById("updated").textContent = String(e);
    }
    await new Promise(r => setTimeout(r, 2000));
  }
}

let charts = null;
function chart(id) {
  return new Chart(document.getElementById(id), {
    type: "line",
    data: {datasets: []},
    options: {animation: false, parsing: false, scales: {x: {type: "linear", title: {display: true, text: "step"}}}},
  });
}
// One line per attempt (an attempt resumes from its checkpoint's step, or 0).
function chartAttempts(c, label, samples, value) {
  const byAttempt = new Map();
  for (const s of samples) {
    if (!byAttempt.has(s.attempt)) byAttempt.set(s.attempt, []);
    byAttempt.get(s.attempt).push({x: Number(s.step), y: value(s)});
  }
  c.data.datasets = [...byAttempt.entries()].map(([a, data], i) => ({
    label: `${label}, attempt ${a}`, data, borderColor: PALETTE[i % PALETTE.length], pointRadius: 2, borderWidth: 1.5}));
  c.update();
  return samples.length;
}

// The attempts timeline, from the job as `athanor job` reads it (its
// attempts' spans and outcomes), with the steps each attempt's telemetry covered.
function renderAttempts(job, record, history) {
  const byAttempt = new Map();
  for (const s of history.samples) {
    const a = byAttempt.get(s.attempt) || {first: s, last: s};
    a.last = s;
    byAttempt.set(s.attempt, a);
  }
  const spans = (record.attempts || []).filter(a => Number(a.start_unix) > 0);
  const now = Date.now() / 1000;
  const t0 = spans.length ? Math.min(...spans.map(a => Number(a.start_unix))) : now;
  const t1 = Math.max(now, ...spans.map(a => Number(a.end_unix)));
  const width = Math.max(t1 - t0, 1e-3);
  const timeline = document.getElementById("timeline");
  timeline.replaceChildren();
  const axis = el("div", {class: "axis"});
  for (const a of spans) {
    const start = Number(a.start_unix), end = Number(a.end_unix) > 0 ? Number(a.end_unix) : now;
    const outcome = a.outcome || "running";
    const bar = el("div", {class: "span span-" + outcome, "data-attempt": a.attempt, "data-outcome": outcome,
                           title: `attempt ${a.attempt}: ${outcome}${a.end_reason ? " (" + a.end_reason + ")" : ""}`},
                   `${a.attempt}`);
    bar.style.left = (100 * (start - t0) / width) + "%";
    bar.style.width = Math.max(100 * (end - start) / width, 0.8) + "%";
    axis.append(bar);
  }
  timeline.append(axis, el("div", {class: "axis-labels"}, el("span", {}, new Date(t0 * 1000).toLocaleTimeString()),
                                                          el("span", {}, new Date(t1 * 1000).toLocaleTimeString())));
  const list = document.getElementById("attempts");
  list.replaceChildren();
  const preemptions = spans.filter(a => a.outcome === "preempted").length;
  const restarts = spans.filter(a => a.outcome === "restarted").length;
  timeline.dataset.preemptions = preemptions;
  timeline.dataset.restarts = restarts;
  // An elastic job's resizes: each attempt says how many nodes it ran on.
  timeline.dataset.resizes = spans.filter(a => a.outcome === "shrunk" || a.outcome === "grown").length;
  for (const a of record.attempts || []) {
    const steps = byAttempt.get(a.attempt);
    const outcome = a.outcome || (a.attempt === job.attempt ? job.state : "unknown");
    const secs = Number(a.start_unix) > 0 ? ((Number(a.end_unix) > 0 ? Number(a.end_unix) : now) - Number(a.start_unix)) : null;
    list.append(el("li", {"data-attempt": a.attempt, "data-outcome": a.outcome || "running"},
                   `attempt ${a.attempt} on ${a.nodes.join(", ")}: ${outcome}` +
                   (a.end_reason ? ` (${a.end_reason})` : "") +
                   (a.outcome === "shrunk" || a.outcome === "grown"
                        ? `, ${a.nodes.length} node(s), ${Number(a.steps_lost || 0)} step(s) lost` : "") +
                   (secs !== null ? `, ${num(secs, 1)} s` : "") +
                   (steps ? `, steps ${steps.first.step}..${steps.last.step}` : "")));
  }
}

// The newest attempt's log tails, as `athanor logs` prints them.
function renderLogs(logs) {
  document.getElementById("log-attempt").textContent = `attempt ${logs.attempt}, last lines of each rank`;
  const box = document.getElementById("logs");
  box.replaceChildren();
  for (const l of logs.logs) {
    box.append(el("h3", {}, `rank ${l.rank} on ${l.node}`),
               l.error ? el("p", {class: "log-error", "data-rank": l.rank}, l.error)
                       : el("pre", {class: "log", "data-rank": l.rank}, l.tail));
  }
  box.dataset.ranks = logs.logs.length;
}

function renderJob(job, record, history) {
  document.getElementById("title").textContent = `job ${job.id} ${job.name}`;
  const facts = document.getElementById("facts");
  facts.replaceChildren();
  const f = hasFigures(job);
  const rows = [["state", job.state], ["tenant", job.tenant], ["GPUs", job.gpus], ["nodes", job.node_names.join(", ")],
                ["attempt", job.attempt], ["restarts", job.restarts], ["reason", job.reason],
                ["step", f ? job.last.step : ""], ["loss", f ? job.last.loss : ""],
                ["steps/s", f ? num(job.steps_per_s, 2) : ""],
                ["stragglers", (job.stragglers || []).map(s => `rank ${s.rank} on ${s.node} (${num(s.ratio, 2)}x)`).join(", ")],
                ["avoids", (record.avoid_nodes || []).join(", ")],
                ["last hang", record.last_hang ? `attempt ${record.last_hang.attempt}: ${record.last_hang.reason}` : ""]];
  for (const [k, v] of rows) facts.append(el("dt", {}, k), el("dd", {"data-fact": k, class: k === "state" ? "state state-" + v : ""}, v));
  renderAttempts(job, record, history);
  document.getElementById("checkpoints").textContent =
      Number(job.committed_step) >= 0 ? `newest committed step ${job.committed_step}` : "no committed checkpoint";
  const body = document.querySelector("#points tbody");
  body.replaceChildren();
  for (const s of history.samples) {
    body.append(el("tr", {"data-step": s.step, "data-loss": s.loss, "data-attempt": s.attempt},
      el("td", {}, s.attempt), el("td", {}, s.step), el("td", {}, s.loss), el("td", {}, num(s.tokens_per_s, 1)),
      el("td", {}, num(s.step_ms, 2)), el("td", {}, num(100 * s.comm_wait_share, 1) + "%")));
  }
  if (typeof Chart === "undefined") return;
  if (charts === null) charts = {loss: chart("loss-chart"), tps: chart("tps-chart")};
  const points = chartAttempts(charts.loss, "loss", history.samples, s => s.loss);
  chartAttempts(charts.tps, "tokens/s", history.samples, s => s.tokens_per_s);
  document.getElementById("loss-chart").dataset.points = points;
}

async function athanorJob(id) {
  for (;;) {
    try {
      const q = encodeURIComponent(id);
      const [view, history, record, logs] = await Promise.all([
          getJson("/api/cluster"), getJson("/api/telemetry?job=" + q), getJson("/api/job?id=" + q),
          getJson("/api/logs?job=" + q + "&bytes=4096")]);
      const job = view.jobs.find(j => j.id === id);
      if (!job) throw new Error("no job " + id + " in the cluster view");
      renderJob(job, record, history);
      renderLogs(logs);
      stamp(view);
      document.body.dataset.loaded = "1";
    } catch (e) {
      document.getElementById("updated").textContent = String(e);
    }
    await new Promise(r => setTimeout(r, 2000));
  }
}
