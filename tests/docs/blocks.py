#!/usr/bin/python3
"""blocks.py — the shell blocks of README.md and docs/*.md, for the docs suite.

A fenced block whose info string is sh, bash or shell is a command a user
would paste. The comment on the line right above its fence says how the
docs suite treats it:

    (none)                          run here, from the top of the tree
    <!-- docs-test: long -->        a benchmark or a sweep: every program
                                    it names exists and answers --help (make:
                                    make -n with the block's arguments)
    <!-- docs-test: hosts N -->     run on N namespace hosts at once
                                    (tests/fabric/test_fabric_topo.sh): host
                                    k runs it with WEFT_RANK=0 made
                                    WEFT_RANK=k-1, 10.0.0.1 made host 1's
                                    address and eth0 made the host's interface
    <!-- docs-test: slurm -->       run on the Slurm test cluster
                                    (tests/fabric/test_slurm.sh): build/ is
                                    the cluster's copy of the programs
    <!-- docs-test: skip REASON --> not run: REASON is install (package or
                                    system installs), suite (make test, or a
                                    part of it), or rdma (hardware not here)

Any other comment, or a skip for another reason, is an error: a block is
tested or it says which of the three exemptions it falls under.

    blocks.py check                    the markers, as make test reads them
    blocks.py list [KIND]              "FILE:LINE KIND" per block
    blocks.py write KIND DIR           each block of KIND as DIR/NNN.sh, its
                                       first line "# FILE:LINE"; prints the
                                       paths (hosts: NNN.HOSTS.sh)
    blocks.py programs FILE            the programs a block file runs, one a
                                       line with its arguments (for long)
Run from the top of the tree."""
import glob
import re
import shlex
import sys

FENCE = re.compile(r"^```(sh|bash|shell)\s*$")
MARK = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
SKIPS = ("install", "suite", "rdma")
KINDS = ("run", "long", "hosts", "slurm", "skip")


def doc_files():
    return ["README.md"] + sorted(glob.glob("docs/*.md"))


def parse_mark(text):
    """(kind, argument) of a marker's text, or raise ValueError."""
    words = text.split()
    if len(words) == 1 and words[0] in ("long", "slurm"):
        return words[0], ""
    if len(words) == 2 and words[0] == "hosts" and words[1].isdigit() and int(words[1]) >= 2:
        return "hosts", words[1]
    if len(words) == 2 and words[0] == "skip" and words[1] in SKIPS:
        return "skip", words[1]
    raise ValueError("docs-test marker '%s': expected long, slurm, hosts N (N >= 2) "
                     "or skip %s" % (text, "|".join(SKIPS)))


def blocks(path):
    """Yield (line, kind, argument, text) for each shell block of path."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        kind, arg = "run", ""
        m = MARK.match(lines[i - 1]) if i > 0 else None
        if m:
            try:
                kind, arg = parse_mark(m.group(1))
            except ValueError as e:
                raise ValueError("%s:%d: %s" % (path, i, e))
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if end == len(lines):
            raise ValueError("%s:%d: the block has no closing fence" % (path, i + 1))
        yield i + 1, kind, arg, "\n".join(lines[i + 1:end]) + "\n"
        i = end + 1


def all_blocks():
    for path in doc_files():
        for line, kind, arg, text in blocks(path):
            yield path, line, kind, arg, text


def commands(text):
    """The commands of a block: continuation lines joined, comments and
    blank lines dropped, split at ; && || and |."""
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.split("\n"):
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"\s*(?:;|&&|\|\||\|)\s*", line):
            if part:
                yield part


def program_of(command):
    """(program, arguments) of one command, its VAR=value prefix skipped."""
    words = shlex.split(command)
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words.pop(0)
    return (words[0], words[1:]) if words else (None, [])


def cmd_write(kind, outdir):
    n = 0
    for path, line, k, arg, text in all_blocks():
        if k != kind:
            continue
        n += 1
        name = "%s/%03d%s.sh" % (outdir, n, "." + arg if arg else "")
        with open(name, "w", encoding="utf-8") as f:
            f.write("# %s:%d\n%s" % (path, line, text))
        print(name)


def cmd_programs(block_file):
    text = open(block_file, encoding="utf-8").read()
    for command in commands(text):
        prog, args = program_of(command)
        if prog:
            print(" ".join([shlex.quote(prog)] + [shlex.quote(a) for a in args]))


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    try:
        if argv[1] == "check":
            counts = {}
            for b in all_blocks():
                counts[b[2]] = counts.get(b[2], 0) + 1
            print(" ".join("%s %d" % (k, counts.get(k, 0)) for k in KINDS))
        elif argv[1] == "list":
            for path, line, kind, arg, _ in all_blocks():
                if len(argv) < 3 or argv[2] == kind:
                    print("%s:%d %s%s" % (path, line, kind, " " + arg if arg else ""))
        elif argv[1] == "write" and len(argv) == 4 and argv[2] in KINDS:
            cmd_write(argv[2], argv[3])
        elif argv[1] == "programs" and len(argv) == 3:
            cmd_programs(argv[2])
        else:
            print("blocks.py: bad arguments (see --help)", file=sys.stderr)
            return 2
    except ValueError as e:
        print("blocks.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
