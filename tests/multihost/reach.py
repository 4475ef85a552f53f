#!/usr/bin/env python3
"""reach.py ADDR SECONDS: exit 0 once ADDR answers at all, 1 if it stays silent for SECONDS.

A TCP connection to a closed port is refused by a live host (an RST comes back), so no server
and no ping binary (absent on minimal Debian) are needed to know the path works both ways."""
import socket
import sys
import time

addr, limit = sys.argv[1], float(sys.argv[2])
deadline = time.monotonic() + limit
while time.monotonic() < deadline:
    try:
        socket.create_connection((addr, 9), timeout=1).close()
        sys.exit(0)
    except ConnectionRefusedError:
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
