# The sources of the focalscope._core extension, relative to python/: used by python/CMakeLists.txt (the package)
# and by the main build, which compiles them for compile_commands.json so clang-tidy checks them like the rest.
set(FOCAL_PY_SOURCES
    src/module.cpp
    src/bind_capture.cpp
    src/bind_figure.cpp
    src/bind_model.cpp
    src/bind_stats.cpp
    src/bind_sweep.cpp
    src/bind_temp_spec.cpp
    src/py_convert.cpp
    src/py_html.cpp
    src/py_runs.cpp)
