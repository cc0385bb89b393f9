"""Runs a command and interrupts it once it has trained far enough.

  interrupt.py SIGNALS STEP METRICS LOG -- COMMAND...

Starts COMMAND with stdout and stderr to LOG, waits until METRICS (a
metrics.jsonl) records step STEP or later, then sends SIGNALS (KILL, INT,
TERM, or INT,TERM: two at once) and waits for the process. Prints "exit N"
(N the exit status, or -SIG when a signal killed it). Fails if the run ends
before STEP is recorded (then there is nothing to interrupt) or takes more
than 300 s.
"""
import json
import os
import signal
import subprocess
import sys
import time

signals, step, metrics, log = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
assert sys.argv[5] == "--"
command = sys.argv[6:]


def recorded():
    try:
        with open(metrics) as f:
            lines = [l for l in f.read().split("\n") if l.strip()]
    except FileNotFoundError:
        return 0
    steps = []
    for line in lines:
        try:
            steps.append(json.loads(line)["step"])
        except ValueError:
            pass  # a line being written
    return max(steps, default=0)


with open(log, "wb") as out:
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    while recorded() < step:
        if process.poll() is not None:
            sys.exit("the run ended (exit %d) before step %d was recorded"
                     % (process.returncode, step))
        if time.time() > deadline:
            process.kill()
            sys.exit("step %d not recorded in 300 s" % step)
        time.sleep(0.005)
    for name in signals.split(","):
        os.kill(process.pid, getattr(signal, "SIG" + name))
    try:
        process.wait(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()
        sys.exit("the run did not stop within 300 s of the signal")
print("exit %d" % process.returncode)
