// Lakelog console: live charts (SVG drawn here, no library) and live tables.
// Charts: every <svg class="chart" data-keys='[...]'> is redrawn from /api/series each
// interval. Tables: every [data-live] section is replaced by the same section of a fresh
// copy of the page. No build step; plain ES2017.
"use strict";

const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
const W = 640, H = 200, PAD_L = 76, PAD_B = 20, PAD_T = 8, PAD_R = 8;
const SVG = "http://www.w3.org/2000/svg";

function human(value, unit) {
  if (unit === "B/s") {
    const units = ["B/s", "KiB/s", "MiB/s", "GiB/s"];
    let i = 0;
    while (Math.abs(value) >= 1024 && i < units.length - 1) { value /= 1024; i++; }
    return value.toFixed(i ? 1 : 0) + " " + units[i];
  }
  const text = Math.abs(value) >= 100 || Number.isInteger(value) ? Math.round(value).toLocaleString("en") : value.toFixed(2);
  return unit ? text + " " + unit : text;
}

function compact(value, unit) {
  // Axis labels: short, so they fit left of the plot.
  if (unit === "B/s") return human(value, unit);
  const abs = Math.abs(value);
  const text = abs >= 1e9 ? (value / 1e9).toFixed(1) + "G" : abs >= 1e6 ? (value / 1e6).toFixed(1) + "M"
    : abs >= 1e4 ? (value / 1e3).toFixed(1) + "k" : abs >= 100 || Number.isInteger(value) ? String(Math.round(value)) : value.toFixed(2);
  return unit && unit.length <= 2 ? text + " " + unit : text;
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
  const top = Math.max(...all.map((p) => p[1]));
  const vmax = top > 0 ? top : 1;
  const x = (t) => PAD_L + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - PAD_L - PAD_R);
  const y = (v) => H - PAD_B - (v / vmax) * (H - PAD_B - PAD_T);
  for (const frac of [0, 0.5, 1]) {
    const v = vmax * frac;
    svg.appendChild(el("line", { x1: PAD_L, x2: W - PAD_R, y1: y(v), y2: y(v), class: "grid" }));
    svg.appendChild(el("text", { x: PAD_L - 4, y: y(v) + 4, "text-anchor": "end", class: "axis" }, compact(v, unit)));
  }
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
