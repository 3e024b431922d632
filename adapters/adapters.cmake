# The Python engine adapters `foldcheck engines` ships (the protocol: README.md here), listed
# once: cmake/FoldcheckInstall.cmake installs them to PREFIX/share/foldcheck/engines and
# python/CMakeLists.txt copies them into the Python package (foldcheck/share/foldcheck/engines).
# A new Python engine adds its file here. The compiler adapters of `bisect --cmd` (*_bisect.py,
# *_fold.py) are run from the source tree and are not installed.
set(FOLDCHECK_PYTHON_ADAPTERS
  ${CMAKE_CURRENT_LIST_DIR}/engine_common.py
  ${CMAKE_CURRENT_LIST_DIR}/onnxruntime_engine.py
  ${CMAKE_CURRENT_LIST_DIR}/onnxoptimizer_engine.py
  ${CMAKE_CURRENT_LIST_DIR}/openvino_engine.py)
