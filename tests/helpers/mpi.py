"""Runs a rank program under mpiexec from a test, bounded: `mpiexec -n N python -m mpi4py -m MODULE ARGS` on this
machine (loopback), from the repository root, each rank with one BLAS thread. `python -m mpi4py` calls MPI_Abort
when a rank ends on an uncaught exception, so a failing rank ends the job (mpi4py's docs, "mpi4py.run")."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from tests.helpers import ROOT


def mpiexec() -> str:
    """The mpiexec beside this Python (pip's mpich wheel installs it into the venv's bin/), else one on PATH; skips
    the test when there is none or mpi4py is missing."""
    pytest.importorskip("mpi4py", reason="pip install mpi4py mpich (the test extras)")
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = here if os.access(here, os.X_OK) else shutil.which("mpiexec")
    if found is None:
        pytest.skip("no mpiexec: pip install mpich")
    return found


def run_ranks(ranks: int, module: str, *args: str, timeout: float = 120, hcom_timeout: float | None = None,
              check: bool = True) -> subprocess.CompletedProcess:
    """Runs `python -m mpi4py -m module *args` as `ranks` processes; fails the test past `timeout` seconds (the
    whole job is killed then). hcom_timeout sets GRAPH_IR_HCOM_TIMEOUT for the ranks. check: a non-zero exit fails
    the test, with the job's output."""
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    if hcom_timeout is not None:
        env["GRAPH_IR_HCOM_TIMEOUT"] = str(hcom_timeout)
    command = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "mpi4py", "-m", module, *args]
    # A session of its own: on timeout the whole job (mpiexec, its proxies and the ranks) is killed as one group.
    job = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        out, err = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        out, err = job.communicate()
        pytest.fail(f"{' '.join(command[1:])}: still running after {timeout} s (a hang)\nstdout:\n{out}\n"
                    f"stderr:\n{err}")
    finally:  # whatever ended the wait (an interrupt too), nothing of the job outlives it
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    done = subprocess.CompletedProcess(command, job.returncode, out, err)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(command[1:])}: exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}")
    return done
