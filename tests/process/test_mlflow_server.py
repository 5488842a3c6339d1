"""A run sent to a real MLflow tracking server over HTTP (``logger.mlflow.tracking_uri=http://...``): the server is a
process of its own on 127.0.0.1, started here on a free port and stopped after; the run, its tags and its artifacts
are read back through the server with MLflow's client. The server is mlflow-skinny's own ``mlflow server`` with the web
framework it runs on (Flask and flask-cors, in the test extra; the full mlflow package has them too)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from helpers import read_metrics, run_cli, run_dirs, user_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_run_lands_in_an_mlflow_server(tmp_path):
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed: pip install 'attnexp[mlflow]'")
    for module in ("flask", "flask_cors"):  # in the test extra
        pytest.importorskip(module, reason="mlflow server needs Flask and flask-cors: pip install -e '.[test]'")
    from mlflow import MlflowClient

    port, store = free_port(), tmp_path / "server"
    store.mkdir()
    where = ["--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}", "--artifacts-destination", str(store / "art")]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            *where,
        ],
        cwd=store,
        env=user_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its workers with it, stopped together
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # a busy machine: migrations, then the workers start
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "mlflow server did not start"
                time.sleep(1)
        run_cli(tmp_path, "logger=mlflow", f"logger.mlflow.tracking_uri={uri}", "+budget=smoke")
        (folder,) = run_dirs(tmp_path / "outputs")
        record = read_metrics(folder)
        client = MlflowClient(uri)
        (run,) = client.search_runs([client.get_experiment_by_name("attnexp").experiment_id])
        assert run.info.run_name == f"{folder.parent.name}/{folder.name}" and run.info.status == "FINISHED"
        assert run.data.tags["attnexp.identity"] == record["identity"] and run.data.tags["attnexp.status"] == "ok"
        assert {"metrics.json", "train.log"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
        assert record["trackers"]["mlflow"]["tracking_uri"] == uri
        assert not (tmp_path / "outputs" / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
