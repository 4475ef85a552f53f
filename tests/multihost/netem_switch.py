#!/usr/bin/env python3
"""A user-space Ethernet switch that impairs what it forwards, in place of `tc qdisc netem`.

This machine's kernel has no sch_netem, so netns-hosts.sh runs this inside the switch namespace
instead of a bridge when delay, loss, reordering, duplication or a rate are asked for. It opens one
AF_PACKET socket per port (the switch-side ends of the hosts' veth pairs), learns which MAC sits
behind which port, and forwards every frame after deciding its fate:

  loss PCT       the frame is dropped with this probability
  duplicate PCT  the frame is sent twice
  delay MS       the frame leaves MS milliseconds (+- jitter, uniform) after it arrived: one way,
                 so a round trip between two hosts takes twice that
  reorder PCT    the frame skips the delay and leaves at once, overtaking the frames queued
                 before it (netem's meaning; needs a delay to have any effect)
  rate MBIT      each egress port sends at most this many Mbit/s; frames queue behind each other

Decisions come from a seeded generator, so a run can be repeated. Counters go to --stats (JSON)
every second and at exit, so a test can say what was actually injected.
"""
import argparse
import errno
import heapq
import json
import os
import random
import selectors
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # our own transmissions, echoed back to the socket of the egress port


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ports", required=True, help="comma-separated interface names")
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--loss", type=float, default=0.0, help="percent")
    p.add_argument("--duplicate", type=float, default=0.0, help="percent")
    p.add_argument("--reorder", type=float, default=0.0, help="percent")
    p.add_argument("--rate-mbit", type=float, default=0.0, help="0: unlimited")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--stats", default="", help="file to write counters to (JSON)")
    p.add_argument("--ready", default="", help="file to create once every port is open")
    return p.parse_args()


class Switch:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.ports = {}  # name -> socket
        self.mac_table = {}  # MAC bytes -> port name
        self.queue = []  # (due time, sequence, port, frame)
        self.sequence = 0
        self.port_free_at = {}  # egress port -> when its last queued frame has left (rate)
        self.stats = {"received": 0, "forwarded": 0, "dropped": 0, "duplicated": 0, "reordered": 0,
                      "send_errors": 0}
        self.selector = selectors.DefaultSelector()
        for name in args.ports.split(","):
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((name, ETH_P_ALL))
            s.setblocking(False)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            self.ports[name] = s
            self.port_free_at[name] = 0.0
            self.selector.register(s, selectors.EVENT_READ, name)

    def chance(self, percent):
        return percent > 0 and self.rng.random() * 100.0 < percent

    def schedule(self, now, port, frame, immediate):
        due = now
        if not immediate and self.args.delay_ms > 0:
            jitter = self.rng.uniform(-self.args.jitter_ms, self.args.jitter_ms) if self.args.jitter_ms else 0.0
            due += max(0.0, self.args.delay_ms + jitter) / 1000.0
        if self.args.rate_mbit > 0:
            # Serialisation: a frame starts when the port is free and takes len*8/rate to leave.
            start = max(due, self.port_free_at[port])
            due = start + len(frame) * 8 / (self.args.rate_mbit * 1e6)
            self.port_free_at[port] = due
        self.sequence += 1
        heapq.heappush(self.queue, (due, self.sequence, port, frame))

    def on_frame(self, ingress, frame, now):
        self.stats["received"] += 1
        if len(frame) < 14:
            return
        dst, src = frame[0:6], frame[6:12]
        self.mac_table[src] = ingress
        known = self.mac_table.get(dst)
        egress = [known] if known and known != ingress and not (dst[0] & 1) else \
            [p for p in self.ports if p != ingress]
        if self.chance(self.args.loss):
            self.stats["dropped"] += 1
            return
        copies = 1
        if self.chance(self.args.duplicate):
            copies = 2
            self.stats["duplicated"] += 1
        immediate = self.chance(self.args.reorder)
        if immediate and self.args.delay_ms > 0:
            self.stats["reordered"] += 1
        for _ in range(copies):
            for port in egress:
                self.schedule(now, port, frame, immediate)

    def flush_due(self, now):
        while self.queue and self.queue[0][0] <= now:
            _, _, port, frame = heapq.heappop(self.queue)
            try:
                self.ports[port].send(frame)
                self.stats["forwarded"] += 1
            except OSError:
                # A port whose link was cut (netns-hosts.sh cut) refuses frames: that is the cut.
                self.stats["send_errors"] += 1

    def write_stats(self):
        if not self.args.stats:
            return
        tmp = self.args.stats + ".tmp"
        with open(tmp, "w") as f:
            json.dump(dict(self.stats, settings=vars(self.args)), f)
        os.replace(tmp, self.args.stats)

    def run(self):
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        signal.signal(signal.SIGINT, lambda *_: stop.append(1))
        if self.args.ready:
            open(self.args.ready, "w").close()
        next_stats = time.monotonic() + 1.0
        while not stop:
            now = time.monotonic()
            timeout = 0.2 if not self.queue else max(0.0, self.queue[0][0] - now)
            for key, _ in self.selector.select(min(timeout, 0.2)):
                sock, name = key.fileobj, key.data
                # Drain this port: many frames can be waiting after a burst.
                for _ in range(256):
                    try:
                        frame, addr = sock.recvfrom(65535)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError as e:
                        if e.errno in (errno.ENODEV, errno.ENXIO):
                            # The port's device is gone (netns-hosts.sh crash): stop watching it.
                            self.selector.unregister(sock)
                        break  # else the link went down under us; frames resume when it is back
                    if addr[2] == PACKET_OUTGOING:
                        continue
                    self.on_frame(name, frame, time.monotonic())
            now = time.monotonic()
            self.flush_due(now)
            if now >= next_stats:
                self.write_stats()
                next_stats = now + 1.0
        self.write_stats()


if __name__ == "__main__":
    Switch(parse_args()).run()
    sys.exit(0)
