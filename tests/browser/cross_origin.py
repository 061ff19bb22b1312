"""A hostile web page against fusiond in headless Chromium (Debian's chromium
and chromium-driver, through Selenium). Called by the Rust test
`browser::a_page_from_another_origin_changes_nothing_and_reads_nothing` with
the daemon's address; prints one JSON line with what each attempt got.

1. A page served from another origin (a local server on another port) sends
   every command the ways a page may without asking: a `no-cors` fetch with
   a text body, a CORS fetch with a JSON body (preflighted), and a form
   posted into a hidden frame. It also tries to read the state and the
   snapshot (a CORS fetch, and an image drawn on a canvas).
2. DNS rebinding: the name `rebind.test` is mapped to 127.0.0.1 and the
   browser opens the daemon's state under that name.
3. The same fetches from the daemon's own origin (its live page) work.

usage: cross_origin.py DAEMON_URL
"""
import http.server
import json
import sys
import threading
from urllib.parse import urlsplit

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

# A valid payload for every command: each would change the state if taken.
COMMANDS = {
    "enabled": "OFF",
    "blend": "37",
    "quality": "quality",
    "selector": "many",
    "face_order": "left-right",
    "color_transfer": "rct",
    "mouth_mask": "ON",
    "map": "a=b",
    "frame_rate": "2",
    "mask_blur": "0.9",
    "mask_padding": "20",
    "reference_distance": "0.9",
    "forget": "nobody-in-the-bank",
    "source": "nobody-in-the-bank",
    "snapshot": "PRESS",
    "reload": "PRESS",
}

ATTACK = """
const [base, commands, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const results = {};
const attempt = async (name, f) => {
  try { results[name] = await f(); } catch (e) { results[name] = "failed: " + e.name; }
};
(async () => {
  for (const [feature, body] of Object.entries(commands)) {
    const url = base + "/api/" + feature;
    await attempt(feature + " no-cors", async () =>
      (await fetch(url, { method: "POST", mode: "no-cors", body })).type);
    await attempt(feature + " json", async () => (await fetch(url, {
      method: "POST", body, headers: { "Content-Type": "application/json" } })).status);
    await attempt(feature + " form", () => new Promise((resolve) => {
      const frame = document.createElement("iframe");
      frame.name = "f" + feature;
      document.body.appendChild(frame);
      const form = document.createElement("form");
      Object.assign(form, { method: "POST", action: url, target: frame.name, enctype: "text/plain" });
      const field = document.createElement("input");
      Object.assign(field, { name: body, value: "" });
      form.appendChild(field);
      document.body.appendChild(form);
      frame.onload = () => resolve("posted");
      form.submit();
      setTimeout(() => resolve("posted (no load)"), 3000);
    }));
  }
  await attempt("read state", async () => JSON.stringify(await (await fetch(base + "/api/state")).json()));
  await attempt("read snapshot", async () => (await (await fetch(base + "/snapshot.jpg")).blob()).size);
  await attempt("read snapshot pixels", () => new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => {
      const c = document.createElement("canvas");
      [c.width, c.height] = [img.width, img.height];
      const g = c.getContext("2d");
      g.drawImage(img, 0, 0);
      try { resolve(g.getImageData(0, 0, 1, 1).data.length); } catch (e) { reject(e); }
    };
    img.onerror = () => reject(new Error("load"));
    img.src = base + "/snapshot.jpg";
  }));
  done(results);
})();
"""


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<!doctype html><title>another site</title><body></body>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def browser(port):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                f"--host-resolver-rules=MAP rebind.test 127.0.0.1"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def main(daemon):
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    port = urlsplit(daemon).port
    driver = browser(port)
    driver.set_script_timeout(120)
    try:
        driver.get(f"http://localhost:{other.server_address[1]}/")
        seen = {"cross_origin": driver.execute_async_script(ATTACK, daemon, COMMANDS)}
        driver.get(f"http://rebind.test:{port}/api/state")
        seen["rebound_page"] = driver.find_element("tag name", "body").text
        driver.get(daemon + "/")
        own = {"blend": "41"}
        seen["own_origin"] = driver.execute_async_script(ATTACK, daemon, own)
        print(json.dumps(seen))
    finally:
        driver.quit()
        other.shutdown()


if __name__ == "__main__":
    main(sys.argv[1].rstrip("/"))
