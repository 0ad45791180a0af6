"""A three-thread pipeline on queue.Queue (tests/real_python.rs): `ticker` sleeps and puts,
`relay` takes and puts on, `sink` (the main thread) takes. argv: items, milliseconds
between them. With QUEUE_DEMO_PIDFILE set, the process id is written there first."""
import os
import queue
import sys
import threading
import time


def ticker(out, n, gap):
    for i in range(n):
        time.sleep(gap)
        out.put(i)
    out.put(None)


def relay(inp, out):
    while True:
        item = inp.get()
        out.put(item)
        if item is None:
            return


def sink(inp):
    total = 0
    while True:
        item = inp.get()
        if item is None:
            return total
        total += item


def main():
    if "QUEUE_DEMO_PIDFILE" in os.environ:
        with open(os.environ["QUEUE_DEMO_PIDFILE"], "w") as f:
            f.write(str(os.getpid()))
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    gap = (float(sys.argv[2]) if len(sys.argv) > 2 else 5) / 1000
    a, b = queue.Queue(), queue.Queue()
    threads = [
        threading.Thread(target=ticker, args=(a, n, gap), name="ticker"),
        threading.Thread(target=relay, args=(a, b), name="relay"),
    ]
    for t in threads:
        t.start()
    sink(b)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
