"""Write a large, realistic, seeded snapshot file for `reassigner simulate` (issue 17).

Run: .venv/bin/python benchmarks/make_snapshot.py --partitions 333334 --brokers 300 --rf 3 --out FILE

The document is the snapshot format (`planning.snapshot`, what `reassigner snapshot` writes):
- brokers 0..B-1 on KIP-879 rack paths, 3 DCs x 4 racks (`/dcD/rackR`), each with two log dirs
  (`/data/d1`, `/data/d2`) whose used bytes are the replicas placed in them;
- topics of about 1,000 partitions (700..1,300, the last takes the rest), min ISR 2 (1 at RF 1);
- replicas placed the way Kafka's rack-aware assignment does: the brokers listed alternating
  racks, partition p of a topic starting at (start + p), followers at a fixed shift chosen so
  that the RF replicas sit on RF different racks; leader = first replica, ISR = replicas;
- sizes log-uniform per topic (1 MB .. 5 GB median), +-30 % per partition: a few topics hold
  GB-sized partitions, most hold tens or hundreds of MB.

Same arguments and seed, same bytes out (`random.Random(seed)`; no clock, no environment).
Print the add-broker arguments for the new brokers with `--print-add-brokers N`.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys

DCS, RACKS_PER_DC = 3, 4
DIRS = ("/data/d1", "/data/d2")
DIR_TOTAL_BYTES = 8 * 10**12


def rack_of(broker_id: int) -> str:
    """Broker b sits in rack b mod 12 (of 3 DCs x 4 racks): consecutive ids alternate racks."""
    rack = broker_id % (DCS * RACKS_PER_DC)
    return f"/dc{rack % DCS + 1}/rack{rack // DCS + 1}"


def build_snapshot(partitions: int, brokers: int, rf: int, seed: int = 17) -> dict:
    """The snapshot document (see the module docstring). Pure: same arguments, same document."""
    if rf > min(brokers, DCS * RACKS_PER_DC):
        raise ValueError(f"RF {rf} needs {rf} racks and brokers; have {brokers} brokers")
    rnd = random.Random(seed)
    racks = DCS * RACKS_PER_DC
    ordered = list(range(brokers))  # ids alternate racks already (rack_of)
    shifts = [s for s in range(1, brokers) if all((k * s) % racks for k in range(1, rf))]
    used = {(b, d): 0 for b in range(brokers) for d in DIRS}
    topics = []
    left, t = partitions, 0
    while left > 0:
        count = left if left < 1_400 else rnd.randint(700, 1_300)
        left -= count
        median = math.exp(rnd.uniform(math.log(10**6), math.log(5 * 10**9)))
        start, shift = rnd.randrange(brokers), rnd.choice(shifts)
        parts = []
        for p in range(count):
            first = (start + p) % brokers
            replicas = [ordered[(first + k * shift) % brokers] for k in range(rf)]
            size = int(median * rnd.uniform(0.7, 1.3))
            dirs = [DIRS[rnd.randrange(len(DIRS))] for _ in replicas]
            for b, d in zip(replicas, dirs):
                used[(b, d)] += size
            parts.append({"partition": p, "replicas": replicas, "isr": replicas, "leader": replicas[0],
                          "size_bytes": size, "log_dirs": dirs})
        topics.append({"name": f"topic-{t:04d}", "min_insync_replicas": min(2, rf), "partitions": parts})
        t += 1
    broker_docs = [
        {"id": b, "rack": rack_of(b), "alive": True, "draining": False,
         "log_dirs": [{"path": d, "online": True, "total_bytes": DIR_TOTAL_BYTES,
                       "usable_bytes": max(0, DIR_TOTAL_BYTES - used[(b, d)])} for d in DIRS]}
        for b in range(brokers)
    ]
    return {"brokers": broker_docs, "topics": topics}


def add_broker_args(brokers: int, count: int) -> list[str]:
    """`--add-broker ID:RACK` for `count` new brokers after the existing ones, racks alternating."""
    return [f"--add-broker={b}:{rack_of(b)}" for b in range(brokers, brokers + count)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=333_334)
    parser.add_argument("--brokers", type=int, default=300)
    parser.add_argument("--rf", type=int, default=3)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--out", help="file to write (default: stdout)")
    parser.add_argument("--print-add-brokers", type=int, metavar="N",
                        help="print the --add-broker arguments of N new brokers and exit")
    args = parser.parse_args(argv)
    if args.print_add_brokers is not None:
        print(" ".join(add_broker_args(args.brokers, args.print_add_brokers)))
        return
    document = build_snapshot(args.partitions, args.brokers, args.rf, args.seed)
    text = json.dumps(document, separators=(",", ":"))
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
