// athanor dashboard: every figure comes from the coordinator's JSON API
// (/api/cluster, /api/telemetry), the same view `athanor top` reads.
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
  if (!r.ok) throw new Error(url + ": HTTP " + r.status);
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

async function athanorOverview() {
  for (;;) {
    try {
      const view = await getJson("/api/cluster");
      renderGrid(view);
      renderJobs(view);
      renderTenants(view);
      stamp(view);
      document.body.dataset.loaded = "1";
    } catch (e) {
      document.getElementById("updated").textContent = String(e);
    }
    await new Promise(r => setTimeout(r, 2000));
  }
}

let charts = null;
function chart(id, label, colour) {
  return new Chart(document.getElementById(id), {
    type: "line",
    data: {datasets: [{label, data: [], borderColor: colour, pointRadius: 2, borderWidth: 1.5}]},
    options: {animation: false, parsing: false, scales: {x: {type: "linear", title: {display: true, text: "step"}}}},
  });
}

function renderJob(job, history) {
  document.getElementById("title").textContent = `job ${job.id} ${job.name}`;
  const facts = document.getElementById("facts");
  facts.replaceChildren();
  const f = hasFigures(job);
  const rows = [["state", job.state], ["tenant", job.tenant], ["GPUs", job.gpus], ["nodes", job.node_names.join(", ")],
                ["attempt", job.attempt], ["restarts", job.restarts], ["reason", job.reason],
                ["step", f ? job.last.step : ""], ["loss", f ? job.last.loss : ""],
                ["steps/s", f ? num(job.steps_per_s, 2) : ""]];
  for (const [k, v] of rows) facts.append(el("dt", {}, k), el("dd", {"data-fact": k, class: k === "state" ? "state state-" + v : ""}, v));
  const attempts = document.getElementById("attempts");
  attempts.replaceChildren();
  const byAttempt = new Map();
  for (const s of history.samples) {
    const a = byAttempt.get(s.attempt) || {first: s, last: s};
    a.last = s;
    byAttempt.set(s.attempt, a);
  }
  for (let a = 1; a <= job.attempt; ++a) {
    const span = byAttempt.get(a);
    const text = span ? `steps ${span.first.step}..${span.last.step}` : "no telemetry";
    attempts.append(el("li", {"data-attempt": a}, `attempt ${a}: ${text}` +
                       (a === job.attempt ? ` (${job.state})` : " (ended: preempted or restarted)")));
  }
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
  if (charts === null) charts = {loss: chart("loss-chart", "loss", "#1e88e5"), tps: chart("tps-chart", "tokens/s", "#43a047")};
  charts.loss.data.datasets[0].data = history.samples.map(s => ({x: Number(s.step), y: s.loss}));
  charts.tps.data.datasets[0].data = history.samples.map(s => ({x: Number(s.step), y: s.tokens_per_s}));
  charts.loss.update();
  charts.tps.update();
  document.getElementById("loss-chart").dataset.points = charts.loss.data.datasets[0].data.length;
}

async function athanorJob(id) {
  for (;;) {
    try {
      const [view, history] = await Promise.all([getJson("/api/cluster"), getJson("/api/telemetry?job=" + encodeURIComponent(id))]);
      const job = view.jobs.find(j => j.id === id);
      if (!job) throw new Error("no job " + id + " in the cluster view");
      renderJob(job, history);
      stamp(view);
      document.body.dataset.loaded = "1";
    } catch (e) {
      document.getElementById("updated").textContent = String(e);
    }
    await new Promise(r => setTimeout(r, 2000));
  }
}
