"""Screenshots of the pages for the README (headless Chromium + Selenium, as in tests/test_e2e_browser.py).

    DPMIX_DATA_DIR=$(mktemp -d) .venv/bin/streamlit run app.py --server.port 8765 --server.headless true &
    .venv/bin/python docs/img/make_screenshots.py http://127.0.0.1:8765 docs/img [NAME.png ...]

``train_tradeoffs.png`` shows dp-pca-quick's results: run ``python -m dpmix_core sweep preset:dp-pca-quick
--dataset embedded`` into the app's store first. Names after the folder retake only
those screenshots. ``train_tradeoffs_certified_eps.png`` needs ``python -m dpmix_core sweep
preset:dpfmix-table3-quick --dataset embedded`` and ``sweep preset:dpfmix-table1-quick --dataset embedded --series
'Poisson / gdp-clt' 'uniform, Cx = Cy = 1 / rdp-wor'`` in the app's store (about 6 min on 2 cores) and is taken only
when asked. The four of one's own data (``train_tradeoffs_own_file.png``, ``privacy_accountant_card.png``,
``best_release.png``, ``mixed_samples_private_ranges.png``) upload a small 3-class CSV made here, and a release of it
made by ``synthesize``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
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


def _radio(d: webdriver.Chrome, text: str) -> None:
    next(e for e in d.find_elements(By.CSS_SELECTOR, "[data-testid=stRadio] label") if e.text.strip() == text).click()
    _settle(d)


def _pick(d: webdriver.Chrome, label: str, option: str) -> None:
    box = next(b for b in d.find_elements(By.CSS_SELECTOR, "[data-testid=stSelectbox]") if b.text.startswith(label))
    box.find_element(By.CSS_SELECTOR, "button[aria-label=Open]").click()
    time.sleep(1)
    next(o for o in d.find_elements(By.CSS_SELECTOR, "[role=option]") if option in o.text).click()
    _settle(d)


def _click_label(d: webdriver.Chrome, text: str) -> None:
    """Click the checkbox or toggle whose label reads ``text``."""
    next(e for e in d.find_elements(By.CSS_SELECTOR, "label") if e.text.strip() == text).click()
    _settle(d)


def _upload(d: webdriver.Chrome, path: Path) -> None:
    d.find_element(By.CSS_SELECTOR, "input[type=file]").send_keys(str(path))
    time.sleep(3)
    _settle(d, 120)


def _pets(path: Path, n: int) -> Path:
    """A 3-class CSV of ``n`` records (class names in a 'species' column, 4 float features in [-5, 10])."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, n)
    x = np.clip(rng.normal(size=(n, 4)) + 1.5 * y[:, None], -5, 10)
    names = np.array(["bird", "cat", "dog"])[y]
    rows = [f"{a:.3f},{b:.3f},{s},{c:.3f},{e:.3f}" for (a, b, c, e), s in zip(x, names, strict=True)]
    path.write_text("height,weight,species,age,speed\n" + "\n".join(rows) + "\n")
    return path


def _own_files(folder: Path) -> tuple[Path, Path]:
    """A 3-class CSV of 600 records (:func:`_pets`) and a release of it."""
    csv = _pets(folder / "pets.csv", 600)
    release = folder / "pets_release.npz"
    args = ["synthesize", "--data-file", str(csv), "--label-column", "species", "--feature-range", "-5,10"]
    args += ["--mechanism", "class-centric", "--l", "4", "--T", "600", "--target-epsilon", "3", "--out", str(release)]
    subprocess.run([sys.executable, "-m", "dpmix_core", *args], check=True, capture_output=True)
    return csv, release


def _upload_pets(d: webdriver.Chrome, csv: Path) -> None:
    """A pets CSV uploaded, its label column picked and its public bounds (-5, 10) typed."""
    _upload(d, csv)
    _pick(d, "Label column", "species")
    for label, text in (("Public lower bound of your features", "-5"), ("Public upper bound of your features", "10")):
        _type(d, label, text)
        _settle(d)


