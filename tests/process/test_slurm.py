"""A sweep on a real SLURM cluster: one node on this machine (munged, slurmctld and slurmd on the loopback interface,
Debian's slurm-wlm and munge), each job submitted with sbatch through hydra/launcher=slurm, one record per run, the
summary written, a second start of the sweep skipping the finished runs. Skipped, saying why, where SLURM is not
installed (.ci/run installs it where it can)."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from helpers import read_metrics, run_dirs, run_process

DAEMONS = ("munged", "slurmctld", "slurmd")
CPU_JOBS = ["hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1"]


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def daemon(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory) -> Iterator[dict[str, str]]:
    """A one-node cluster of this machine's cores; the environment that points SLURM's commands at it."""
    missing = [name for name in (*DAEMONS, "sbatch", "sinfo") if daemon(name) is None]
    if missing:
        pytest.skip(f"SLURM is not installed here ({', '.join(missing)} missing: apt-get install slurm-wlm munge)")
    root = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool", "log"):
        (root / sub).mkdir()
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    host, (ctld_port, node_port) = socket.gethostname().split(".")[0], free_ports(2)
    conf = root / "slurm.conf"
    conf.write_text(
        f"""ClusterName=attnexp
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={node_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
SlurmUser={getpass.getuser()}
ReturnToService=2
MpiDefault=none
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    munge = [f"--key-file={key}", f"--socket={root}/munge.socket", f"--pid-file={root}/munged.pid"]
    munge += [f"--log-file={root}/log/munged.log", f"--seed-file={root}/munge.seed", "--force"]
    try:
        for name, args in (("munged", munge), ("slurmctld", []), ("slurmd", [])):
            started = subprocess.run([daemon(name), *args], env=env, capture_output=True, text=True, timeout=60)
            if started.returncode != 0:
                pytest.skip(f"{name} does not start here: {started.stderr.strip()[-300:]}")
        deadline = time.time() + 60
        while "idle" not in subprocess.run(["sinfo", "-h"], env=env, capture_output=True, text=True).stdout:
            if time.time() > deadline:
                pytest.skip(f"the one-node cluster did not come up: {(root / 'log' / 'slurmd.log').read_text()[-500:]}")
            time.sleep(0.5)
        yield {"SLURM_CONF": str(conf)}
    finally:
        for pid_file in ("slurmd.pid", "slurmctld.pid", "munged.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int((root / pid_file).read_text()), signal.SIGTERM)


def test_a_sweep_through_sbatch_gives_one_record_per_run_and_a_second_start_skips_them(tmp_path, slurm):
    sweep = ["--multirun", "hydra/launcher=slurm", *CPU_JOBS, "seed=0,1", "+budget=smoke"]
    proc = run_process(tmp_path, "attnexp", *sweep, env=slurm)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = run_dirs(tmp_path / "outputs")
    assert len(runs) == 2 and all(read_metrics(r)["status"] == "ok" for r in runs), runs
    assert all(len(list(r.glob("*.log"))) == 1 for r in runs)
    (summary,) = (tmp_path / "outputs" / "multirun").rglob("summary.md")
    assert "| model=dot | 2 |" in summary.read_text()
    (script,) = (tmp_path / "outputs" / "multirun").rglob(".submitit/*_submission.sh")  # one array of 2 jobs
    asked = script.read_text()
    assert "#SBATCH --array=0-1" in asked and "#SBATCH --nodes=1\n" in asked, asked
    assert "#SBATCH --ntasks-per-node=1\n" in asked, asked  # trainer.devices: a task per device

    written = {r: (r / "metrics.json").stat().st_mtime for r in runs}
    again = run_process(tmp_path, "attnexp", *sweep, env=slurm)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {r: (r / "metrics.json").stat().st_mtime for r in run_dirs(tmp_path / "outputs")} == written
    said = [log.read_text() for log in (tmp_path / "outputs" / "multirun").rglob(".submitit/*_log.err")]
    assert sum("already finished" in text for text in said) == 2, said  # each job of the second start, in its log
