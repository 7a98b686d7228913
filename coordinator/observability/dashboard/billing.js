// athanor dashboard, the billing page: a tenant's bill (/api/bill, the RPC
// Billing.GetBill) and balances (/api/balances, Billing.ListBalances), both
// made with the viewer's token, so a user sees its own tenant only and an
// admin any (with every tenant's spend). Needs dashboard.js (el, getJson,
// num). Money comes as int64 micro-units (strings in protobuf JSON), kept
// exact as BigInt and shown as common/money.cc's FormatMoney writes it.
"use strict";

// 3500000 -> "3.50", 1 -> "0.000001": two decimals at least, six at most,
// trailing zeros past the second dropped (FormatMoney).
function money(amount) {
  let m = BigInt(amount || 0);
  const negative = m < 0n;
  if (negative) m = -m;
  let frac = (m % 1000000n).toString().padStart(6, "0");
  while (frac.length > 2 && frac.endsWith("0")) frac = frac.slice(0, -1);
  return (negative ? "-" : "") + (m / 1000000n).toString() + "." + frac;
}
// For the chart's scale only (a double is close enough to draw with).
function units(micros) { return Number(micros) / 1e6; }
function micros(x) { return BigInt(x || 0); }

const CREDIT_BANNERS = new Map([
  ["low", "Credit is low"],
  ["very low", "Credit is very low: jobs stop when it runs out"],
  ["out of credit", "Out of credit: pending jobs are held and running ones stopped until credit is added"],
]);

function renderBanner(bill) {
  const banner = document.getElementById("credit-banner");
  const text = CREDIT_BANNERS.get(bill.status);
  banner.hidden = text === undefined;
  banner.className = "banner banner-" + bill.status.replaceAll(" ", "-");
  banner.dataset.status = bill.status;
  banner.textContent = text === undefined ? "" : `${text} (${bill.tenant}: ${money(bill.available_micros)} available).`;
}

function renderFacts(bill) {
  document.getElementById("title").textContent = `Billing of ${bill.tenant}, ${bill.month}`;
  const rows = [["tenant", bill.tenant], ["month", bill.month], ["balance", money(bill.balance_micros)],
                ["available", money(bill.available_micros)], ["allowance", money(bill.allowance_micros)],
                ["allowance left", money(bill.allowance_left_micros)], ["charged", money(bill.charged_micros)],
                ["credited", money(bill.credited_micros)], ["status", bill.status]];
  const facts = document.getElementById("money");
  facts.replaceChildren();
  for (const [k, v] of rows) {
    facts.append(el("dt", {}, k),
                 el("dd", {"data-fact": k, class: k === "status" ? "credit-" + v.replaceAll(" ", "-") : ""}, v));
  }
  document.getElementById("month").value = bill.month;
}

// The month's five largest lines, largest first.
function renderTopJobs(bill) {
  const lines = [...(bill.lines || [])].sort((a, b) => {
    const d = micros(b.amount_micros) - micros(a.amount_micros);
    return d > 0n ? 1 : d < 0n ? -1 : 0;
  }).slice(0, 5);
  const body = document.querySelector("#top-jobs tbody");
  body.replaceChildren();
  for (const l of lines) {
    body.append(el("tr", {"data-job": l.job_id, "data-amount": String(micros(l.amount_micros))},
      el("td", {}, el("a", {href: "/job?id=" + encodeURIComponent(l.job_id)}, l.job_id)), el("td", {}, l.job_name),
      el("td", {}, l.attempt), el("td", {}, l.gpu_model), el("td", {}, l.gpus),
      el("td", {class: "money"}, num(l.seconds * l.gpus / 3600, 4)), el("td", {class: "money"}, money(l.gpu_hour_micros)),
      el("td", {class: "money amount"}, money(l.amount_micros) + (l.refunded ? " (refunded)" : ""))));
  }
  if (lines.length === 0) body.append(el("tr", {}, el("td", {colSpan: 8}, "no usage this month")));
}

