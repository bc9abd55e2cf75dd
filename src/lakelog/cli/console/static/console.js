// Lakelog console: live charts (SVG drawn here, no library) and live tables.
// Charts: every <svg class="chart" data-keys='[...]'> is redrawn from /api/series each
// interval. Tables: every [data-live] section is replaced by the same section of a fresh
// copy of the page. No build step; plain ES2017.
"use strict";

const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
const W = 640, H = 200, PAD_L = 76, PAD_B = 20, PAD_T = 8, PAD_R = 8;
const SVG = "http://www.w3.org/2000/svg";

const COUNT_UNITS = new Set(["", "records"]);
// Units of whole things (connections, open transactions, records of lag): never fractional.
// Bytes are whole too, below 1 KiB/s.

function human(value, unit) {
  // A legend's value: counts whole, rates with as many decimals as their size needs.
  if (unit === "B/s") {
    const units = ["B/s", "KiB/s", "MiB/s", "GiB/s"];
    let i = 0;
    while (Math.abs(value) >= 1024 && i < units.length - 1) { value /= 1024; i++; }
    return value.toFixed(i ? 1 : 0) + " " + units[i];
  }
  const abs = Math.abs(value);
  const count = COUNT_UNITS.has(unit);
  const text = !count && abs > 0 && abs < 1
    ? value.toLocaleString("en", { maximumSignificantDigits: 2 })
    : value.toLocaleString("en", { maximumFractionDigits: count || abs >= 100 ? 0 : abs >= 10 ? 1 : 2 });
  return unit ? text + " " + unit : text;
}

function axisScale(top, unit) {
  // [divisor, suffix, zero's suffix] so the axis' largest value reads short: 1024s for
  // bytes, 1000s else (zero is "0 /h", not "0k /h").
  const bytes = unit === "B/s";
  const names = bytes ? [" B/s", " KiB/s", " MiB/s", " GiB/s", " TiB/s"] : ["", "k", "M", "G", "T"];
  const base = bytes ? 1024 : 1000;
  let i = 0;
  while (top / base ** i >= (bytes ? 1024 : 1e4) && i < names.length - 1) i++;
  const plain = unit && unit.length <= 2 ? " " + unit : "";
  return bytes ? [base ** i, names[i], names[i]] : [base ** i, names[i] + plain, plain];
}

