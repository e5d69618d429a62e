#!/usr/bin/env python3
"""Starts the ranks of a job on this host with the variables a launcher sets for each
process, as torchrun, srun and mpirun do (docs/distributed.md), waits for them and prints
each rank's output in rank order; exits 1 when a rank failed.

  ranks.py --style torchrun|slurm|mpirun -n N [--only R,...] [--nonce R=NONCE] -- CMD...

--only starts only some ranks (the others missing); --nonce gives rank R another job's
identity (under Slurm: another job step of the same job). Variables of launchers around this script (a CI job inside Slurm) are dropped
first. Ports are chosen free, so that tests may run side by side.
"""
import argparse
import os
import random
import socket
import subprocess
import sys


def free(port):
    with socket.socket() as s:
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


def free_pair():
    """A port p with p and p + 1 free (MASTER_PORT and the rendezvous above it)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("", 0))
            p = s.getsockname()[1]
        if p < 65535 and free(p + 1):
            return p
    sys.exit("ranks.py: no free port pair")


def slurm_job_id():
    """A job id whose port (15000 + its last four digits, + 1) is free."""
    for _ in range(200):
        job = random.randrange(1000000, 9999999)
        if free(15000 + job % 10000 + 1):
            return job
    sys.exit("ranks.py: no free port for a Slurm job id")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--style", choices=["torchrun", "slurm", "mpirun"], required=True)
    p.add_argument("-n", type=int, required=True)
    p.add_argument("--only", default=None)
    p.add_argument("--nonce", action="append", default=[])
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    n = a.n
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "OMPI_", "PMIX_", "TORCHELASTIC_", "MEDRUN_JOB_ID"))
            and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                          "MASTER_PORT", "MEDRUN_DIST_PORT")}
    nonce = "%016x" % random.getrandbits(64)
    other = dict(x.split("=", 1) for x in a.nonce)
    if a.style == "slurm":
        job = slurm_job_id()
    else:
        port = free_pair()
    procs = {}
    ranks = [int(r) for r in a.only.split(",")] if a.only else range(n)
    for r in ranks:
        env = dict(base)
        job_nonce = other.get(str(r), nonce)
        if a.style == "torchrun":
            env.update(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n),
                       GROUP_RANK="0", ROLE_RANK=str(r), ROLE_WORLD_SIZE=str(n),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                       TORCHELASTIC_RUN_ID=job_nonce, TORCHELASTIC_USE_AGENT_STORE="True",
                       TORCHELASTIC_RESTART_COUNT="0", TORCHELASTIC_MAX_RESTARTS="0")
        elif a.style == "slurm":
            env.update(SLURM_PROCID=str(r), SLURM_LOCALID=str(r), SLURM_NTASKS=str(n),
                       SLURM_NTASKS_PER_NODE=str(n), SLURM_NODEID="0", SLURM_NNODES="1",
                       SLURM_NODELIST="localhost", SLURM_STEP_NODELIST="localhost",
                       SLURM_JOB_ID=str(job), SLURM_STEP_ID=other.get(str(r), "0"))
        else:  # mpirun -np N -x MASTER_PORT=P
            env.update(OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE=str(n),
                       OMPI_COMM_WORLD_LOCAL_RANK=str(r), OMPI_COMM_WORLD_LOCAL_SIZE=str(n),
                       OMPI_COMM_WORLD_NODE_RANK="0", PMIX_NAMESPACE=job_nonce,
                       MASTER_PORT=str(port))
        procs[r] = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    failed = False
    outputs = {}
    for r, proc in procs.items():
        try:
            out, _ = proc.communicate(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            for q in procs.values():
                q.kill()
            out, _ = proc.communicate()
            out += b"ranks.py: timed out\n"
        outputs[r] = (proc.returncode, out.decode(errors="replace"))
        failed |= proc.returncode != 0
    for r in sorted(outputs):
        code, out = outputs[r]
        print("== rank %d exit %d" % (r, code))
        sys.stdout.write(out)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