// Every day of the bill's month up to today (a past month: all of it), with
// the bill's daily spend; days without spend are 0.
function monthDays(bill) {
  const [y, m] = bill.month.split("-").map(Number);
  const now = new Date();
  const current = now.getUTCFullYear() === y && now.getUTCMonth() + 1 === m;
  const upto = current ? now.getUTCDate() : new Date(Date.UTC(y, m, 0)).getUTCDate();
  const spend = new Map((bill.daily || []).map(d => [d.day, micros(d.amount_micros)]));
  const days = [];
  for (let d = 1; d <= upto; ++d) days.push(`${bill.month}-${String(d).padStart(2, "0")}`);
  for (const day of spend.keys()) if (!days.includes(day)) days.push(day);
  days.sort();
  return days.map(day => ({day, micros: spend.get(day) || 0n}));
}

// How much of the chart is drawn: pixels painted at all, and pixels of the
// bars' own colour (so a test can tell bars from axes and grid).
const BAR_RGB = [66, 165, 245];  // #42a5f5
function markPainted(c) {
  const a = c.chartArea;
  const img = c.ctx.getImageData(a.left, a.top, Math.max(1, a.right - a.left), Math.max(1, a.bottom - a.top)).data;
  let painted = 0, bars = 0;
  for (let i = 0; i < img.length; i += 4) {
    if (img[i + 3] !== 0) ++painted;
    if (img[i] === BAR_RGB[0] && img[i + 1] === BAR_RGB[1] && img[i + 2] === BAR_RGB[2] && img[i + 3] === 255) ++bars;
  }
  c.canvas.dataset.painted = painted;
  c.canvas.dataset.barPixels = bars;
}

let spendChart = null;
let chartMicros = {day: [], total: []};  // what the tooltips show, exact
function renderChart(bill) {
  const days = monthDays(bill);
  let total = 0n;
  chartMicros = {day: days.map(d => d.micros), total: days.map(d => (total += d.micros))};
  const canvas = document.getElementById("spend-chart");
  canvas.dataset.days = days.length;
  canvas.dataset.total = money(total);
  if (typeof Chart === "undefined") return;
  const data = {
    labels: days.map(d => d.day.slice(8)),
    datasets: [
      {type: "bar", label: "spent that day", data: chartMicros.day.map(units), backgroundColor: "rgb(66, 165, 245)",
       yAxisID: "y", order: 2},
      {type: "line", label: "spent this month", data: chartMicros.total.map(units), borderColor: "#8e24aa",
       backgroundColor: "#8e24aa", pointRadius: 2, borderWidth: 1.5, yAxisID: "y1", order: 1},
    ],
  };
  const axisTitle = "day of " + bill.month + " (UTC)";
  if (spendChart !== null) {
    spendChart.data = data;
    spendChart.options.scales.x.title.text = axisTitle;
    spendChart.update();
    return;
  }
  const ticks = {callback: v => Number(v).toFixed(2)};
  spendChart = new Chart(canvas, {
    type: "bar",
    data,
    options: {
      animation: false,
      scales: {
        x: {title: {display: true, text: axisTitle}},
        y: {beginAtZero: true, ticks, title: {display: true, text: "per day"}},
        y1: {beginAtZero: true, ticks, position: "right", grid: {drawOnChartArea: false},
             title: {display: true, text: "month to date"}},
      },
      plugins: {tooltip: {callbacks: {label: ctx =>
          `${ctx.dataset.label}: ${money((ctx.datasetIndex === 0 ? chartMicros.day : chartMicros.total)[ctx.dataIndex])}`}}},
    },
    plugins: [{id: "painted", afterRender: markPainted}],
  });
}

