"""Run ``python -m llama_cpp.server`` with llama.cpp's extra buffer types off (the test server's launcher).

Why a launcher: on CPUs with Intel AMX the AMX matmul path of llama.cpp (an extra buffer type)
crashed with a segmentation fault on the bundled SmolLM2 Q4_1 GGUF (llama-cpp-python 0.3.36), and the
server has no option to turn it off. LocalModel loads its models the same way (see
``toh_nb.models.local_engine``). Arguments are passed to the server unchanged.
"""

from __future__ import annotations

import runpy
import sys


def main() -> None:
    from llama_cpp import llama_cpp as low

    defaults = low.llama_model_default_params

    def without_extra_buffers():
        params = defaults()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = False
        return params

    low.llama_model_default_params = without_extra_buffers
    sys.argv = ["llama_cpp.server", *sys.argv[1:]]
    runpy.run_module("llama_cpp.server", run_name="__main__")


if __name__ == "__main__":
    main()
