// Hand-written SVG line charts: no library, redrawn whole by calling
// lineChart(el, ...) again with the new points (a few hundred points at most,
// so redrawing is cheaper than keeping state in sync).
//
//   lineChart(el, {series: [{name, points: [[tMillis, value], ...]}], unit: "msg/s",
//                  windowMs: 600000})   // the x axis: the last windowMs up to now

const NS = "http://www.w3.org/2000/svg";
const H = 200;
const PAD = { left: 48, right: 8, top: 8, bottom: 20 };

function svg(tag, attrs, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// 1, 2 or 5 times a power of ten, at least `v`: round axis labels.
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= v);
}

function label(v) {
  return v >= 1000 ? `${+(v / 1000).toFixed(1)}k` : `${+v.toFixed(2)}`;
}

export function lineChart(el, { series, unit = "", windowMs = 600_000, now = Date.now() }) {
  // drawn at the element's width in pixels, so text is never stretched
  const W = Math.max(320, el.clientWidth || 640);
  const t0 = now - windowMs;
  const max = niceMax(Math.max(0, ...series.flatMap((s) => s.points.filter(([t]) => t >= t0).map(([, v]) => v))));
  const x = (t) => PAD.left + ((t - t0) / windowMs) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / max) * (H - PAD.top - PAD.bottom);

  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img" });
  root.append(svg("title", {}, `${series.map((s) => s.name).join(", ")} (${unit}), last ${windowMs / 60000} minutes`));
  for (const frac of [0, 0.5, 1]) {
    const v = max * frac;
    root.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: "grid" }));
    root.append(svg("text", { x: PAD.left - 4, y: y(v) + 4, class: "axis", "text-anchor": "end" }, label(v)));
  }
  root.append(svg("text", { x: PAD.left, y: H - 4, class: "axis" }, `-${windowMs / 60000} min`));
  root.append(svg("text", { x: W - PAD.right, y: H - 4, class: "axis", "text-anchor": "end" }, "now"));
  series.forEach((s, i) => {
    const pts = s.points.filter(([t]) => t >= t0);
    if (!pts.length) return;
    const d = pts.map(([t, v], j) => `${j ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    root.append(svg("path", { d, class: `line s${i % 8}` }));
  });

  // The legend says each series' latest value in words: readable without the
  // picture, and what tests read.
  const legend = document.createElement("ul");
  legend.className = "legend";
  series.forEach((s, i) => {
    const last = s.points.length ? s.points[s.points.length - 1][1] : 0;
    const item = document.createElement("li");
    item.dataset.series = s.name;
    const swatch = document.createElement("span");
    swatch.className = `swatch s${i % 8}`;
    item.append(swatch, `${s.name} ${label(last)} ${unit}`);
    legend.append(item);
  });
  el.replaceChildren(root, legend);
}
