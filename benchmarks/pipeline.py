"""Which process a build waits on: one full build of the inputs, timed around the pipe between the reader (this
process: reading, checking and queueing pages and indexes) and the writer process (inserting and counting).

    python benchmarks/pipeline.py INPUT... [--work DIR]

Prints, as JSON, the build's wall seconds, how long the reader was blocked handing batches over (the writer
behind), how long the writer waited for them (the reader behind), and each process's CPU seconds. The database is
built into a temporary folder in WORK (default: the system's) and removed. Run with the code under test first on
PYTHONPATH.
"""

import argparse
import json
import queue
import sys
import tempfile
import time
import types
from pathlib import Path

from spack_cache_db.build import build
from spack_cache_db.db import writer


def timed_handing_over(waits):
    """BackgroundWriter._send, adding to waits["reader blocked"] the seconds it waited rather than ran."""
    send = writer.BackgroundWriter._send

    def timed(self, message):
        started, ran = time.perf_counter(), time.thread_time()
        send(self, message)
        waits["reader blocked"] += time.perf_counter() - started - (time.thread_time() - ran)

    return timed


def timed_queue(said_at):
    """A queue.Queue for the writer's messages whose get() counts the seconds waited; once the build says
    'finish', it writes those and the writer's CPU seconds to said_at."""

    class TimedQueue(queue.Queue):
        waited = 0.0

        def get(self, *arguments, **options):
            started = time.perf_counter()
            message = super().get(*arguments, **options)
            TimedQueue.waited += time.perf_counter() - started
            if message == "finish":
                Path(said_at).write_text(json.dumps({"waited": TimedQueue.waited, "cpu": time.process_time()}))
            return message

    return TimedQueue


def measure(inputs, work):
    waits = {"reader blocked": 0.0}
    with tempfile.TemporaryDirectory(dir=work) as folder:
        said_at = Path(folder) / "writer.json"
        writer._start_method = lambda: "fork"  # the writer inherits the timed queue
        writer.queue = types.SimpleNamespace(Queue=timed_queue(said_at))
        writer.BackgroundWriter._send = timed_handing_over(waits)
        started, ran = time.perf_counter(), time.process_time()
        build([str(path) for path in inputs], Path(folder) / "cache.db")
        wall, reader_cpu = time.perf_counter() - started, time.process_time() - ran
        said = json.loads(said_at.read_text())
    return {
        "wall seconds": round(wall, 2),
        "reader blocked handing batches over": round(waits["reader blocked"], 2),
        "writer waiting for batches": round(said["waited"], 2),
        "reader cpu seconds, finishing included": round(reader_cpu, 2),
        "writer cpu seconds": round(said["cpu"], 2),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", type=Path)
    parser.add_argument("--work", type=Path)
    args = parser.parse_args(argv)
    json.dump(measure(args.inputs, args.work), sys.stdout)
    print()


if __name__ == "__main__":
    sys.exit(main())
