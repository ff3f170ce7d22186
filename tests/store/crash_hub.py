"""Helper process for the acknowledged-start crash test (not a test module).

``python crash_hub.py <store-dir> <fsync>`` opens an ``AsyncHub(store=dir, fsync=...)`` and starts
continuable children forever, printing ``started <id>`` (flushed) as soon as ``hub.start`` returned and
``job <child id>`` as soon as a background ``spawn`` returned its job (whose child is a one-shot log).
Every child's model waits an hour, so no turn ends, and nothing but the start itself can have made the
child's log durable. The test kills the process with SIGKILL 0-3 ms after reading a line.
"""

from __future__ import annotations

import asyncio
import sys

import toh_nb as tn


async def _never(request):
    await asyncio.sleep(3600)
    return "late"


async def main() -> None:
    directory, fsync = sys.argv[1], sys.argv[2]
    async with tn.AsyncHub(tn.FunctionModel(_never), store=directory, fsync=fsync) as hub:
        count = 0
        while True:
            count += 1
            kid = await hub.start(f"task {count}", label=f"kid {count}")
            print(f"started {kid.id}", flush=True)
            if count % 3 == 0:
                job = await hub.spawn(f"job {count}", label=f"job {count}", background=True)
                print(f"job {job.child_id}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