def _own_data_shots(url: str, out: Path, wanted: set[str]) -> None:
    """Train & trade-offs on one's own CSV, and the Privacy accountant opened on a release's card."""
    with tempfile.TemporaryDirectory() as tmp:
        csv, release = _own_files(Path(tmp))
        d = _driver(1400, 1700)
        try:
            if "train_tradeoffs_own_file.png" in wanted:
                d.get(url + "/train_tradeoffs")
                _settle(d)
                _radio(d, "Build your own")
                _pick(d, "Training data", "Your own file")
                _upload_pets(d, csv)
                d.save_screenshot(str(out / "train_tradeoffs_own_file.png"))
            if "privacy_accountant_card.png" in wanted:
                d.get(url + "/")
                _settle(d)
                next(
                    e for e in d.find_elements(By.CSS_SELECTOR, "[data-testid=stExpander] summary") if "card" in e.text
                ).click()
                _upload(d, release)
                d.save_screenshot(str(out / "privacy_accountant_card.png"))
            if "mixed_samples_private_ranges.png" in wanted:  # loose bounds (-50, 100), narrowed privately
                d.get(url + "/mixed_samples")
                _settle(d)
                _pick(d, "Mechanism", "dpmix")
                next(
                    e
                    for e in d.find_elements(By.CSS_SELECTOR, "[data-testid=stExpander] summary")
                    if "own data" in e.text
                ).click()
                _upload(d, _pets(Path(tmp) / "pets_3000.csv", 3000))
                _pick(d, "Label column", "species")
                for label, text in (
                    ("Public lower bound of your features", "-50"),
                    ("Public upper bound of your features", "100"),
                ):
                    _type(d, label, text)
                    _settle(d)
                _click_label(d, "Calibrate σ to a target ε")
                _type(d, "Target ε", "4")
                _settle(d)
                _click_label(d, "Narrow the bounds privately")
                _settle(d, 120)
                d.save_screenshot(str(out / "mixed_samples_private_ranges.png"))
            if "best_release.png" in wanted:  # 3,000 records: at 600 no candidate learns at eps 4
                d.get(url + "/best_release")
                _settle(d)
                _pick(d, "Data", "Your own file")
                _upload_pets(d, _pets(Path(tmp) / "pets_3000.csv", 3000))
                next(b for b in d.find_elements(By.CSS_SELECTOR, "button") if "in the background" in b.text).click()
                deadline = time.time() + 180
                while not d.find_elements(By.CSS_SELECTOR, "[data-testid=stMetric]") and time.time() < deadline:
                    time.sleep(1)
                _settle(d)
                d.save_screenshot(str(out / "best_release.png"))
        finally:
            d.quit()


OWN_DATA_SHOTS = {
    "train_tradeoffs_own_file.png",
    "privacy_accountant_card.png",
    "best_release.png",
    "mixed_samples_private_ranges.png",
}


CERTIFIED_SWEEP = "dpfmix-table3-quick@embedded"
BESIDE_SWEEP = "dpfmix-table1-quick@embedded"  # pixel mixing beside CERTIFIED_SWEEP's feature mixing


def _certified_shot(url: str, out: Path) -> None:
    """Train & trade-offs' results of CERTIFIED_SWEEP drawn against each point's certified ε with BESIDE_SWEEP beside
    it, cropped to the panel."""
    from PIL import Image

    d = _driver(1400, 2600)
    try:
        d.get(url + "/train_tradeoffs")
        _settle(d, 120)
        _pick(d, "Show results of", CERTIFIED_SWEEP)
        _radio(d, "certified ε")
        beside = next(b for b in d.find_elements(By.CSS_SELECTOR, "[data-testid=stMultiSelect]") if "Beside" in b.text)
        beside.click()
        time.sleep(1)
        next(o for o in d.find_elements(By.CSS_SELECTOR, "[role=option]") if BESIDE_SWEEP in o.text).click()
        _settle(d)
        d.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
        heading = next(e for e in d.find_elements(By.CSS_SELECTOR, "h1, h2, h3") if e.text.strip() == "Results")
        d.execute_script("arguments[0].scrollIntoView({block: 'start'});", heading)
        time.sleep(1.5)
        top = d.execute_script("return arguments[0].getBoundingClientRect().top;", heading)
        chart = d.find_elements(By.CSS_SELECTOR, "[data-testid=stPlotlyChart]")[-1]
        box = d.execute_script(
            "const r = arguments[0].getBoundingClientRect(); return [r.left, r.right, r.bottom];", chart
        )
        left, right, bottom = box[0] - 10, box[1] + 10, box[2] + 180  # the buttons and caption under the chart
        shot = out / "train_tradeoffs_certified_eps.png"
        d.save_screenshot(str(shot))
        with Image.open(shot) as image:
            image.crop((int(left), int(top) - 10, int(right), int(bottom))).save(shot, optimize=True)
    finally:
        d.quit()


def main() -> None:
    url, out = sys.argv[1], Path(sys.argv[2])
    wanted = set(sys.argv[3:])
    if "train_tradeoffs_certified_eps.png" in wanted:
        _certified_shot(url, out)
        wanted.discard("train_tradeoffs_certified_eps.png")
        if not wanted:
            return
    _own_data_shots(url, out, wanted & OWN_DATA_SHOTS if wanted else OWN_DATA_SHOTS)
    if wanted and not wanted - OWN_DATA_SHOTS:
        return
    d = _driver(1400, 2000)
    try:
        shots = [("privacy_accountant.png", "/", None), ("mixed_samples.png", "/mixed_samples", None)]
        shots += [("train_tradeoffs.png", "/train_tradeoffs", None), ("privacy_audit.png", "/privacy_audit", None)]
        shots += [("dp_foundations.png", "/dp_foundations", None)]
        shots += [
            ("privacy_accountant_invalid.png", "/", ("T — synthetic points released", "0")),
            ("mixed_samples_invalid.png", "/mixed_samples", ("δ", "-0.1")),
        ]
        for name, path, edit in shots:
            if wanted and name not in wanted:
                continue
            d.get(url + path)
            _settle(d)
            if name == "train_tradeoffs.png":  # the DP-PCA curve, whichever sweep ran last
                _pick(d, "Show results of", "dp-pca-quick@")
            if edit is not None:
                _type(d, *edit)
                _settle(d)
            d.save_screenshot(str(out / name))
    finally:
        d.quit()
    if wanted and "presentation_mode.png" not in wanted:
        return
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