function ticks(top, unit) {
  // Axis ticks at a "nice" step (1, 2, 2.5 or 5 times a power of ten, in the shown unit;
  // 1, 2 or 5 and whole for counts and bytes), from 0 to the first tick at or above `top`. Every label is printed
  // with the step's decimals, so no two labels read the same.
  const [div, suffix, zeroSuffix] = axisScale(top, unit);
  const scaled = top > 0 ? top / div : 1;
  const rough = scaled / 4;
  const power = 10 ** Math.floor(Math.log10(rough));
  const whole = COUNT_UNITS.has(unit) || unit === "B/s" || !(top > 0);
  let step = (whole ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10]).map((m) => m * power).find((s) => s >= rough);
  if (whole && div === 1) step = Math.max(1, Math.ceil(step));
  let decimals = 0;
  while (decimals < 6 && Math.abs(step * 10 ** decimals - Math.round(step * 10 ** decimals)) > 1e-9) decimals++;
  const n = Math.max(1, Math.ceil(scaled / step - 1e-9));
  const values = [], labels = [];
  for (let i = 0; i <= n; i++) {
    values.push(i * step * div);
    labels.push(i ? (i * step).toFixed(decimals) + suffix : "0" + zeroSuffix);
  }
  return { vmax: n * step * div, values, labels };
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function draw(svg, series) {
  const keys = JSON.parse(svg.dataset.keys);
  const labels = JSON.parse(svg.dataset.labels || "[]");
  const unit = svg.dataset.unit || "";
  const lines = keys.map((k) => series[k] || []);
  const all = lines.flat();
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const legend = document.getElementById(svg.id + "-legend");
  if (legend) legend.textContent = "";
  svg.dataset.points = String(lines.reduce((n, l) => n + l.length, 0));
  const first = lines[0] || [];
  svg.dataset.last = first.length ? String(first[first.length - 1][1]) : "";
  svg.dataset.max = all.length ? String(Math.max(...all.map((p) => p[1]))) : "";
  if (svg.classList.contains("spark")) {
    drawSpark(svg, first);
    return;
  }
  if (all.length === 0) {
    svg.appendChild(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, "waiting for samples"));
    return;
  }
  const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]));
  const axis = ticks(Math.max(...all.map((p) => p[1])), unit);
  const vmax = axis.vmax;
  const x = (t) => PAD_L + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - PAD_L - PAD_R);
  const y = (v) => H - PAD_B - (v / vmax) * (H - PAD_B - PAD_T);
  axis.values.forEach((v, i) => {
    svg.appendChild(el("line", { x1: PAD_L, x2: W - PAD_R, y1: y(v), y2: y(v), class: "grid" }));
    svg.appendChild(el("text", { x: PAD_L - 4, y: y(v) + 4, "text-anchor": "end", class: "axis tick" }, axis.labels[i]));
  });
  const clock = (t) => new Date(t * 1000).toISOString().slice(11, 19);
  svg.appendChild(el("text", { x: PAD_L, y: H - 4, class: "axis" }, clock(t0)));
  svg.appendChild(el("text", { x: W - PAD_R, y: H - 4, "text-anchor": "end", class: "axis" }, clock(t1) + " UTC"));
  lines.forEach((points, i) => {
    if (!points.length) return;
    const color = COLORS[i % COLORS.length];
    const path = points.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" ");
    svg.appendChild(el("polyline", { points: path, fill: "none", stroke: color, "stroke-width": 2, "vector-effect": "non-scaling-stroke", "data-key": keys[i] }));
    if (legend) {
      const item = document.createElement("span");
      item.style.color = color;
      item.textContent = (labels[i] || keys[i]) + ": " + human(points[points.length - 1][1], unit);
      legend.appendChild(item);
    }
  });
}

function drawSpark(svg, points) {
  // A row's small trend line: no axes, its own scale, the last value as a tooltip.
  if (points.length < 2) return;
  const t0 = points[0][0], t1 = points[points.length - 1][0];
  const top = Math.max(...points.map((p) => p[1]));
  const vmax = top > 0 ? top : 1;
  const path = points.map((p) => (((p[0] - t0) / (t1 - t0 || 1)) * 158 + 1).toFixed(1) + "," + (27 - (p[1] / vmax) * 25).toFixed(1)).join(" ");
  svg.appendChild(el("polyline", { points: path, fill: "none", stroke: COLORS[0], "stroke-width": 1.5, "vector-effect": "non-scaling-stroke" }));
  svg.appendChild(el("title", {}, human(points[points.length - 1][1], svg.dataset.unit || "")));
}

async function refreshCharts() {
  const svgs = Array.from(document.querySelectorAll("svg.chart[data-keys]"));
  if (!svgs.length) return;
  const keys = new Set();
  svgs.forEach((svg) => JSON.parse(svg.dataset.keys).forEach((k) => keys.add(k)));
  const query = Array.from(keys).slice(0, 64).map((k) => "key=" + encodeURIComponent(k)).join("&");
  try {
    const response = await fetch("/api/series?" + query, { credentials: "same-origin" });
    if (!response.ok) return;
    const body = await response.json();
    svgs.forEach((svg) => draw(svg, body.series));
  } catch (e) { /* the next tick tries again */ }
}

async function refreshTables() {
  const live = document.querySelectorAll("[data-live][id]");
  if (!live.length) return;
  try {
    const response = await fetch(location.href, { credentials: "same-origin" });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    live.forEach((section) => {
      const other = fresh.getElementById(section.id);
      if (other) section.innerHTML = other.innerHTML;
    });
    refreshCharts(); // swapped-in rows bring empty sparklines
  } catch (e) { /* the next tick tries again */ }
}

document.addEventListener("DOMContentLoaded", () => {
  const interval = Number(document.body.dataset.intervalMs) || 5000;
  refreshCharts();
  setInterval(refreshCharts, interval);
  setInterval(refreshTables, Math.max(interval * 2, 10000));
});
