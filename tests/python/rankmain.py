"""One rank of a rankrun job: MODULE FUNCTION RANK NRANKS PORT ARGS(json)."""
import importlib
import json
import sys


def main():
    module, function, rank, nranks, port, args = sys.argv[1:7]
    fn = getattr(importlib.import_module(module), function)
    value = fn(int(rank), int(nranks), int(port), **json.loads(args))
    print("RESULT " + json.dumps(value), flush=True)


if __name__ == "__main__":
    main()