// An admin's view: every tenant's spend and standing, and a picker.
function renderRevenue(balances, bill, choose) {
  const admin = balances.some(b => b.tenant !== bill.tenant);
  document.getElementById("revenue").hidden = !admin;
  document.getElementById("tenant-choice").hidden = !admin;
  if (!admin) return;
  const rows = [...balances].sort((a, b) => {
    const d = micros(b.spent_micros) - micros(a.spent_micros);
    return d > 0n ? 1 : d < 0n ? -1 : a.tenant < b.tenant ? -1 : 1;
  });
  const body = document.querySelector("#revenue-table tbody");
  body.replaceChildren();
  let total = 0n;
  for (const b of rows) {
    total += micros(b.spent_micros);
    const link = el("a", {href: "?tenant=" + encodeURIComponent(b.tenant)}, b.tenant);
    link.onclick = e => { e.preventDefault(); choose(b.tenant); };
    body.append(el("tr", {"data-tenant": b.tenant, class: b.tenant === bill.tenant ? "chosen" : ""},
      el("td", {}, link), el("td", {class: "money spent"}, money(b.spent_micros)),
      el("td", {class: "money"}, money(b.balance_micros)), el("td", {class: "money"}, money(b.available_micros)),
      el("td", {class: "credit-" + b.status.replaceAll(" ", "-")}, b.status)));
  }
  document.querySelector("#revenue-table tfoot").replaceChildren(
      el("tr", {}, el("th", {}, "all tenants"), el("th", {"data-total": "spent", class: "money"}, money(total)), el("th", {colSpan: 3}, "")));
  const picker = document.getElementById("tenant-picker");
  const names = rows.map(b => b.tenant).sort();
  if (!names.includes(bill.tenant)) names.unshift(bill.tenant);
  if ([...picker.options].map(o => o.value).join("\n") !== names.join("\n")) {
    picker.replaceChildren(...names.map(t => el("option", {value: t}, t)));
  }
  picker.value = bill.tenant;
}

// A bill that cannot be read leaves no earlier figures on screen.
function showBill(shown) {
  for (const part of document.querySelectorAll(".bill-part")) part.hidden = !shown;
}
function clearBill() {
  showBill(false);
  document.getElementById("money").replaceChildren();
  document.querySelector("#top-jobs tbody").replaceChildren();
  document.getElementById("credit-banner").hidden = true;
  document.getElementById("revenue").hidden = true;
  if (spendChart !== null) {
    spendChart.destroy();
    spendChart = null;
  }
}

function billUrl(tenant, month) {
  const q = new URLSearchParams();
  if (tenant) q.set("tenant", tenant);
  if (month) q.set("month", month);
  return "/api/bill" + (q.toString() ? "?" + q : "");
}

async function athanorBilling(params) {
  const want = {tenant: params.get("tenant") || "", month: params.get("month") || ""};
  let generation = 0;  // a newer refresh wins over one still in flight
  const error = document.getElementById("error");
  async function refresh() {
    const gen = ++generation;
    try {
      const balances = (await getJson("/api/balances")).balances || [];
      let bill;
      try {
        bill = await getJson(billUrl(want.tenant, want.month));
      } catch (e) {
        // An admin without a tenant of its own names one: the first listed.
        if (want.tenant || e.status !== 400 || balances.length === 0) throw e;
        bill = await getJson(billUrl(balances[0].tenant, want.month));
      }
      if (gen !== generation) return;
      showBill(true);
      renderBanner(bill);
      renderFacts(bill);
      renderTopJobs(bill);
      renderChart(bill);
      renderRevenue(balances, bill, tenant => choose(tenant, want.month));
      error.hidden = true;
      delete document.body.dataset.error;
      document.getElementById("updated").textContent = "as of " + new Date().toLocaleTimeString();
      document.body.dataset.loaded = "1";
    } catch (e) {
      if (gen !== generation) return;
      clearBill();
      error.textContent = e.message;
      error.hidden = false;
      document.body.dataset.error = e.status || "unreachable";
      document.getElementById("updated").textContent = "not updated";
    }
  }
  function choose(tenant, month) {
    want.tenant = tenant;
    want.month = month;
    const q = billUrl(tenant, month).slice("/api/bill".length);
    history.replaceState(null, "", location.pathname + q);
    refresh();
  }
  document.getElementById("tenant-picker").onchange = e => choose(e.target.value, want.month);
  document.getElementById("month").onchange = e => choose(want.tenant, e.target.value);
  for (;;) {
    await refresh();
    await new Promise(r => setTimeout(r, 5000));
  }
}
