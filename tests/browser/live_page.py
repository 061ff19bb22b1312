"""Drives fusiond's live page in headless Chromium (Debian's chromium and
chromium-driver) through Selenium. Called by the Rust test
`browser::the_live_page_moves_and_its_switch_changes_the_state` with the
page's address; prints one JSON line with what it saw.

usage: live_page.py URL
"""
import json
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,900"):
        options.add_argument(arg)
    # The driver is Debian's, so Selenium Manager never goes to the network.
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def main(url):
    driver = browser()
    try:
        driver.get(url)
        wait = WebDriverWait(driver, 60)
        live = driver.find_element(By.ID, "live")
        wait.until(lambda d: d.execute_script("return arguments[0].naturalWidth", live) > 0)
        wait.until(lambda d: d.find_element(By.ID, "available").text == "online")
        size = driver.execute_script("return [arguments[0].naturalWidth, arguments[0].naturalHeight]", live)
        first = live.screenshot_as_png
        time.sleep(1.5)
        second = live.screenshot_as_png
        switch = driver.find_element(By.ID, "enabled")
        was = switch.is_selected()
        switch.click()
        # The page posts the command, then reads /api/state back.
        wait.until(lambda d: d.find_element(By.ID, "enabled").is_selected() != was)
        seen = {
            "natural_size": size,
            "screenshots_differ": first != second,
            "screenshot_bytes": [len(first), len(second)],
            "enabled_before": was,
            "tier": driver.find_element(By.ID, "tier").text,
            "message": driver.find_element(By.ID, "message").text,
        }
        print(json.dumps(seen))
    finally:
        driver.quit()


if __name__ == "__main__":
    main(sys.argv[1])
