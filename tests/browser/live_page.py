"""Drives fusiond's live page in headless Chromium (Debian's chromium and
chromium-driver) through Selenium. Called by the Rust test
`browser::the_live_page_moves_and_every_control_round_trips` with the
page's address, a photo with a face and a folder for screenshots; prints
one JSON line with what it saw. Each control is changed as a user would
(click, choose, type, pick a file, Tab and Space) and then read back from
/api/state, which is what the Rust side checks.

usage: live_page.py URL PHOTO SCREENSHOT_DIR
"""
import json
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    # The driver is Debian's, so Selenium Manager never goes to the network.
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


STATE = """
const done = arguments[arguments.length - 1];
fetch("/api/state").then((r) => r.json()).then(done, (e) => done({error: String(e)}));
"""

# Elements that overflow the viewport, and pairs of visible controls and
# labels whose boxes overlap.
LAYOUT = """
const width = document.documentElement.clientWidth;
const out = [];
const boxes = [];
for (const el of document.querySelectorAll("header > *, main > *, fieldset > *, form > p, #bank li, .charts figure")) {
  const r = el.getBoundingClientRect();
  if (r.width === 0 || r.height === 0) continue;
  if (r.left < -1 || r.right > width + 1) out.push((el.id || el.tagName) + " " + Math.round(r.left) + ".." + Math.round(r.right));
  if (el.parentElement.tagName === "FIELDSET" && el.tagName !== "LEGEND") boxes.push([el.id || el.textContent.slice(0, 20), r]);
}
const overlaps = [];
for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
  const [a, b] = [boxes[i][1], boxes[j][1]];
  if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
    overlaps.push(boxes[i][0] + " / " + boxes[j][0]);
}
return {width: width, scroll_width: document.documentElement.scrollWidth, outside: out, overlaps: overlaps};
"""


class Page:
    def __init__(self, driver):
        self.d = driver
        self.wait = WebDriverWait(driver, 60)

    def el(self, id):
        return self.d.find_element(By.ID, id)

    def state(self):
        return self.d.execute_async_script(STATE)

    def until_state(self, feature, want):
        """Waits until /api/state shows `want` for `feature`; returns what it showed last."""
        seen = {}

        def applied(_):
            seen["value"] = self.state()["states"].get(feature)
            return seen["value"] == want

        try:
            WebDriverWait(self.d, 30, poll_frequency=0.2).until(applied)
        except Exception:
            pass
        return seen.get("value")

    def set_range(self, id, value):
        self.d.execute_script(
            "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('change'));", self.el(id), value)

    def type_into(self, id, text):
        """Replaces the box's text as a user would: select all, type, Tab."""
        box = self.el(id)
        box.click()
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(text)
        box.send_keys(Keys.TAB)


