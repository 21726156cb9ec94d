"""A pool of persistent HTTP/1.1 connections, as Python programs keep them
(test/e2e/clientshapes_test.go): each of --workers threads holds its own
http.client.HTTPConnection across requests and POSTs on it, --think-ms
apart, never retrying; after a failure it drops the connection and opens a
new one for its next request (5 ms later). http.client never retries by
itself, so this count is the truth.

One JSON line per request on stdout, as it ends:
  {"w": worker, "id": "w-n", "start_us": ..., "end_us": ..., "outcome": ..., "reused": bool, "err": "..."}
outcome: "ok" (200 and its body read), "refused" (the connect was refused),
"broken" (the connection closed or reset before the answer: a proxy's 502),
"other" (anything else, the error in err). When stdin ends, each worker
finishes its request, and the last line is the tally:
  {"tally": {"ok": n, "broken": n, "refused": n, "other": n}}
"""

import argparse
import http.client
import json
import sys
import threading
import time

lock = threading.Lock()
tally = {"ok": 0, "broken": 0, "refused": 0, "other": 0}
stop = threading.Event()


def now_us():
    return time.time_ns() // 1000


def emit(line):
    with lock:
        if "outcome" in line:
            tally[line["outcome"]] += 1
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def worker(w, host, port, think):
    conn = None
    n = 0
    while not stop.is_set():
        n += 1
        line = {"w": w, "id": "%d-%d" % (w, n), "start_us": now_us(), "reused": conn is not None}
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, port, timeout=15)
                conn.connect()
            conn.request("POST", "/r/%d-%d" % (w, n), body=b"x",
                         headers={"Content-Type": "text/plain"})
            resp = conn.getresponse()
            resp.read()
            if resp.status == 200:
                line["outcome"] = "ok"
            else:
                line["outcome"], line["err"] = "other", "status %d" % resp.status
            if resp.will_close:
                # Connection: close (a draining server): the next request
                # opens a new connection.
                conn.close()
                conn = None
        except ConnectionRefusedError as e:
            line["outcome"], line["err"] = "refused", repr(e)
        except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError,
                http.client.RemoteDisconnected, http.client.IncompleteRead,
                http.client.BadStatusLine) as e:
            # RemoteDisconnected: the server closed the connection without
            # answering (an empty reply); a reset: the server's kernel
            # answered the request with a RST.
            line["outcome"], line["err"] = "broken", repr(e)
        except Exception as e:  # a timeout, or what this test does not expect
            line["outcome"], line["err"] = "other", repr(e)
        line["end_us"] = now_us()
        emit(line)
        if line["outcome"] != "ok":
            if conn is not None:
                conn.close()
                conn = None
            time.sleep(0.005)
        else:
            time.sleep(think)
    if conn is not None:
        conn.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--addr", default="127.0.0.1:8080")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--think-ms", type=float, default=20)
    a = p.parse_args()
    host, port = a.addr.rsplit(":", 1)
    threads = [threading.Thread(target=worker, args=(w, host, int(port), a.think_ms / 1000))
               for w in range(a.workers)]
    for t in threads:
        t.start()
    sys.stdin.read()
    stop.set()
    for t in threads:
        t.join()
    with lock:
        sys.stdout.write(json.dumps({"tally": tally}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
