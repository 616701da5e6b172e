"""Screenshots of the pages for the README (headless Chromium + Selenium, as in tests/test_e2e_browser.py).

    DPMIX_DATA_DIR=$(mktemp -d) .venv/bin/streamlit run app.py --server.port 8765 --server.headless true &
    .venv/bin/python docs/img/make_screenshots.py http://127.0.0.1:8765 docs/img

Launch dp-pca-quick on Train & trade-offs first for a results chart there.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys


def _driver(width: int, height: int) -> webdriver.Chrome:
    opts = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    opts.add_argument(f"--window-size={width},{height}")
    opts.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


def _settle(d: webdriver.Chrome, seconds: float = 60.0) -> None:
    """Wait until no rerun is running and no curve is still being computed."""
    time.sleep(2)
    deadline = time.time() + seconds
    while time.time() < deadline:
        busy = d.find_elements(By.CSS_SELECTOR, "[data-testid=stStatusWidget]") or "Computing ε along" in d.page_source
        if not busy:
            break
        time.sleep(0.5)
    time.sleep(1.5)


def _type(d: webdriver.Chrome, label: str, text: str) -> None:
    box = d.find_element(By.XPATH, f"//input[@aria-label='{label}']")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(text, Keys.ENTER)


def main() -> None:
    url, out = sys.argv[1], Path(sys.argv[2])
    d = _driver(1400, 2000)
    try:
        shots = [("privacy_accountant.png", "/", None), ("mixed_samples.png", "/mixed_samples", None)]
        shots += [("train_tradeoffs.png", "/train_tradeoffs", None), ("privacy_audit.png", "/privacy_audit", None)]
        shots += [
            ("privacy_accountant_invalid.png", "/", ("T — synthetic points released", "0")),
            ("mixed_samples_invalid.png", "/mixed_samples", ("δ", "-0.1")),
        ]
        for name, path, edit in shots:
            d.get(url + path)
            _settle(d)
            if edit is not None:
                _type(d, *edit)
                _settle(d)
            d.save_screenshot(str(out / name))
    finally:
        d.quit()
    d = _driver(1400, 1000)  # presentation mode: one screen per chart, its settings under it
    try:
        d.get(url + "/?present=1")
        _settle(d, 120)
        deadline = time.time() + 120  # the curve is computed in the background: wait for it on a busy machine
        while not d.find_elements(By.CSS_SELECTOR, "[data-testid=stPlotlyChart]") and time.time() < deadline:
            time.sleep(1)
        chart = d.find_element(By.CSS_SELECTOR, "[data-testid=stPlotlyChart]")
        d.execute_script("arguments[0].scrollIntoView({block: 'start'});", chart)
        time.sleep(1.5)
        d.save_screenshot(str(out / "presentation_mode.png"))
    finally:
        d.quit()


if __name__ == "__main__":
    main()
