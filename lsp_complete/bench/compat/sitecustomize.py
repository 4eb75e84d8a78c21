"""Imported at start-up by every server the bench measures: `install.ServerVersion.server_env`
puts this folder on the server's PYTHONPATH, and Python imports `sitecustomize` by itself.

Where the bench says so (`NO_EXTRA_BUFFERS` set: llama.cpp's extra CPU buffer types are not
safe in this build, `engine.llama_backend.extra_buffer_types_safe`), every model the server
loads has them off. An earlier release that did not know of the AMX crash then runs instead of
dying in its first decode, on the same kernels as today's engine; today's engine sets the
field itself, so for it nothing changes.
"""

import os

NO_EXTRA_BUFFERS = "LSP_COMPLETE_BENCH_NO_EXTRA_BUFFERS"

if os.environ.get(NO_EXTRA_BUFFERS) == "1":
    try:
        import llama_cpp
        import llama_cpp.llama_cpp as llama_cpp_raw
    except ImportError:  # a server without llama.cpp (a remote engine) has nothing to turn off
        pass
    else:
        _default_params = llama_cpp_raw.llama_model_default_params

        def _params_without_extra_buffers() -> llama_cpp_raw.llama_model_params:
            params: llama_cpp_raw.llama_model_params = _default_params()
            params.use_extra_bufts = False
            return params

        # `llama_cpp.Llama` calls the module's function; a release's own engine the package's
        llama_cpp_raw.llama_model_default_params = _params_without_extra_buffers
        llama_cpp.llama_model_default_params = _params_without_extra_buffers