def controls(p, photo):
    seen = {}
    Select(p.el("selector")).select_by_value("many")
    seen["selector"] = p.until_state("selector", "many")
    Select(p.el("face_order")).select_by_value("left-right")
    seen["face_order"] = p.until_state("face_order", "left-right")
    Select(p.el("color_transfer")).select_by_value("rct")
    seen["color_transfer"] = p.until_state("color_transfer", "rct")
    p.set_range("blend", "63")
    seen["blend"] = p.until_state("blend", "63")
    p.set_range("mask_blur", "0.55")
    seen["mask_blur"] = p.until_state("mask_blur", "0.55")
    p.set_range("reference_distance", "0.7")
    seen["reference_distance"] = p.until_state("reference_distance", "0.7")
    p.type_into("mask_padding", "5,10,15,20")
    seen["mask_padding"] = p.until_state("mask_padding", "5,10,15,20")
    # The fast tier has no landmarker: the mouth mask is refused, and the
    # page says why.
    p.el("mouth_mask").click()
    p.wait.until(lambda d: "landmark" in p.el("message").text)
    seen["mouth_mask"] = p.until_state("mouth_mask", "OFF")
    seen["mouth_mask_message"] = p.el("message").text
    # A photo saved in the bank under a name: previewed, listed, used.
    p.el("bank-name").send_keys("alice")
    p.el("source").send_keys(photo)
    p.wait.until(lambda d: "alice" in p.el("bank").text)
    seen["preview_width"] = p.d.execute_script("return arguments[0].naturalWidth", p.el("preview"))
    seen["bank_after_add"] = p.state()["bank"]
    p.wait.until(lambda d: d.execute_script(
        "const t = document.querySelector('#bank img.thumb'); return t && t.complete && t.naturalWidth > 0"))
    seen["thumbnail_size"] = p.d.execute_script(
        "const t = document.querySelector('#bank img.thumb'); return [t.naturalWidth, t.naturalHeight]")
    p.type_into("map", "alice=alice")
    p.el("map-apply").click()
    seen["map"] = p.until_state("map", "alice=alice")
    p.d.find_element(By.XPATH, "//ul[@id='bank']//button[text()='use']").click()
    p.wait.until(lambda d: "(in use)" in p.el("bank").text)
    seen["source_active"] = json.loads(p.state()["states"]["source"])["active"]
    p.d.find_element(By.XPATH, "//ul[@id='bank']//button[text()='remove']").click()
    p.wait.until(lambda d: "alice" not in p.el("bank").text)
    seen["bank_after_remove"] = p.state()["bank"]
    Select(p.el("quality")).select_by_value("quality")
    seen["quality"] = p.until_state("quality", "quality")
    p.wait.until(lambda d: p.el("tier").text == "quality")
    seen["events_log"] = p.el("events").text
    return seen


def keyboard(p):
    """Tab from the page's start to the swap switch and press Space."""
    p.d.find_element(By.TAG_NAME, "body").click()
    was = p.el("enabled").is_selected()
    for _ in range(30):
        p.d.switch_to.active_element.send_keys(Keys.TAB)
        if p.d.switch_to.active_element.get_attribute("id") == "enabled":
            break
    reached = p.d.switch_to.active_element.get_attribute("id") == "enabled"
    if reached:
        p.d.switch_to.active_element.send_keys(Keys.SPACE)
    return {"reached_enabled_by_tab": reached, "enabled_after_space": p.until_state("enabled", "ON" if not was else "OFF")}


def overlay(p):
    p.el("show-overlay").click()
    canvas = p.el("overlay")
    p.wait.until(lambda d: int(canvas.get_attribute("data-drawn") or 0) > 0)
    return {"seq": int(canvas.get_attribute("data-seq")), "ids": canvas.get_attribute("data-ids"),
            "drawn": int(canvas.get_attribute("data-drawn"))}


def layout(p, width, shots):
    p.d.set_window_size(width, 900)
    time.sleep(1.0)
    found = p.d.execute_script(LAYOUT)
    p.d.save_screenshot(f"{shots}/page-{width}.png")
    return found


def main(url, photo, shots):
    driver = browser()
    try:
        driver.get(url)
        p = Page(driver)
        live = p.el("live")
        p.wait.until(lambda d: d.execute_script("return arguments[0].naturalWidth", live) > 0)
        p.wait.until(lambda d: p.el("available").text == "online")
        size = driver.execute_script("return [arguments[0].naturalWidth, arguments[0].naturalHeight]", live)
        first = live.screenshot_as_png
        time.sleep(1.5)
        second = live.screenshot_as_png
        switch = p.el("enabled")
        was = switch.is_selected()
        switch.click()
        # The page posts the command, then reads /api/state back.
        p.wait.until(lambda d: p.el("enabled").is_selected() != was)
        seen = {
            "natural_size": size,
            "screenshots_differ": first != second,
            "enabled_before": was,
            "enabled_after_click": p.until_state("enabled", "OFF"),
            "tier": p.el("tier").text,
        }
        seen["keyboard"] = keyboard(p)
        seen["overlay"] = overlay(p)
        seen["controls"] = controls(p, photo)
        seen["health"] = p.el("health").text
        seen["models"] = p.el("models").text
        seen["layout"] = {w: layout(p, w, shots) for w in (1280, 390)}
        print(json.dumps(seen))
    finally:
        driver.quit()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
