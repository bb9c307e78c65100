"""A standalone Spark cluster on loopback, from the pyspark package's own launcher.

    with spark_standalone(tmp_path / "spark") as spark:
        subprocess.run([..., "--master", spark.master_url, *spark.driver_args()])

pyspark's pip package ships `bin/spark-class` (its sbin/ holds only the history server
scripts), so the master and each worker are `spark-class <daemon class> ...` processes,
each in its own session so that stopping one also stops the executors its workers
forked. The context manager returns once every worker is ALIVE in the master's
JSON page (http://127.0.0.1:<webui>/json/), and stops everything on the way out.
Logs and the workers' directories are under `root`.

The daemons run with small heaps and the JVM's quick compiler only: the machine the
tests run on is small and shared. Java must answer `java -version`
(scripts/ensure-java.sh installs it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cluster_procs import free_ports

# one JVM flag set for the daemons and the executors: the jobs are many tiny queries
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# `warren audit report` over a few minutes of snapshots (a rolling upgrade's, a chaos run's) is
# a tiny input: code generation and the optimising JIT cost more than they save (measured on
# test_audit_upgrade.py's snapshots at load 25-36: 176 s without code generation, 269 s with
# it), and so does adaptive planning. The report runs its small queries side by side; without
# locality.wait=0 a task waits up to 3 s for the busy executor that caches its partition.
TINY_INPUT_CONF = {
    "spark.locality.wait": "0",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.driver.extraJavaOptions": QUICK_JVM,
}


def conf_args(conf: dict[str, str] = TINY_INPUT_CONF) -> list[str]:
    """`--conf KEY=VALUE` arguments of `warren audit` for `conf`."""
    return [a for kv in conf.items() for a in ("--conf", "=".join(kv))]
ENSURE_JAVA = Path(__file__).resolve().parents[2] / "scripts" / "ensure-java.sh"


def _java_runs() -> bool:
    try:
        return subprocess.run(["java", "-version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def java_problem() -> str | None:
    """None when Java runs (after scripts/ensure-java.sh installed it if it had to), else why not."""
    if _java_runs():
        return None
    done = subprocess.run(["bash", str(ENSURE_JAVA)], capture_output=True, text=True, timeout=900)
    if done.returncode == 0 and _java_runs():
        return None
    return f"no Java, and {ENSURE_JAVA.name} could not install it:\n{done.stderr[-2000:]}"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen
    log_path: Path

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


@dataclass
class SparkStandalone:
    master_url: str  # spark://127.0.0.1:P
    webui_url: str  # http://127.0.0.1:Q
    worker_cores: int
    executor_memory: str
    daemons: list[Daemon] = field(default_factory=list)

    def state(self) -> dict:
        """The master's JSON page: workers, aliveworkers, activeapps, completedapps, ..."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as resp:
            return json.loads(resp.read())

    def alive_workers(self) -> list[dict]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def driver_conf(self) -> dict[str, str]:
        """Spark settings a driver needs on this cluster: loopback, executors that fit the
        workers, one per worker, and the quick JVM."""
        workers = sum(1 for d in self.daemons if d.name.startswith("worker"))
        return {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": self.executor_memory,
            "spark.executor.cores": str(self.worker_cores),
            "spark.cores.max": str(self.worker_cores * workers),
            "spark.executor.extraJavaOptions": QUICK_JVM,
            "spark.ui.enabled": "false",
        }

    def driver_args(self) -> list[str]:
        """driver_conf() as `--conf KEY=VALUE` arguments."""
        return [a for k, v in self.driver_conf().items() for a in ("--conf", f"{k}={v}")]

    def logs(self) -> str:
        return "\n".join(f"--- {d.name} ({d.log_path}):\n{d.log_tail()}" for d in self.daemons)


def _env(root: Path) -> dict[str, str]:
    home = spark_home()
    return dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_HOSTNAME="127.0.0.1",
                SPARK_LOG_DIR=str(root / "logs"), SPARK_DAEMON_MEMORY="256m", SPARK_DAEMON_JAVA_OPTS=QUICK_JVM,
                PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable))  # fmt: skip


def _launch(root: Path, name: str, args: list[str]) -> Daemon:
    log_path = root / f"{name}.log"
    cmd = [str(spark_home() / "bin" / "spark-class"), *args]
    with open(log_path, "ab") as log:  # the child writes to it
        proc = subprocess.Popen(cmd, cwd=root, env=_env(root), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    return Daemon(name, proc, log_path)


def _stop(daemon: Daemon, timeout: float = 20.0) -> None:
    """SIGTERM to the daemon's process group (the worker's executors are in it), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(daemon.proc.pid, sig)
        try:
            daemon.proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):  # a forked executor that outlived its worker
        os.killpg(daemon.proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def spark_standalone(root: Path, workers: int = 2, worker_cores: int = 1, worker_memory: str = "768m",
                     executor_memory: str = "512m", timeout: float = 120.0) -> Iterator[SparkStandalone]:  # fmt: skip
    """A master and `workers` workers on 127.0.0.1, all registered; stopped on exit."""
    root.mkdir(parents=True, exist_ok=True)
    port, webui, *worker_ports = free_ports(2 + 2 * workers)
    cluster = SparkStandalone(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{webui}", worker_cores,
                              executor_memory)  # fmt: skip
    try:
        cluster.daemons.append(_launch(root, "master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
            "--webui-port", str(webui)]))  # fmt: skip
        for i in range(workers):
            work = root / f"worker{i}"
            work.mkdir(exist_ok=True)
            cluster.daemons.append(_launch(root, f"worker{i}", [
                "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                "--port", str(worker_ports[2 * i]), "--webui-port", str(worker_ports[2 * i + 1]),
                "--cores", str(worker_cores), "--memory", worker_memory, "--work-dir", str(work),
                cluster.master_url]))  # fmt: skip
        _wait_registered(cluster, workers, timeout)
        yield cluster
    finally:
        for d in reversed(cluster.daemons):  # the workers first: the master then sees them leave
            _stop(d)


def _wait_registered(cluster: SparkStandalone, workers: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    seen: list[dict] = []
    while True:
        for d in cluster.daemons:
            if d.proc.poll() is not None:
                raise RuntimeError(f"spark {d.name} exited with {d.proc.returncode}:\n{cluster.logs()}")
        with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
            seen = cluster.alive_workers()
            if len(seen) >= workers:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(seen)} of {workers} spark workers registered within {timeout:g} s:\n"
                               f"{cluster.logs()}")  # fmt: skip
        time.sleep(0.25)  # the master's page is the only signal of a registration
