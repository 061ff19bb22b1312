"use strict";
// The live page's script, served as /page.js (no inline script: the CSP is
// default-src 'self', so an injected inline script cannot run).
const $ = (id) => document.getElementById(id);
let token = localStorage.getItem("fusiond-token") || "";
let lastFaces = null;
const history = { fps: [], latency: [] };
const HISTORY = 120;

// Every control goes through POST /api/<feature>: the same commands as
// MQTT's <feature>/set, with the payload's own Content-Type (a photo's
// image type, else application/octet-stream: never one a cross-site form
// could send). A 401 asks once for the bearer token.
async function send(feature, body, asked) {
  const kind = (body instanceof Blob && body.type) ? body.type : "application/octet-stream";
  const headers = token ? { Authorization: "Bearer " + token, "Content-Type": kind } : { "Content-Type": kind };
  const r = await fetch("/api/" + feature, { method: "POST", body: body, headers: headers });
  if (r.status === 401 && !asked) {
    token = prompt("This box needs its HTTP token (http.token_file):") || "";
    localStorage.setItem("fusiond-token", token);
    return send(feature, body, true);
  }
  const answer = await r.json().catch(() => ({}));
  $("message").textContent = r.ok ? "" : feature + ": " + (answer.reason || answer.error || ("HTTP " + r.status));
  refresh();
  return r.ok;
}

function options(select, values, current) {
  if (select.dataset.values !== values.join()) {
    select.replaceChildren(...values.map((v) => new Option(v, v)));
    select.dataset.values = values.join();
  }
  if (document.activeElement !== select && current !== undefined) select.value = current;
}

// A control shows the applied state unless the user is on it.
function show(id, value) {
  const el = $(id);
  if (value === undefined || document.activeElement === el) return;
  if (el.type === "checkbox") el.checked = value === "ON";
  else el.value = value;
}

function item(text, buttons) {
  const li = document.createElement("li");
  const span = document.createElement("span");
  span.textContent = text;
  li.append(span, ...buttons);
  return li;
}

function button(label, title, onclick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.title = title;
  b.addEventListener("click", onclick);
  return b;
}

function showBank(names, active) {
  const key = names.join() + "|" + active;
  if ($("bank").dataset.key === key) return;
  $("bank").dataset.key = key;
  const thumb = (n) => {
    const img = document.createElement("img");
    img.className = "thumb";
    img.alt = "";
    img.src = "/api/bank/" + encodeURIComponent(n) + ".jpg?v=" + Date.now();
    img.addEventListener("error", () => img.remove());
    return img;
  };
  $("bank").replaceChildren(...names.map((n) => item(n + (n === active ? " (in use)" : ""), [
    thumb(n),
    button("use", "swap in " + n, () => send("source", n)),
    button("remove", "remove " + n + " from the bank", () => send("forget", n)),
  ])));
  if (!names.length) $("bank").replaceChildren(item("empty: choose a photo with a name above", []));
}

function showEvent(e) {
  const when = new Date(e.at_ms).toLocaleTimeString();
  const p = (typeof e.payload === "object" && e.payload !== null) ? { ...e.payload } : { message: String(e.payload) };
  const name = p.event || p.command || e.kind;
  delete p.event;
  delete p.command;
  const what = Object.entries(p).map(([k, v]) => k + " " + (typeof v === "object" ? JSON.stringify(v) : v)).join(", ");
  const li = document.createElement("li");
  li.className = e.kind;
  li.dataset.seq = e.seq;
  li.textContent = when + "  " + (e.kind === "error" ? "refused " : "") + name + (what ? ": " + what : "");
  $("events").prepend(li);
  while ($("events").children.length > 50) $("events").lastChild.remove();
}

function spark(canvas, values) {
  const g = canvas.getContext("2d");
  g.clearRect(0, 0, canvas.width, canvas.height);
  const shown = values.filter((v) => v !== null);
  if (shown.length < 2) return;
  const top = Math.max(...shown) * 1.1 || 1;
  g.strokeStyle = "#8cf";
  g.lineWidth = 1.5;
  g.beginPath();
  values.forEach((v, i) => {
    if (v === null) return;
    const x = (i / (HISTORY - 1)) * canvas.width;
    const y = canvas.height - (v / top) * (canvas.height - 4) - 2;
    if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
  });
  g.stroke();
  g.fillStyle = "#aaa";
  g.fillText(top.toFixed(0), 2, 10);
}

function remember(name, value) {
  history[name].push(value === undefined ? null : value);
  if (history[name].length > HISTORY) history[name].shift();
}

