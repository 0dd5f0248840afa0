#!/usr/bin/env python3
"""Where the engine's instructions go, per request, by job and by source line.

    python3 benches/profile.py [uniform|exponential] [LINES]

Builds `examples/instructions.rs` in the bench's build (fat LTO, with line tables), runs it
under callgrind with per-instruction counts at 100 000 and at 10 000 requests, and gives each
instruction's count (the difference of the two runs, over the 90 000 requests between them) to
the innermost function of this project that `addr2line -i` finds for its address: inlined
standard-library code counts where it was inlined. Then it groups the functions into the jobs
of docs/performance.md's table ("Where they go, by job") and lists the LINES costliest lines.

Counts are instructions, so the machine's load does not move them; names are what the line
tables say, and code the linker folded may carry another function's name (a few percent end
up "not placed"). Needs valgrind and binutils' addr2line. Takes about two minutes.
"""
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BINARY = os.path.join(TARGET, "release", "examples", "instructions")
LARGE, SMALL = 100_000, 10_000

# Jobs, first match wins, by the innermost project function's name.
JOBS = [
    ("the event queue", r"EventQueue|kernel::Scheduled|least_key|^pop$|^class$"),
    ("the database", r"database::|Databases|on_wake|read_clock|speed|admit_waiting|"
     r"connections_full|reschedule|^lt$|::lt$|^duration$|next_u64"),
    ("the breaker and the bulkhead", r"^enter$|^exit$|policies::|breaker::|bulkhead::|"
     r"try_admit|try_acquire|release_kept|occupancy|observe_state|poll_transition|ceiling"),
    ("metrics and observation", r"^observe$|^record$|^arrived$|^ended$|^count_many$|"
     r"bucket_for|index_for|metrics::|observe::|Observation|hdrhistogram|set_gauge|"
     r"cdf_bucket|record_end|record_arrival|take_percentiles|close_bucket|advance_to"),
    ("monitors", r"monitors::|^entered$|^went_away$|^check_conservation$"),
    ("arrivals, spawning, freeing", r"^new$|^next$|^spawn|arrivals::|open_loop::|allocate|"
     r"\bfree\b|request_freed|on_arrival|::send|even_offset"),
    ("ending a request", r"end_request|reports_as"),
    ("stepping: stages, layers, actions, routing", r"^start|^request$|^kind$|^on_reply|"
     r"^on_query_answered|flow::|advance|enter_layer|finish_step|route|set_stage|step_of|"
     r"request_mut|current_ref|is_live|next_step|past_last_step|settle|hand_over|conclude|"
     r"actions::|decide|outlives_timeout|request_bytes|failed_open|is_slot|rules::|host"),
    ("the event loop: dispatch, drain, checks", r"run_to_end|process|dispatch|drain|"
     r"take_output|count_work|over_memory|violation|engine::run|after_event"),
]


def counts(out_file):
    """Self instructions by address, from a callgrind file written with --dump-instr=yes."""
    costs = collections.Counter()
    address, after_calls = 0, False
    position = re.compile(r"^(0x[0-9a-f]+|\+\d+|-\d+|\*)\s+\S+\s+(\d+)")
    for line in open(out_file):
        if line.startswith("calls="):
            after_calls = True  # the next cost line is the call's inclusive cost
            continue
        match = position.match(line)
        if not match:
            continue
        where = match.group(1)
        if where.startswith("0x"):
            address = int(where, 16)
        elif where[0] in "+-":
            address += int(where)
        if after_calls:
            after_calls = False
            continue
        costs[address] += int(match.group(2))
    return costs


def run(shape, requests, out_file):
    subprocess.run(["valgrind", "--tool=callgrind", "--dump-instr=yes",
                    f"--callgrind-out-file={out_file}", BINARY, shape, str(requests)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return counts(out_file)


def main():
    shape = sys.argv[1] if len(sys.argv) > 1 else "uniform"
    lines_shown = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    env = dict(os.environ, CARGO_PROFILE_BENCH_DEBUG="line-tables-only")
    subprocess.run(["cargo", "build", "--quiet", "--locked", "--profile", "bench",
                    "--example", "instructions"], check=True, cwd=ROOT, env=env)
    out = os.path.join(TARGET, "profile.callgrind")
    per_address = run(shape, LARGE, out)
    per_address.subtract(run(shape, SMALL, out))
    os.remove(out)
    requests = LARGE - SMALL
    addresses = [a for a, c in per_address.items() if c > requests * 0.2]
    located = subprocess.run(["addr2line", "-f", "-i", "-a", "-C", "-e", BINARY]
                             + [hex(a) for a in addresses],
                             check=True, capture_output=True, text=True).stdout.splitlines()
    by_function, by_line = collections.Counter(), collections.Counter()
    frames, address = [], None

    def place():
        if address is None:
            return
        ours = [(f, l) for f, l in frames if ROOT + "/" in l]
        function = ours[0][0] if ours else (frames[0][0] if frames else "?")
        line = ours[0][1].replace(ROOT + "/", "") if ours else "?"
        by_function[function] += per_address[address]
        by_line[line] += per_address[address]

    i = 0
    while i < len(located):
        if located[i].startswith("0x"):
            place()
            address, frames, i = int(located[i], 16), [], i + 1
            continue
        frames.append((located[i], located[i + 1] if i + 1 < len(located) else "?"))
        i += 2
    place()

    jobs, unplaced = collections.Counter(), 0
    for function, cost in by_function.items():
        for job, pattern in JOBS:
            if re.search(pattern, function):
                jobs[job] += cost
                break
        else:
            unplaced += cost
    total = sum(per_address.values())
    print(f"{shape}: {total / requests:.0f} instructions a request")
    for job, _ in JOBS:
        print(f"{jobs[job] / requests:7.0f}  {job}")
    print(f"{unplaced / requests:7.0f}  not placed by name")
    print(f"\nthe {lines_shown} costliest lines:")
    for line, cost in by_line.most_common(lines_shown):
        print(f"{cost / requests:7.0f}  {line}")


if __name__ == "__main__":
    main()
