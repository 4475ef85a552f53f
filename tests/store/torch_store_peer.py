"""The PyTorch side of tests/store/torch_interop_test.cpp: a torch TCPStore (Debian's torch 1.13)
that talks to a kolo TCPStore. Every step checks what the kolo side put there, and leaves keys for
the kolo side to check. Exit 0 when every check passed; a failed check prints what differed.

  torch_store_peer.py client PORT   kolo hosts the store; torch is a client (world size 2)
  torch_store_peer.py server        torch hosts the store (world size 2, waits for the kolo
                                    client); prints "port N", then plays the same script
  torch_store_peer.py refused PORT  kolo hosts the store with authentication on: torch's client
                                    cannot authenticate, so its SET and GET must fail (exit 0
                                    when they did, 1 when the store served it)
"""
import datetime
import sys

from torch.distributed import TCPStore


def expect(what, got, want):
    if got != want:
        print(f"MISMATCH {what}: got {got!r}, want {want!r}", flush=True)
        sys.exit(1)


def play(store):
    # kolo wrote these before starting us (client mode) or after joining (server mode).
    store.wait(["from_kolo"], datetime.timedelta(seconds=20))
    expect("get from_kolo", store.get("from_kolo"), b"kolo value \x00\xff")
    expect("add on kolo's counter", store.add("counter", 10), 17)
    expect("compare_set won", store.compare_set("cas", "kolo", "torch"), b"torch")
    expect("compare_set lost", store.compare_set("cas", "wrong", "x"), b"torch")
    expect("delete kolo's key", store.delete_key("to_delete"), True)
    expect("delete again", store.delete_key("to_delete"), False)
    try:
        store.wait(["never"], datetime.timedelta(milliseconds=200))
        expect("wait for a missing key", "returned", "timed out")
    except RuntimeError:
        pass
    store.set("binary", bytes(range(256)))
    store.set("from_torch", "torch value")  # last: kolo waits for it


def refused(port):
    try:
        store = TCPStore("127.0.0.1", port, None, False, datetime.timedelta(seconds=5))
        store.set("victim", "torch")  # c10d's SET has no reply: the failure shows on the GET
        got = store.get("victim")
    except RuntimeError as e:
        print(f"torch peer: refused as expected: {e}", flush=True)
        return
    print(f"torch peer: NOT refused, read {got!r}", flush=True)
    sys.exit(1)


def main():
    timeout = datetime.timedelta(seconds=30)
    if sys.argv[1] == "refused":
        refused(int(sys.argv[2]))
        return
    if sys.argv[1] == "client":
        store = TCPStore("127.0.0.1", int(sys.argv[2]), 2, False, timeout)
        play(store)
    else:
        store = TCPStore("127.0.0.1", 0, 2, True, timeout, wait_for_workers=False)
        print(f"port {store.port}", flush=True)
        play(store)
        # Keep the server up until kolo has read everything.
        store.wait(["kolo_done"], timeout)
    print("torch peer: all checks passed", flush=True)


if __name__ == "__main__":
    main()