async function refresh() {
  let s;
  try { s = await (await fetch("/api/state")).json(); } catch (e) { $("available").textContent = "unreachable"; return; }
  $("available").textContent = s.available;
  $("available").className = s.available === "online" ? "online" : "offline";
  $("tier").textContent = s.tier || "–";
  $("fps").textContent = s.fps === null ? "–" : s.fps.toFixed(1);
  $("latency").textContent = s.latency_ms ? s.latency_ms.p50_ms.toFixed(0) : "–";
  $("faces").textContent = s.faces;
  $("health").textContent = s.health.reason ? s.health.status + ": " + s.health.reason : s.health.status;
  $("health").className = s.health.reason ? "offline" : "online";
  const models = s.models.map((m) => item(m.name + " (" + (m.file_bytes / 1e6).toFixed(1) + " MB, " +
    m.placement.engine + " on " + (m.placement.providers.join(", ") || "cpu") + ")", []));
  if ($("models").dataset.key !== JSON.stringify(s.models)) {
    $("models").dataset.key = JSON.stringify(s.models);
    $("models").replaceChildren(...models);
  }
  const st = s.states;
  show("enabled", st.enabled);
  show("blend", st.blend);
  show("color_transfer", st.color_transfer);
  show("mouth_mask", st.mouth_mask);
  show("mask_blur", st.mask_blur);
  show("mask_padding", st.mask_padding);
  show("reference_distance", st.reference_distance);
  show("map", st.map === "none" ? "" : st.map);
  options($("selector"), s.choices.selector, st.selector);
  options($("quality"), s.choices.quality, st.quality);
  options($("face_order"), s.choices.face_order, st.face_order);
  let active = "";
  try { active = JSON.parse(st.source || "{}").active || ""; } catch (e) { active = ""; }
  showBank(s.bank, active);
  const shown = new Set([...$("events").children].map((li) => li.dataset.seq));
  s.events.filter((e) => !shown.has(String(e.seq))).forEach(showEvent);
  remember("fps", s.fps === null ? null : s.fps);
  remember("latency", s.latency_ms ? s.latency_ms.p50_ms : null);
  spark($("fps-chart"), history.fps);
  spark($("latency-chart"), history.latency);
}

// The faces overlay: boxes, track ids and which face is swapped, from the
// `faces` server-sent events, scaled from the frame to the image as shown.
function drawOverlay() {
  const canvas = $("overlay");
  const live = $("live");
  const g = canvas.getContext("2d");
  canvas.width = live.clientWidth;
  canvas.height = live.clientHeight;
  g.clearRect(0, 0, canvas.width, canvas.height);
  canvas.dataset.drawn = "0";
  if (!$("show-overlay").checked || !lastFaces || !live.naturalWidth) return;
  const k = canvas.width / live.naturalWidth;
  g.font = "13px system-ui, sans-serif";
  g.lineWidth = 2;
  for (const f of lastFaces.faces) {
    const [x1, y1, x2, y2] = f.box.map((v) => v * k);
    g.strokeStyle = f.swapped ? "#7e7" : (f.fading ? "#fc6" : "#f77");
    g.strokeRect(x1, y1, x2 - x1, y2 - y1);
    g.fillStyle = g.strokeStyle;
    g.fillText("#" + f.id + (f.swapped ? " swapped" : f.fading ? " fading" : ""), x1 + 2, Math.max(12, y1 - 4));
  }
  canvas.dataset.drawn = String(lastFaces.faces.length);
  canvas.dataset.seq = String(lastFaces.seq);
  canvas.dataset.ids = lastFaces.faces.map((f) => f.id + (f.swapped ? "s" : "")).join(",");
}

function listen() {
  const events = new EventSource("/api/events");
  events.addEventListener("faces", (m) => { lastFaces = JSON.parse(m.data); drawOverlay(); });
  const logged = (m) => {
    const e = JSON.parse(m.data);
    if (![...$("events").children].some((li) => li.dataset.seq === String(e.seq))) showEvent(e);
  };
  events.addEventListener("event", logged);
  events.addEventListener("error", (m) => { if (m.data) logged(m); });
}

$("enabled").addEventListener("change", (e) => send("enabled", e.target.checked ? "ON" : "OFF"));
$("mouth_mask").addEventListener("change", (e) => send("mouth_mask", e.target.checked ? "ON" : "OFF"));
for (const id of ["blend", "selector", "quality", "face_order", "color_transfer", "mask_blur", "reference_distance"]) {
  $(id).addEventListener("change", (e) => send(id, e.target.value));
}
$("mask_padding").addEventListener("change", (e) => send("mask_padding", e.target.value));
$("map-apply").addEventListener("click", () => send("map", $("map").value.trim() || "none"));
$("source").addEventListener("change", async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  $("preview").src = URL.createObjectURL(file);
  const name = $("bank-name").value.trim();
  const bytes = await file.arrayBuffer();
  // `name\n<image>` saves the face in the bank under `name` and uses it.
  const body = name ? new Blob([name + "\n", bytes], { type: "application/octet-stream" }) : new Blob([bytes], { type: file.type });
  send("source", body);
});
$("show-overlay").addEventListener("change", drawOverlay);
window.addEventListener("resize", drawOverlay);
// A stream that ends (the daemon restarted) is opened again.
$("live").addEventListener("error", () => setTimeout(() => { $("live").src = "/stream.mjpeg?t=" + Date.now(); }, 1000));
$("controls").addEventListener("submit", (e) => e.preventDefault());
listen();
refresh();
setInterval(refresh, 1000);
