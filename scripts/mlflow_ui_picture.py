"""The picture of MLflow's UI in docs/trackers.md (docs/mlflow_ui.png): a small sweep sent to MLflow, and its
experiment's runs in ``mlflow ui`` as a person looks at them there: the sweep's comparison run opened to show its runs,
the columns picked for the mixer, the seed, the status, the configuration and the verdict.

Needs, besides attnexp (its ``attnexp`` command on PATH, or ``--attnexp``):
- the full ``mlflow`` package for ``mlflow ui`` (attnexp's extra installs mlflow-skinny, which has no server);
- Playwright's Python package, which clicks through the page as a person would (``playwright``; its own browser
  download is not needed);
- Chromium (Debian: ``apt-get install -y chromium``, /usr/bin/chromium).
For instance, in a virtual environment of their own::

    apt-get install -y chromium
    python -m venv /tmp/mlflowui && /tmp/mlflowui/bin/pip install mlflow playwright
    /tmp/mlflowui/bin/python scripts/mlflow_ui_picture.py --out docs/mlflow_ui.png

The sweep runs in a new temporary folder (its overrides: the arguments after the options, the smoke budget on
digits by default), ``mlflow ui`` serves its store on 127.0.0.1 and is stopped after."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

SWEEP = ["--multirun", "model=dot,euclid", "seed=0,1", "logger=mlflow", "callbacks.progress_bar.refresh_rate=0"]
SMOKE = ["+budget=smoke", "data=digits"]
COLUMNS_OFF = ["Dataset", "Source", "Models"]  # the defaults a sweep of attnexp leaves empty
COLUMNS_ON = ["test/acc", "attnexp.mixer", "attnexp.seed", "attnexp.status", "attnexp.configuration"]
COLUMNS_ON += ["verdict/test/acc"]
BROWSER_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sweep(attnexp: str, folder: Path, overrides: list[str]) -> tuple[Path, str]:
    """The sweep run in ``folder``: its MLflow store and the experiment its runs are in (from a run's record)."""
    subprocess.run([attnexp, *SWEEP, *overrides], cwd=folder, check=True)
    record = json.loads(next((folder / "outputs" / "runs").glob("*/*/metrics.json")).read_text())
    return folder / "outputs" / "mlflow.db", str(record["trackers"]["mlflow"]["experiment_id"])


def serve(mlflow: list[str], store: Path, port: int, log: Path) -> subprocess.Popen:
    """``mlflow ui`` on the store, once it answers (its first start migrates the store: seconds)."""
    where = ["--backend-store-uri", f"sqlite:///{store}", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("w") as out:
        server = subprocess.Popen(
            [*mlflow, "ui", *where], cwd=store.parent, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
                if answer.status == 200:
                    return server
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                stop(server)
                sys.exit(f"mlflow ui did not start:\n{log.read_text()[-2000:]}")
            time.sleep(1)


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def picture(url: str, chromium: str, out: Path) -> None:
    """The experiment's runs page, as a person sets it up: the assistant panel and the sidebar closed, the columns
    picked, the comparison run opened, the names and verdicts widened to be read."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=BROWSER_FLAGS)
        page = browser.new_page(viewport={"width": 1920, "height": 440})
        page.goto(url)
        page.get_by_text("comparison outputs").first.wait_for(timeout=120_000)
        if page.get_by_role("button", name="Close").count():
            page.get_by_role("button", name="Close").first.click()
        page.get_by_role("button", name="Toggle sidebar").click()
        page.get_by_role("button", name="Columns").click()
        for name in [*COLUMNS_OFF, *COLUMNS_ON]:
            page.get_by_placeholder("Search columns").fill(name)
            page.get_by_role("dialog").get_by_text(name, exact=True).click()
        page.keyboard.press("Escape")
        page.locator("[role=row]").filter(has_text="comparison outputs").locator("button").first.click()
        for header in ("Run Name", "verdict/test/acc", "attnexp.configuration"):
            cell = page.locator(".ag-header-cell").filter(has_text=header).first
            cell.locator(".ag-header-cell-resize").dblclick()  # the column as wide as what it holds
        page.wait_for_timeout(1000)
        page.screenshot(path=str(out))
        browser.close()


def shrink(path: Path) -> None:
    """The PNG in 256 colours: a screenshot of a page keeps its look, at a fraction of the size."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(256)
    small.save(path, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", default=SMOKE, help="the sweep's budget and data (%(default)s)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "mlflow_ui.png")
    parser.add_argument("--attnexp", default=shutil.which("attnexp") or "attnexp", help="the attnexp command")
    parser.add_argument("--mlflow", default=f"{sys.executable} -m mlflow", help="the command of the full mlflow")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mlflow-ui-") as tmp:
        store, experiment = sweep(args.attnexp, Path(tmp), args.overrides)
        port = free_port()
        server = serve(args.mlflow.split(), store, port, Path(tmp) / "mlflow-ui.log")
        try:
            picture(f"http://127.0.0.1:{port}/#/experiments/{experiment}/runs", args.chromium, args.out)
        finally:
            stop(server)
    shrink(args.out)
    print(f"{args.out}: {args.out.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
