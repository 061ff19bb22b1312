"use strict";
// The live page's script, served as /page.js (no inline script: the CSP is
// default-src 'self', so an injected inline script cannot run).
const $ = (id) => document.getElementById(id);
let token = localStorage.getItem("fusiond-token") || "";

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
  $("message").textContent = r.ok ? "" : (answer.reason || answer.error || ("HTTP " + r.status));
  refresh();
}

function options(select, values, current) {
  if (select.dataset.values !== values.join()) {
    select.replaceChildren(...values.map((v) => new Option(v, v)));
    select.dataset.values = values.join();
  }
  if (document.activeElement !== select && current !== undefined) select.value = current;
}

async function refresh() {
  let s;
  try { s = await (await fetch("/api/state")).json(); } catch (e) { $("available").textContent = "unreachable"; return; }
  $("available").textContent = s.available;
  $("available").className = s.available === "online" ? "online" : "offline";
  $("tier").textContent = s.tier || "–";
  $("fps").textContent = s.fps === null ? "–" : s.fps.toFixed(1);
  $("faces").textContent = s.faces;
  $("enabled").checked = s.states.enabled === "ON";
  if (document.activeElement !== $("blend") && s.states.blend !== undefined) $("blend").value = s.states.blend;
  options($("selector"), s.choices.selector, s.states.selector);
  options($("quality"), s.choices.quality, s.states.quality);
}

$("enabled").addEventListener("change", (e) => send("enabled", e.target.checked ? "ON" : "OFF"));
$("blend").addEventListener("change", (e) => send("blend", e.target.value));
$("selector").addEventListener("change", (e) => send("selector", e.target.value));
$("quality").addEventListener("change", (e) => send("quality", e.target.value));
$("source").addEventListener("change", async (e) => {
  const file = e.target.files[0];
  if (file) send("source", await file.arrayBuffer());
});
// A stream that ends (the daemon restarted) is opened again.
$("live").addEventListener("error", () => setTimeout(() => { $("live").src = "/stream.mjpeg?t=" + Date.now(); }, 1000));
$("controls").addEventListener("submit", (e) => e.preventDefault());
refresh();
setInterval(refresh, 1000);
