"""The kernel's stand-in towards jupyter_client, when kernels come warm from the fork server
(grader/runtime/warm_kernels.py): asks the server for a kernel, hands it this process's stdin,
stdout and stderr, writes the pids that grader/runtime/execute_worker.py watches, and exits with
the kernel's status. Killing this process kills the kernel (the server's supervisor sees it go).

    python -I -S kernel_stub.py SOCKET REQUEST_JSON_FILE CONNECTION_FILE PID_FILE

Stdlib only, started with -I -S: it costs a few milliseconds, not a second.
"""
import ctypes
import json
import os
import signal
import socket
import sys

PR_SET_PDEATHSIG = 1


def main(socket_path, request_file, connection_file, pid_file):
    # die with the process that started us (as bubblewrap's --die-with-parent): jupyter_client's
    # caller may simply exit without shutting its kernel down; the server's supervisor then sees us go
    parent = os.getppid()
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        return 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # interrupts travel as messages to the kernel
    with open(request_file) as handle:
        request = json.load(handle)
    request["connection_file"] = connection_file
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.connect(socket_path)
        socket.send_fds(server, [json.dumps(request).encode()], [0, 1, 2])
    except OSError as error:
        print(f"warm kernels: the kernel server is not answering ({error})", file=sys.stderr)
        return 1
    replies = server.makefile("r")
    started = json.loads(replies.readline() or "{}")
    if "init" not in started:
        print("warm kernels: the server could not start a kernel", file=sys.stderr)
        return 1
    with open(pid_file, "w") as handle:
        json.dump(started, handle)
    finished = json.loads(replies.readline() or "{}")
    return finished.get("exit", 1) & 0xFF


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
