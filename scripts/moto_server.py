"""Runs moto's S3 server on loopback without per-request log lines."""

import logging
import sys

from moto.server import ThreadedMotoServer


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    try:
        import threading

        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
