"""Run ``python -m llama_cpp.server`` with llama.cpp's extra buffer types off (the test server's launcher).

Why a launcher: on CPUs with Intel AMX the AMX matmul path of llama.cpp (an extra buffer type)
crashed with a segmentation fault on the bundled SmolLM2 Q4_1 GGUF (llama-cpp-python 0.3.36), and the
server has no option to turn it off. LocalModel loads its models the same way
(``toh_nb.models.local_engine.extra_buffers_off``). Arguments are passed to the server unchanged.
"""

from __future__ import annotations

import runpy
import sys

from toh_nb.models.local_engine import extra_buffers_off


def main() -> None:
    sys.argv = ["llama_cpp.server", *sys.argv[1:]]
    with extra_buffers_off():
        runpy.run_module("llama_cpp.server", run_name="__main__")


if __name__ == "__main__":
    main()
