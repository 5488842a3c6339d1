"""Runs land in the trackers a lab reads, read back through the trackers' own clients and files: MLflow (a SQLite store
under the output root) holds each run named by its folder with its settings, identity, status and files, and a sweep's
comparison as a parent run with the verdicts on its runs; W&B's offline runs hold the same in their files. A logger
that cannot be built, and a ${hydra:...} value, are said before any folder exists; the last line names the view of
the loggers in use."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers import read_metrics, run_dirs, run_script, wandb_records

SMOKE = ("+budget=smoke", "data=digits")
MLFLOW_UI = "mlflow ui --backend-store-uri sqlite:///outputs/mlflow.db"


@pytest.fixture(scope="module")
def mlflow_store(tmp_path_factory):
    """An empty MLflow SQLite store made once (making one runs MLflow's migrations: seconds); each test copies it."""
    mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed: pip install 'attnexp[mlflow]'")
    path = tmp_path_factory.mktemp("store") / "mlflow.db"
    mlflow.MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


def client_of(root: Path):
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{root / 'outputs' / 'mlflow.db'}")


def runs_of(client, parents: bool = False):
    experiment = client.get_experiment_by_name("attnexp")
    found = client.search_runs([experiment.experiment_id])
    return [r for r in found if ("attnexp.comparison" in r.data.tags) == parents]


def artifacts(client, run_id: str, path: str | None = None) -> set[str]:
    return {a.path for a in client.list_artifacts(run_id, path)}


def test_a_sweep_lands_in_mlflow_with_its_comparison_and_a_rerun_adds_no_run(cli):
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed: pip install 'attnexp[mlflow]'")
    args = ("--multirun", "model=dot,euclid", "seed=0", "logger=mlflow", "hydra/launcher=basic", *SMOKE)
    root, proc = cli(*args)  # a new store, made once before the jobs start
    assert MLFLOW_UI in proc.stdout
    client = client_of(root)
    runs, (parent,) = runs_of(client), runs_of(client, parents=True)
    folders = {f"{r.parent.name}/{r.name}": read_metrics(r) for r in run_dirs(root / "outputs" / "runs")}
    assert sorted(r.info.run_name for r in runs) == sorted(folders) and len(runs) == 2
    for run in runs:
        record, tags = folders[run.info.run_name], run.data.tags
        assert run.info.status == "FINISHED" and tags["attnexp.status"] == "ok"
        assert tags["attnexp.identity"] == record["identity"] and tags["attnexp.code"] == record["code"]["id"]
        assert tags["attnexp.dataset"] == record["dataset"]["id"] and tags["attnexp.weight_kind"] == "distributions"
        assert run.data.params["choice/model"] == record["mixer"] and run.data.params["seed"] == "0"
        assert float(run.data.params["module.optimizer.lr"]) == record["config"]["module"]["optimizer"]["lr"]
        assert run.data.metrics["test/acc"] == pytest.approx(record["test/acc"])
        assert {"metrics.json", "train.log", "figures"} <= artifacts(client, run.info.run_id)
        assert "figures/attention/layer0.png" in {
            a.path for a in client.list_artifacts(run.info.run_id, "figures/attention")
        }
        assert record["trackers"]["mlflow"]["run_id"] == run.info.run_id
        assert tags["mlflow.parentRunId"] == parent.info.run_id  # nested under the comparison
        assert tags["attnexp.configuration"] == ("model=euclid" if record["mixer"] == "euclid" else "model=dot")
        assert tags["attnexp.baseline"] == "model=dot" and ("verdict/test/acc" in tags) == (record["mixer"] != "dot")
    euclid = next(r for r in runs if r.data.tags["attnexp.mixer"] == "euclid")
    summary = next(root.glob("outputs/multirun/*/*/summary.md")).read_text()
    assert euclid.data.tags["verdict/test/acc"].split(" ")[0] in summary  # the verdict the summary gives
    assert {"summary.md", "summary.csv", "runs.csv", "summary.tex"} <= artifacts(client, parent.info.run_id)

    cli(*args, "resume=true")  # every job finished: skipped, and the same comparison finds its parent again
    assert len(runs_of(client)) == 2 and len(runs_of(client, parents=True)) == 1
    sweep = sorted((root / "outputs" / "multirun").glob("*/*"))[0]  # compared again, later
    compared = run_script(root, "attnexp-compare", str(sweep), "--trackers", "--out", "again")
    assert compared.returncode == 0 and f"In the tracker: {MLFLOW_UI}" in compared.stdout, compared.stderr
    assert len(runs_of(client, parents=True)) == 1


def test_a_run_in_tensorboard_and_mlflow_and_resumed_in_the_same_mlflow_run(cli, tmp_path, mlflow_store):
    (tmp_path / "outputs").mkdir()
    shutil.copy(mlflow_store, tmp_path / "outputs" / "mlflow.db")
    root, proc = cli("logger=[tensorboard,mlflow]", *SMOKE)
    (run_dir,) = run_dirs(root / "outputs" / "runs")
    last = proc.stderr.strip().splitlines()[-1]
    views = set(last.split("; curves: ")[1].split("; "))
    assert views == {f"tensorboard --logdir {run_dir.relative_to(tmp_path).as_posix()}", MLFLOW_UI}, last
    assert list(run_dir.glob("events.out.tfevents.*"))
    (run,) = runs_of(client_of(root))
    assert run.info.run_name == f"{run_dir.parent.name}/{run_dir.name}" and run.data.tags["attnexp.status"] == "ok"

    stopped = {**read_metrics(run_dir), "status": "interrupted"}  # as a run stopped by Ctrl-C leaves its record
    (run_dir / "metrics.json").write_text(json.dumps(stopped))
    cli("logger=[tensorboard,mlflow]", "resume=true", *SMOKE)
    record = read_metrics(run_dir)
    assert record["status"] == "ok" and record["resumed"] and record["resumed"][-1]["from"].endswith("last.ckpt")
    (again,) = runs_of(client_of(root))  # the same MLflow run, continued
    assert again.info.run_id == run.info.run_id == record["trackers"]["mlflow"]["run_id"]
    assert again.info.status == "FINISHED" and again.data.tags["attnexp.status"] == "ok"


def test_a_diverged_run_ends_failed_in_mlflow_with_its_record(cli, tmp_path, mlflow_store):
    (tmp_path / "outputs").mkdir()
    shutil.copy(mlflow_store, tmp_path / "outputs" / "mlflow.db")
    huge = ("module.optimizer._target_=torch.optim.SGD", "module.optimizer.lr=1e12", "module.divergence_check_every=1")
    root, proc = cli(
        "logger=mlflow", *huge, "trainer.max_epochs=1", "callbacks.progress_bar.refresh_rate=0", check=False
    )
    assert proc.returncode == 3, proc.stderr
    (run_dir,) = run_dirs(root / "outputs" / "runs")
    client = client_of(root)
    (run,) = runs_of(client)
    assert run.info.status == "FAILED" and run.data.tags["attnexp.status"] == "diverged"
    assert "metrics.json" in artifacts(client, run.info.run_id)
    assert read_metrics(run_dir)["trackers"]["mlflow"]["run_id"] == run.info.run_id


def test_a_run_stopped_by_ctrl_c_ends_killed_in_mlflow(tmp_path, mlflow_store):
    from types import SimpleNamespace

    from mlflow import MlflowClient

    from attnexp.runs import trackers

    shutil.copy(mlflow_store, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("attnexp")).info.run_id
    found = {"kind": "mlflow", "tracking_uri": uri, "run_id": run_id}
    for status, ended in (("interrupted", "KILLED"), ("failed", "FAILED")):  # as failures.stopped records them
        trackers.stopped(SimpleNamespace(fields={"status": status, "trackers": {"mlflow": found}}))
        run = client.get_run(run_id)
        assert run.info.status == ended and run.data.tags["attnexp.status"] == status


def test_a_logger_added_the_templates_way_goes_to_mlflows_default_store(cli, tmp_path, mlflow_store):
    shutil.copy(mlflow_store, tmp_path / "mlflow.db")  # MLflow's default store: ./mlflow.db
    root, _ = cli("+logger.mlflow._target_=pytorch_lightning.loggers.MLFlowLogger", *SMOKE)
    (run_dir,) = run_dirs(root / "outputs")
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.run_name == f"{run_dir.parent.name}/{run_dir.name}" and run.data.tags["attnexp.status"] == "ok"
    assert list(run_dir.glob("events.out.tfevents.*"))  # beside the default TensorBoard logger


def test_the_closing_line_names_the_loggers_in_use(cli):
    root, proc = cli("logger=csv", *SMOKE)
    (run_dir,) = run_dirs(root / "outputs")
    last = proc.stderr.strip().splitlines()[-1]
    assert "tensorboard" not in last and not list(run_dir.glob("events.out.tfevents.*"))
    assert last.endswith(f"curves: {run_dir.relative_to(root).as_posix()}/metrics.csv"), last


def test_a_logger_that_cannot_be_built_is_bad_input_before_any_folder(cli):
    root, proc = cli("logger=csv", "+logger.csv.flush_every=3", *SMOKE, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "flush_every is not an option of CSVLogger" in proc.stderr and "flush_logs_every_n_steps" in proc.stderr
    assert "Traceback" not in proc.stderr and not (root / "outputs").exists()
    comet = "pytorch_lightning.loggers.CometLogger"  # comet-ml is not installed: the install Lightning names
    root, proc = cli("logger=none", f"+logger._target_={comet}", *SMOKE, check=False)
    assert proc.returncode == 2 and not (root / "outputs").exists(), proc.stderr
    assert proc.stderr.startswith(f"Bad input: logger is {comet}, which needs a package that is not installed here")
    assert "pip install -U 'comet-ml" in proc.stderr and "Traceback" not in proc.stderr


def test_hydra_values_anywhere_are_resolved_or_refused_in_a_paragraph(cli):
    root, _ = cli("logger=csv", "compare.columns=[${hydra:job.name}]", *SMOKE)  # a list, as a logger's tags
    (run_dir,) = run_dirs(root / "outputs")
    assert read_metrics(run_dir)["config"]["compare"]["columns"] == ["train"]  # resolved as in the job
    shutil.rmtree(root / "outputs")
    unset = "${oc.env:ATTNEXP_UNSET_IN_TESTS}"
    root, proc = cli("logger=csv", f"+logger.csv.prefix=[{unset}]", *SMOKE, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and not (root / "outputs").exists(), proc.stderr
    assert (
        proc.stderr.startswith("Bad input: A value under logger cannot be resolved") and "ATTNEXP_UNSET" in proc.stderr
    )


def wandb_runs(folder: Path) -> dict[str, list[tuple]]:
    """W&B's offline runs under ``folder`` by run id, each as its pieces in the order ``wandb sync`` uploads them (a
    run continued offline is one more folder): the run record as it last stands, the summary and history, the
    config, the files and the exit code of each."""
    pieces: dict[str, list[tuple]] = {}
    for path in sorted(folder.glob("offline-run-*/run-*.wandb")):
        records = list(wandb_records(path))
        run = [r.run for r in records if r.HasField("run")][-1]
        summary = {
            u.key or "/".join(u.nested_key): json.loads(u.value_json)
            for r in records
            if r.HasField("summary")
            for u in r.summary.update
        }
        items = [i for r in records if r.HasField("history") for i in r.history.item]
        history = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items}
        config = {u.key: json.loads(u.value_json) for r in records if r.HasField("config") for u in r.config.update}
        files = {f.path for r in records if r.HasField("files") for f in r.files.files}
        (exit_code,) = [r.exit.exit_code for r in records if r.HasField("exit")]
        pieces.setdefault(run.run_id, []).append((run, summary | history, config, files, exit_code))
    return pieces


def test_a_wandb_sweep_offline_holds_the_records_and_the_comparison(cli, tmp_path):
    pytest.importorskip("wandb", reason="the wandb extra is not installed: pip install 'attnexp[wandb]'")
    env = {"WANDB_SILENT": "true", "HOME": str(tmp_path / "home")}  # no netrc there: not logged in, so offline
    root, proc = cli("--multirun", "model=dot,euclid", "logger=wandb", "hydra/launcher=basic", *SMOKE, env=env)
    folders = {f"{r.parent.name}/{r.name}": read_metrics(r) for r in run_dirs(root / "outputs" / "runs")}
    (sweep,) = (root / "outputs" / "multirun").glob("*/*")
    group, summary_md = str(sweep.relative_to(root)), (sweep / "summary.md").read_text()
    pieces = wandb_runs(root / "outputs" / "wandb")
    (comparison_id,) = set(pieces) - {record["trackers"]["wandb"]["id"] for record in folders.values()}
    assert len(pieces) == 3  # two runs, the sweep's comparison
    for name, record in folders.items():
        (run, summary, config, files, exit_code), verdicts = pieces[record["trackers"]["wandb"]["id"]]
        assert run.display_name == name and run.run_group == group and exit_code == 0
        assert (
            summary["attnexp/identity"] == record["identity"] and summary["attnexp/status"] == "ok" == record["status"]
        )
        assert {f"identity:{record['identity']}", "status:ok", f"mixer:{record['mixer']}"} <= set(run.tags)
        assert summary["test/acc"] == pytest.approx(record["test/acc"])
        assert config["choice/model"] == record["mixer"] and config["module.optimizer.lr"] == 0.003
        assert {"metrics.json", "train.log"} <= files and any(f.startswith("media/images/figures/") for f in files)
        # the same run continued with its configuration's verdicts as tags, the tags it had beside them
        run, _, _, _, exit_code = verdicts
        assert run.display_name == name and run.run_group == group and exit_code == 0
        shown = {t.split(":", 1)[0]: t.split(":", 1)[1] for t in run.tags}
        assert shown["status"] == "ok" and shown["identity"] == record["identity"] and shown["seed"] == "0"
        assert shown["configuration"] == f"model={record['mixer']}" and shown["baseline"] == "model=dot"
        assert ("verdict/test/acc" in shown) == (record["mixer"] != "dot")
        if record["mixer"] != "dot":
            assert shown["verdict/test/acc"].split(" ")[0] in summary_md  # the verdict the summary gives
    ((run, summary, _, files, _),) = pieces[comparison_id]
    assert run.display_name == f"comparison {group}" and run.run_group == group
    assert {"summary.md", "summary.csv", "runs.csv"} <= files
    assert any(f.startswith("media/table/verdicts") for f in files)
    assert re.search(r"Curves: wandb sync \S*outputs/wandb/offline-run-\*", proc.stdout), proc.stdout[-500:]
    cli("--multirun", "model=dot,euclid", "logger=wandb", "hydra/launcher=basic", "resume=true", *SMOKE, env=env)
    again = wandb_runs(root / "outputs" / "wandb")
    assert set(again) == set(pieces) and len(again[comparison_id]) == 2  # no job trained; the comparison continued
